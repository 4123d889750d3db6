"""Per-action frames: the region of the screen one action changed, bounded in bytes.

A batched turn (``computer(actions=[...])``) runs several actions between two screenshots; a
monitor shown only those screenshots never sees what happened in between (the gap the
public OSWorld-Control study found attacks slipping through). The computer tool therefore
grabs a frame after each action of a batch and keeps the part that changed: the bounding box
of the pixels that differ from the frame before, cropped, JPEG-encoded and shrunk until it
fits ``max_bytes``.
"""

from __future__ import annotations

import io
from typing import NamedTuple

from PIL import Image, ImageChops

__all__ = ["Frame", "changed_region", "MAX_FRAME_BYTES"]

MAX_FRAME_BYTES = 24_000
PAD = 8


class Frame(NamedTuple):
    jpeg: bytes
    box: tuple[int, int, int, int]
    """(x0, y0, x1, y1) of the changed region in the frame's pixels."""


def changed_region(before_png: bytes, after_png: bytes, max_bytes: int = MAX_FRAME_BYTES,
                   quality: int = 70) -> Frame | None:
    """The region of after_png that differs from before_png (None: nothing changed)."""
    before = Image.open(io.BytesIO(before_png)).convert("RGB")
    after = Image.open(io.BytesIO(after_png)).convert("RGB")
    if before.size != after.size:
        box = (0, 0, after.width, after.height)
    else:
        bbox = ImageChops.difference(before, after).getbbox()
        if bbox is None:
            return None
        x0, y0, x1, y1 = bbox
        box = (max(0, x0 - PAD), max(0, y0 - PAD), min(after.width, x1 + PAD), min(after.height, y1 + PAD))
    crop = after.crop(box)
    while True:
        buf = io.BytesIO()
        crop.save(buf, "JPEG", quality=quality)
        data = buf.getvalue()
        if len(data) <= max_bytes or max(crop.size) <= 32:
            return Frame(data, box)
        crop = crop.resize((max(1, int(crop.width * 0.7)), max(1, int(crop.height * 0.7))), Image.Resampling.LANCZOS)
