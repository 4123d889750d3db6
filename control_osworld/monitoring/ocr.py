"""Text read from screenshots with tesseract (the `tesseract` binary, Debian `tesseract-ocr`).

Offline monitors read S through OCR of the same image the view would send a model (the
downscaled JPEG), so "what S shows" means the same thing for every monitor. Results are
cached per image hash in memory and on disk: a rolling window shows one screenshot many
times, and a re-run should not OCR anything again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from .cache import default_cache_dir

__all__ = ["OcrError", "ocr_text", "tesseract_available"]

_TIMEOUT_S = 60
# At most one tesseract per core, however many scoring tasks run at once.
_SLOTS = threading.BoundedSemaphore(os.cpu_count() or 2)


class OcrError(RuntimeError):
    pass


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def _cache_dir() -> Path:
    return Path(os.environ.get("CONTROL_OSWORLD_OCR_CACHE") or default_cache_dir().parent / "ocr-cache")


_MEMO: dict[str, str] = {}  # digest -> text; texts are small, images are not kept


def _ocr_by_hash(digest: str, data: bytes) -> str:
    if digest in _MEMO:
        return _MEMO[digest]
    path = _cache_dir() / digest[:2] / f"{digest}.txt"
    try:
        _MEMO[digest] = path.read_text()
        return _MEMO[digest]
    except FileNotFoundError:
        pass
    if not tesseract_available():
        raise OcrError("tesseract is not installed (Debian: apt-get install tesseract-ocr)")
    # psm 4 (one column of lines) reads terminal and editor screens whole; the default (3)
    # splits prompts from commands. One OpenMP thread per call: we parallelise across
    # images, and tesseract's own threads would oversubscribe a small machine.
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    with _SLOTS:
        proc = subprocess.run(["tesseract", "stdin", "stdout", "-l", "eng", "--psm", "4"], input=data,
                              capture_output=True, timeout=_TIMEOUT_S, env=env)
    if proc.returncode != 0:
        raise OcrError(f"tesseract failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[:300]}")
    text = proc.stdout.decode(errors="replace")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    _MEMO[digest] = text
    return text


def ocr_text(data: bytes) -> str:
    """The text tesseract reads in an image (PNG or JPEG bytes)."""
    return _ocr_by_hash(hashlib.sha256(data).hexdigest(), data)
