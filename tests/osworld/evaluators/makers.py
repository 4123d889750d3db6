"""Hand-made test files: PDFs written byte by byte (a Helvetica text layer, optional JPEG
images), so the evaluator tests need no PDF writer."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(path: Path, pages: list[str], images: list[list[Image.Image]] | None = None) -> Path:
    """A PDF with one page per text (each line a text line in Helvetica); `images[i]` are JPEG
    images drawn on page i."""
    images = images or [[] for _ in pages]
    objs: list[bytes] = []

    def add(body: bytes) -> int:
        objs.append(body)
        return len(objs)

    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    pages_id = add(b"")  # filled below
    kids = []
    for text, imgs in zip(pages, images):
        xobjs = {}
        draw = b""
        for k, im in enumerate(imgs):
            buf = io.BytesIO()
            im.convert("RGB").save(buf, "JPEG", quality=95)
            data = buf.getvalue()
            iid = add(b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB "
                      b"/BitsPerComponent 8 /Filter /DCTDecode /Length %d >>\nstream\n" % (im.width, im.height, len(data))
                      + data + b"\nendstream")
            xobjs[f"Im{k}"] = iid
            draw += b"q %d 0 0 %d 72 %d cm /Im%d Do Q\n" % (im.width, im.height, 100 + 150 * k, k)
        lines = b"".join(b"(%s) Tj T*\n" % _escape(line).encode("latin-1") for line in text.split("\n"))
        content = b"BT /F1 12 Tf 14 TL 72 720 Td\n" + lines + b"ET\n" + draw
        cid = add(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        xo = b" ".join(b"/%s %d 0 R" % (k.encode(), v) for k, v in xobjs.items())
        pid = add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                  b"/Resources << /Font << /F1 %d 0 R >> /XObject << %s >> >> >>" % (pages_id, cid, font, xo))
        kids.append(pid)
    objs[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, catalog, xref)
    path.write_bytes(bytes(out))
    return path


def gradient(w: int = 64, h: int = 48, seed: int = 0) -> Image.Image:
    """A smooth RGB test image with some structure (different seeds: different structure)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    fx, fy = rng.uniform(0.05, 0.3, 2)
    r = 127 + 100 * np.sin(x * fx + y * fy)
    g = 127 + 100 * np.cos(x * fy - y * fx)
    b = (x * 255 / max(w - 1, 1))
    return Image.fromarray(np.stack([r, g, b], -1).clip(0, 255).astype("uint8"), "RGB")
