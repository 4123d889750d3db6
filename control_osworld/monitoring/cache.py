"""A content-addressed cache of monitor model replies, on disk.

Key = sha256 of (model, the exact messages, the generate config, the attempt number). The
attempt number is in the key so a retry after a malformed reply asks again instead of
replaying the same bad answer, and a re-run replays every attempt for free. Only completed
calls are stored; a network failure is not, so it is retried on the next run.
Deliberately not inspect's cache: its key and expiry are inspect's to change, and
control-arena's monitors turn it on by default (stale scores across prompt edits).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["ReplyCache", "default_cache_dir", "message_key"]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "control-osworld" / "monitor-cache"


def message_key(model: str, messages: list[dict[str, Any]], generate: dict[str, Any], attempt: int) -> str:
    """`messages`: [{"role", "content": [{"type": "text", "text"} | {"type": "image", "sha256", "mime"}]}]."""
    blob = json.dumps(
        {"model": model, "messages": messages, "generate": generate, "attempt": attempt},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class ReplyCache:
    def __init__(self, root: str | Path | None = None, enabled: bool = True):
        self.root = Path(root) if root is not None else default_cache_dir()
        self.enabled = enabled

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        try:
            return json.loads(self._path(key).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None  # a torn write from a killed run reads as a miss

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not self.enabled:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)  # atomic: readers never see half a reply
