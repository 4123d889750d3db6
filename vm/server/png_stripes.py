"""A PNG encoder for screens that re-compresses only what changed since the last frame.

Between two agent steps most of a screen is unchanged. The image is cut into horizontal
stripes; each stripe is deflated on its own and ended with a full flush, which byte-aligns
it and resets the compressor, so its compressed bytes do not depend on the stripes before it.
An unchanged stripe's bytes (and its Adler-32) are reused; the stream is closed with an empty
final block and the Adler-32 of the whole, combined from the stripes' (zlib's
adler32_combine). Stdlib + Pillow, so it runs inside the desktop.
"""

from __future__ import annotations

import struct
import threading
import zlib

_BASE = 65521
_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_FINAL_EMPTY_BLOCK = b"\x03\x00"  # BFINAL=1, fixed Huffman, end-of-block


def adler32_combine(adler1: int, adler2: int, len2: int) -> int:
    """Adler-32 of A+B from those of A and B and the length of B (zlib's adler32_combine)."""
    rem = len2 % _BASE
    sum1 = adler1 & 0xFFFF
    sum2 = (rem * sum1) % _BASE
    sum1 += (adler2 & 0xFFFF) + _BASE - 1
    sum2 += ((adler1 >> 16) & 0xFFFF) + ((adler2 >> 16) & 0xFFFF) + _BASE - rem
    if sum1 >= _BASE:
        sum1 -= _BASE
    if sum1 >= _BASE:
        sum1 -= _BASE
    if sum2 >= (_BASE << 1):
        sum2 -= _BASE << 1
    if sum2 >= _BASE:
        sum2 -= _BASE
    return sum1 | (sum2 << 16)


def _chunk(tag: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)


class StripePNG:
    """`encode(rgb_bytes, width, height) -> PNG bytes`; remembers the last frame's stripes."""

    def __init__(self, rows: int = 16, level: int = 1):
        self.rows = rows
        self.level = level
        self._size: tuple[int, int] | None = None
        self._stripes: list[tuple[bytes, bytes, int, int]] = []  # raw, deflated, adler, length
        self._lock = threading.Lock()

    def encode(self, rgb: bytes, width: int, height: int) -> bytes:
        line = width * 3
        if len(rgb) != line * height:
            raise ValueError(f"expected {line * height} bytes of RGB for {width}x{height}, got {len(rgb)}")
        with self._lock:
            if self._size != (width, height):
                self._size, self._stripes = (width, height), []
            parts, adler = [], 1
            for i, r0 in enumerate(range(0, height, self.rows)):
                r1 = min(height, r0 + self.rows)
                raw = rgb[r0 * line:r1 * line]
                if i < len(self._stripes) and self._stripes[i][0] == raw:
                    _, deflated, a, n = self._stripes[i]
                else:
                    filtered = b"".join(b"\x00" + raw[j * line:(j + 1) * line] for j in range(r1 - r0))
                    c = zlib.compressobj(self.level, zlib.DEFLATED, -15)
                    deflated = c.compress(filtered) + c.flush(zlib.Z_FULL_FLUSH)
                    a, n = zlib.adler32(filtered), len(filtered)
                    entry = (raw, deflated, a, n)
                    if i < len(self._stripes):
                        self._stripes[i] = entry
                    else:
                        self._stripes.append(entry)
                parts.append(deflated)
                adler = adler32_combine(adler, a, n)
        idat = b"\x78\x01" + b"".join(parts) + _FINAL_EMPTY_BLOCK + struct.pack(">I", adler)
        ihdr = struct.pack(">2I5B", width, height, 8, 2, 0, 0, 0)
        return _PNG_SIG + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
