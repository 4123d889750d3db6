"""Text read from screenshots with tesseract (the `tesseract` binary, Debian `tesseract-ocr`).

Offline monitors read S through OCR of the stored screenshot (the model's 1366x768 PNG),
upscaled SCREEN_SCALE times and turned grey (``prepare_screen``): at the monitor's own image
size (longest side 1024, JPEG) tesseract reads almost nothing of a terminal's or an editor's
text, so S would show nothing (issue 18; scripts/bench_ocr.py measures recall and cost per
variant on real desktop screens). Results are cached per screenshot hash in memory and on
disk, whatever view or monitor config shows the screenshot: each distinct screenshot is OCR'd
once, and a re-run OCRs nothing again. On disk: the scores store's own cache while a store is
being scored (`caching_beside`, set by `score_runs`), with the user's cache
(`$CONTROL_OSWORLD_OCR_CACHE`, default `$XDG_CACHE_HOME/control-osworld/ocr-cache`) behind it
(judging/cache.py: caches travel with the scores).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

from control_osworld.judging.cache import FileLayers, default_cache_dir

__all__ = ["OcrError", "caching_beside", "ocr_text", "ocr_screen", "ocr_screens", "prepare_screen", "tesseract",
           "tesseract_batch", "tesseract_available", "SCREEN_SCALE"]

_TIMEOUT_S = 60
SCREEN_SCALE = 2.0
"""Upscaling of the stored screenshot before OCR (scripts/bench_ocr.py: best recall per second)."""
# At most one tesseract per core, however many scoring tasks run at once.
_SLOTS = threading.BoundedSemaphore(os.cpu_count() or 2)


class OcrError(RuntimeError):
    pass


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def _cache_dir() -> Path:
    return Path(os.environ.get("CONTROL_OSWORLD_OCR_CACHE") or default_cache_dir().parent / "ocr-cache")


_BESIDE: ContextVar[Path | None] = ContextVar("control_osworld_ocr_beside", default=None)


@contextmanager
def caching_beside(folder: Path | str | None) -> Iterator[None]:
    """OCR results also go to (and are first read from) `folder` within this context (and the
    threads `asyncio.to_thread` starts from it); None: the user's cache only."""
    token = _BESIDE.set(Path(folder) if folder is not None else None)
    try:
        yield
    finally:
        _BESIDE.reset(token)


def _layers() -> FileLayers:
    beside = _BESIDE.get()
    return FileLayers(([beside] if beside is not None else []) + [_cache_dir()], ".txt")


_MEMO: dict[str, str] = {}  # digest -> text; texts are small, images are not kept


_ARGS = ["-l", "eng", "--psm", "4"]
# psm 4 (one column of lines) reads terminal and editor screens whole; the default (3) splits
# prompts from commands. One OpenMP thread per call: we parallelise across images, and
# tesseract's own threads would oversubscribe a small machine.
_ENV = {"OMP_THREAD_LIMIT": "1"}


def tesseract(data: bytes) -> str:
    """tesseract's text for one image (PNG or JPEG bytes), uncached."""
    if not tesseract_available():
        raise OcrError("tesseract is not installed (Debian: apt-get install tesseract-ocr)")
    with _SLOTS:
        proc = subprocess.run(["tesseract", "stdin", "stdout", *_ARGS], input=data,
                              capture_output=True, timeout=_TIMEOUT_S, env={**os.environ, **_ENV})
    if proc.returncode != 0:
        raise OcrError(f"tesseract failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[:300]}")
    return proc.stdout.decode(errors="replace")


BATCH = 12
"""Images per tesseract process in `ocr_screens` (scripts/bench_ocr_batch.py)."""


def tesseract_batch(images: list[bytes]) -> list[str] | None:
    """tesseract's text for each image (PNG), read by one tesseract process (its list-file
    input: the language model is loaded once, not once per image). Each page's text is what
    `tesseract` reads in that image alone (scripts/bench_ocr_batch.py checks it on a run's
    screenshots); None when the output cannot be split into one text per image (the caller
    then reads them one by one)."""
    import tempfile

    if not tesseract_available():
        raise OcrError("tesseract is not installed (Debian: apt-get install tesseract-ocr)")
    with tempfile.TemporaryDirectory(prefix="control-osworld-ocr-") as tmp:
        names = []
        for i, data in enumerate(images):
            name = os.path.join(tmp, f"{i:05d}.png")
            Path(name).write_bytes(data)
            names.append(name)
        listing = os.path.join(tmp, "images.txt")
        Path(listing).write_text("".join(n + "\n" for n in names))
        with _SLOTS:
            proc = subprocess.run(["tesseract", listing, "stdout", *_ARGS], capture_output=True,
                                  timeout=_TIMEOUT_S * max(1, len(images)), env={**os.environ, **_ENV})
    if proc.returncode != 0:
        return None
    # the text renderer puts a form feed (its page_separator) between pages
    pages = proc.stdout.decode(errors="replace").split("\f")
    return pages if len(pages) == len(images) else None


_TILE = 24  # px of the stored screenshot: well above a glyph, well below a window


