"""The in-desktop PNG encoder that re-compresses only changed stripes: every frame decodes to
exactly the pixels given, whatever changed, and its checksums are right."""

from __future__ import annotations

import io
import random
import sys
import zlib
from pathlib import Path

from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "vm" / "server"))
from png_stripes import StripePNG, adler32_combine  # noqa: E402


def test_adler32_combine_matches_zlib():
    r = random.Random(0)
    for _ in range(300):
        a = r.randbytes(r.randrange(0, 5000))
        b = r.randbytes(r.randrange(0, 70000))
        assert adler32_combine(zlib.adler32(a), zlib.adler32(b), len(b)) == zlib.adler32(a + b)


def _decode(png: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(png))
    img.load()  # zlib checks the stream's Adler-32 here
    return img


def test_frames_decode_exactly_as_they_change():
    r = random.Random(1)
    img = Image.new("RGB", (301, 203), (240, 240, 240))
    d = ImageDraw.Draw(img)
    enc = StripePNG(rows=16)
    for frame in range(25):
        # change a random box (or nothing, or everything) between frames
        kind = frame % 5
        if kind == 1:
            x, y = r.randrange(290), r.randrange(190)
            d.rectangle([x, y, x + r.randrange(1, 40), y + r.randrange(1, 40)],
                        fill=tuple(r.randrange(256) for _ in range(3)))
        elif kind == 4:
            img = Image.frombytes("RGB", img.size, r.randbytes(301 * 203 * 3))
            d = ImageDraw.Draw(img)
        png = enc.encode(img.tobytes(), *img.size)
        out = _decode(png)
        assert out.size == img.size and out.mode == "RGB" and out.tobytes() == img.tobytes()


def test_size_change_and_bad_input():
    enc = StripePNG()
    for size in [(10, 7), (64, 33), (10, 7)]:
        img = Image.new("RGB", size, (1, 2, 3))
        assert _decode(enc.encode(img.tobytes(), *size)).tobytes() == img.tobytes()
    try:
        enc.encode(b"abc", 10, 7)
    except ValueError as e:
        assert "expected 210 bytes" in str(e)
    else:
        raise AssertionError("short input accepted")
