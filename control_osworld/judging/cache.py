"""A content-addressed cache of judges' model replies (monitors, classifiers), on disk.

Key = sha256 of (model, the exact messages, the generate config, the attempt number). The
attempt number is in the key so a retry after a malformed reply asks again instead of
replaying the same bad answer, and a re-run replays every attempt for free. Only completed
calls are stored; a network failure is not, so it is retried on the next run.
Deliberately not inspect's cache: its key and expiry are inspect's to change, and
control-arena's monitors turn it on by default (stale scores across prompt edits).

Caches travel with the scores: by default the reply cache and the OCR cache live in the scores
store's folder (`beside_store`: `<store>/cache/monitor`, `<store>/cache/ocr`; the main job's
store is `<log_dir>/scores`), so a copied log folder re-scores without asking a model or OCR'ing
again, and machines that share a log folder share them. The user's cache
(`$XDG_CACHE_HOME/control-osworld`) sits behind it: read when the store's cache lacks a key (the
entry is then copied into the store's), written with it. An explicit `cache_dir` is the only one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["FileLayers", "ReplyCache", "beside_store", "default_cache_dir", "message_key"]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "control-osworld" / "monitor-cache"


def beside_store(store: str | Path) -> Path:
    """The caches' folder for a scores store: `<store>/cache` (`monitor/`, `ocr/` inside it)."""
    return Path(store) / "cache"


class FileLayers:
    """Content-addressed text files, `<root>/<key[:2]>/<key><suffix>`, under one or more roots:
    read from the first root that has the key (copied then into the first root), written to
    every root (atomically: readers never see half a file). A root other than the first that
    cannot be written is skipped; a torn or unreadable file reads as a miss."""

    def __init__(self, roots: list[Path], suffix: str):
        if not roots:
            raise ValueError("FileLayers needs at least one root")
        self.roots = [Path(r) for r in dict.fromkeys(Path(r) for r in roots)]
        self.suffix = suffix

    def _path(self, root: Path, key: str) -> Path:
        return root / key[:2] / f"{key}{self.suffix}"

    def read(self, key: str) -> str | None:
        for i, root in enumerate(self.roots):
            try:
                text = self._path(root, key).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if i:
                self._write(self.roots[0], key, text, strict=False)
            return text
        return None

    def write(self, key: str, text: str) -> None:
        for i, root in enumerate(self.roots):
            self._write(root, key, text, strict=(i == 0))

    def _write(self, root: Path, key: str, text: str, strict: bool) -> None:
        path = self._path(root, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError:
            if strict:
                raise


def message_key(model: str, messages: list[dict[str, Any]], generate: dict[str, Any], attempt: int) -> str:
    """`messages`: [{"role", "content": [{"type": "text", "text"} | {"type": "image", "sha256", "mime"}]}]."""
    blob = json.dumps(
        {"model": model, "messages": messages, "generate": generate, "attempt": attempt},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class ReplyCache:
    """`root`: the cache folder (default: the user's); `fallbacks`: folders behind it (read on a
    miss and copied forward, written too)."""

    def __init__(self, root: str | Path | None = None, enabled: bool = True, fallbacks: tuple[Path, ...] = ()):
        self.root = Path(root) if root is not None else default_cache_dir()
        self.enabled = enabled
        self.layers = FileLayers([self.root, *fallbacks], ".json")

    @classmethod
    def beside(cls, store: str | Path, enabled: bool = True) -> "ReplyCache":
        """The store's own cache, with the user's behind it."""
        return cls(beside_store(store) / "monitor", enabled=enabled, fallbacks=(default_cache_dir(),))

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        text = self.layers.read(key)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None  # a torn write from a killed run reads as a miss
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.layers.write(key, json.dumps(value))
