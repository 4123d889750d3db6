"""The local asset cache: every file a task needs, generated on this machine, never downloaded.

- `asset_dir()`: `$CONTROL_OSWORLD_ASSETS`, else `$XDG_CACHE_HOME/control-osworld/assets`
  (`~/.cache/...` without XDG_CACHE_HOME).
- `ensure_assets()`: runs `tasks/assets/make_assets.py` (deterministic, seeded) into it when
  the generator changed since the last build (a stamp file holds its hash). Safe to call from
  several threads and processes at once (a file lock).
- Tasks name assets as `file://{ASSETS}/<relative path>` in `download` steps and `cloud_file`
  getters, or as a path relative to the asset folder in `upload_file` steps.
- `cached_download(url, path)`: where a `download` of an http(s) URL is looked up instead of
  the network: `<assets>/downloads/<uuid5(url)>_<file name>` (upstream caches downloads the
  same way), or None. Put upstream's files there to run upstream tasks offline.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import threading
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "tasks" / "assets" / "make_assets.py"
PLACEHOLDER = "{ASSETS}"
_lock = threading.Lock()
_ready: set[str] = set()


def asset_dir() -> Path:
    env = os.environ.get("CONTROL_OSWORLD_ASSETS")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "control-osworld" / "assets"


def _generator_hash() -> str:
    return hashlib.sha256(GENERATOR.read_bytes()).hexdigest()[:16] if GENERATOR.exists() else "none"


def ensure_assets(force: bool = False) -> Path:
    """Build the assets if missing or stale; returns the asset folder."""
    d = asset_dir()
    key = str(d)
    if key in _ready and not force:
        return d
    with _lock:
        d.mkdir(parents=True, exist_ok=True)
        stamp = d / ".stamp"
        want = _generator_hash()
        with open(d / ".lock", "w") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            try:
                if force or not stamp.exists() or stamp.read_text().strip() != want:
                    if not GENERATOR.exists():
                        raise FileNotFoundError(f"asset generator {GENERATOR} is missing")
                    spec = importlib.util.spec_from_file_location("control_osworld_make_assets", GENERATOR)
                    mod = importlib.util.module_from_spec(spec)
                    assert spec.loader is not None
                    spec.loader.exec_module(mod)
                    mod.build(d)
                    stamp.write_text(want)
            finally:
                fcntl.flock(lockf, fcntl.LOCK_UN)
        _ready.add(key)
    return d


def expand(text: str) -> str:
    """`{ASSETS}` -> the asset folder (host side only: URLs and local paths, never commands)."""
    if PLACEHOLDER in text:
        return text.replace(PLACEHOLDER, str(ensure_assets()))
    return text


def local_path(ref: str) -> Path:
    """A host file named by `file://...`, an absolute path or a path relative to the asset folder."""
    ref = expand(ref)
    if ref.startswith("file://"):
        return Path(ref[len("file://"):])
    p = Path(ref)
    return p if p.is_absolute() else ensure_assets() / p


def download_cache_path(url: str, path: str = "") -> Path:
    name = os.path.basename(path) or os.path.basename(url.split("?")[0]) or "file"
    return asset_dir() / "downloads" / f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_{name}"


def cached_download(url: str, path: str = "") -> Path | None:
    """The cached copy of an http(s) URL, or None (then the task needs the live web)."""
    p = download_cache_path(url, path)
    if p.exists():
        return p
    folder = asset_dir() / "downloads"
    if folder.is_dir():  # any file name under the same URL key
        hits = sorted(folder.glob(f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_*"))
        if hits:
            return hits[0]
    return None