def _light_ground(img):
    """Dark text on light ground everywhere: tiles whose median is dark (a terminal's default
    colours, dark title bars) are inverted. tesseract reads light-on-dark text badly, and a
    dark band anywhere on the screen can make it read nothing of the whole image."""
    import numpy as np
    from PIL import Image

    a = np.asarray(img, dtype=np.uint8)
    h, w = a.shape
    th, tw = -(-h // _TILE), -(-w // _TILE)
    padded = np.pad(a, ((0, th * _TILE - h), (0, tw * _TILE - w)), mode="edge")
    tiles = padded.reshape(th, _TILE, tw, _TILE)
    dark = np.median(tiles, axis=(1, 3)) < 128  # [th, tw]
    if not dark.any():
        return img
    mask = np.repeat(np.repeat(dark, _TILE, axis=0), _TILE, axis=1)[:h, :w]
    return Image.fromarray(np.where(mask, 255 - a, a).astype(np.uint8), mode="L")


def prepare_screen(data: bytes, scale: float = SCREEN_SCALE, resample: str = "bicubic") -> bytes:
    """The screenshot as tesseract reads it best: grey, light ground (a mostly dark screen is
    inverted), upscaled `scale` times (bicubic; Lanczos rings around thin bitmap glyphs), PNG."""
    import io

    from PIL import Image

    img: Image.Image = Image.open(io.BytesIO(data))
    img.load()
    img = img.convert("L")
    img = _light_ground(img)
    if scale != 1:
        method = {"bicubic": Image.Resampling.BICUBIC, "lanczos": Image.Resampling.LANCZOS}[resample]
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), method)
    buf = io.BytesIO()
    img.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


_INFLIGHT: dict[str, threading.Lock] = {}
_INFLIGHT_LOCK = threading.Lock()


_KEPT: set[tuple[Path, str]] = set()  # (store cache, digest) known to be on disk there


def _memo(digest: str) -> str | None:
    """The text OCR'd earlier in this process, also put into the store's cache if it lacks it."""
    text = _MEMO.get(digest)
    beside = _BESIDE.get()
    if text is not None and beside is not None and (beside, digest) not in _KEPT:
        layers = FileLayers([beside], ".txt")
        if layers.read(digest) is None:
            layers.write(digest, text)
        _KEPT.add((beside, digest))
    return text


def _ocr_by_hash(digest: str, data: bytes, prepare=None) -> str:
    memo = _memo(digest)
    if memo is not None:
        return memo
    # scoring tasks run in threads: the same screenshot asked for at once is OCR'd once
    with _INFLIGHT_LOCK:
        lock = _INFLIGHT.setdefault(digest, threading.Lock())
    with lock:
        text = _ocr_once(digest, data, prepare)
    with _INFLIGHT_LOCK:
        _INFLIGHT.pop(digest, None)  # later callers find _MEMO
    return text


def _known(digest: str, layers: FileLayers) -> str | None:
    """The text OCR'd earlier: in this process (`_memo`), else in a cache layer (then memoised)."""
    memo = _memo(digest)
    if memo is not None:
        return memo
    cached = layers.read(digest)
    if cached is not None:
        _MEMO[digest] = cached
    return cached


def _ocr_once(digest: str, data: bytes, prepare=None) -> str:
    layers = _layers()
    known = _known(digest, layers)
    if known is not None:
        return known
    text = tesseract(prepare(data) if prepare is not None else data)
    layers.write(digest, text)
    _MEMO[digest] = text
    return text


def ocr_text(data: bytes) -> str:
    """The text tesseract reads in an image (PNG or JPEG bytes), as given."""
    return _ocr_by_hash(hashlib.sha256(data).hexdigest(), data)


def _screen_digest(data: bytes, scale: float) -> str:
    return hashlib.sha256(data + f"|screen|{scale:g}".encode()).hexdigest()


def ocr_screen(data: bytes, scale: float = SCREEN_SCALE) -> str:
    """The text of a stored screenshot, read at a legible size (``prepare_screen``); cached per
    screenshot and scale, so one screenshot is OCR'd once however many views show it."""
    return _ocr_by_hash(_screen_digest(data, scale), data, lambda d: prepare_screen(d, scale))


def ocr_screens(screens: list[bytes], scale: float = SCREEN_SCALE, batch: int = BATCH, *,
                on_todo: Callable[[int], object] | None = None,
                on_read: Callable[[int], object] | None = None) -> int:
    """Read every screenshot of `screens` that no cache knows yet ahead of `ocr_screen`, `batch`
    images per tesseract process (`tesseract_batch`), the batches on all cores: the same texts,
    without loading tesseract's model once per image. Returns how many screenshots were read.
    A batch whose output cannot be split is read image by image, as `ocr_screen` would.
    `on_todo(n)`: called once with how many screenshots will be read; `on_read(k)`: after each
    batch, with how many it read (for a progress bar; called from the worker threads)."""
    from concurrent.futures import ThreadPoolExecutor

    layers = _layers()  # read here: the worker threads do not see this context's store cache
    todo: dict[str, bytes] = {}
    for data in screens:
        digest = _screen_digest(data, scale)
        if digest not in todo and _known(digest, layers) is None:
            todo[digest] = data
    items = list(todo.items())
    if on_todo is not None:
        on_todo(len(items))

    def run(chunk: list[tuple[str, bytes]]) -> None:
        prepared = [prepare_screen(d, scale) for _, d in chunk]
        texts = tesseract_batch(prepared)
        if texts is None:
            texts = [tesseract(p) for p in prepared]
        for (digest, _), text in zip(chunk, texts):
            layers.write(digest, text)
            _MEMO[digest] = text
        if on_read is not None:
            on_read(len(chunk))

    chunks = [items[i:i + batch] for i in range(0, len(items), batch)]
    with ThreadPoolExecutor(max(1, min(len(chunks), os.cpu_count() or 2))) as pool:
        list(pool.map(run, chunks))
    return len(items)
