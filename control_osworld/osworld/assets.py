"""The local asset cache: every file a task needs, generated on this machine or fetched once (`fetch-assets`), read offline.

- `asset_dir()`: `$CONTROL_OSWORLD_ASSETS`, else `$XDG_CACHE_HOME/control-osworld/assets`
  (`~/.cache/...` without XDG_CACHE_HOME).
- `ensure_assets()`: runs `tasks/assets/make_assets.py` (deterministic, seeded) into it when
  the generator changed since the last build (a stamp file holds its hash). Safe to call from
  several threads and processes at once (a file lock).
- Tasks name assets as `file://{ASSETS}/<relative path>` in `download` steps and `cloud_file`
  getters, or as a path relative to the asset folder in `upload_file` steps.
- Downloaded assets (http(s) URLs of `download` steps and `cloud_file` getters) live in a
  content-addressed cache, `<assets>/downloads/`: `blobs/<sha256>` holds the bytes,
  `urls/<sha256(url)>.json` maps a URL to its blob (`{url, sha256, size, name}`).
  `control-osworld tasks fetch-assets [PATHS]` fills it when a network is there
  (`fetch_url`, `asset_needs` lists every URL a task file names, with its field);
  `cached_download(url, path)` is what setup steps and getters read instead of the network.
  Upstream's own cache layout, `<assets>/downloads/<uuid5(url)>_<file name>`, is read too.
  A missing asset raises `MissingAssetError`, naming the URL, the task file, the field and the
  command that fetches it; a blob whose bytes do not hash to its name, `CorruptAssetError`.
- A team fetches once: `export-assets` / `import-assets` (`asset_share.py`) move the cache
  between machines, verified by hash.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from control_osworld.resources import data_dir

GENERATOR = data_dir("tasks") / "assets" / "make_assets.py"
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
                    assert spec is not None and spec.loader is not None
                    mod = importlib.util.module_from_spec(spec)
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


def downloads_dir() -> Path:
    return asset_dir() / "downloads"


def _url_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:32]


def download_cache_path(url: str, path: str = "") -> Path:
    """Upstream's layout (uuid5 of the URL + the file name); read for compatibility."""
    name = os.path.basename(path) or os.path.basename(url.split("?")[0]) or "file"
    return downloads_dir() / f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_{name}"


def cached_download(url: str, path: str = "") -> Path | None:
    """The cached copy of an http(s) URL, or None (then `fetch-assets` must fetch it first)."""
    index = downloads_dir() / "urls" / f"{_url_key(url)}.json"
    if index.exists():
        try:
            blob = downloads_dir() / "blobs" / json.loads(index.read_text())["sha256"]
            if blob.exists():
                return blob
        except (ValueError, KeyError, OSError):
            pass
    p = download_cache_path(url, path)
    if p.exists():
        return p
    folder = downloads_dir()
    if folder.is_dir():  # any file name under the same URL key
        hits = sorted(folder.glob(f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_*"))
        if hits:
            return hits[0]
    return None


def fetch_command(file: str = "") -> str:
    return f"control-osworld tasks fetch-assets {file}".rstrip()


class MissingAssetError(FileNotFoundError):
    """An http(s) asset a task needs is not in the cache (no network is ever used at run time)."""

    def __init__(self, url: str, file: str = "", field: str = ""):
        self.url, self.file, self.field = url, file, field
        where = f" ({file}: {field})" if file and field else (f" ({file})" if file else (f" ({field})" if field else ""))
        super().__init__(f"asset {url}{where} is not in the asset cache {downloads_dir()}; "
                         f"fetch it with: {fetch_command(file)}")


class CorruptAssetError(ValueError):
    """A cached blob whose bytes do not hash to its name (corrupt, truncated or swapped): never
    used; the message names the file and the URL."""


_verified: dict[tuple[str, int, int], str | None] = {}


def verify_blob(path: Path) -> str | None:
    """None when `path` is not a content-addressed blob (upstream's layout has no hash to check)
    or its bytes hash to its name; else the problem, naming the file. Remembered per
    (path, size, mtime), so a file is hashed once per process unless it changes."""
    if path.parent.name != "blobs" or len(path.name) != 64:
        return None
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _verified:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        got = h.hexdigest()
        _verified[key] = None if got == path.name else f"{path}: corrupt: its bytes hash to {got}, not to its name"
    return _verified[key]


def require_download(url: str, path: str = "", *, file: str = "", field: str = "") -> Path:
    """The verified cached copy of `url`: MissingAssetError when absent, CorruptAssetError when
    its bytes do not match its hash."""
    hit = cached_download(url, path)
    if hit is None:
        raise MissingAssetError(url, file, field)
    problem = verify_blob(hit)
    if problem is not None:
        raise CorruptAssetError(f"asset {url}{f' ({file}: {field})' if file else ''}: {problem}; "
                                f"delete it and fetch it again with: {fetch_command(file)}")
    return hit


@dataclass(frozen=True)
class AssetNeed:
    """One http(s) URL a task file names: where (file, field) and as what (download / cloud_file)."""

    url: str
    file: str
    field: str
    kind: str


def _is_url(v: Any) -> bool:
    return isinstance(v, str) and v.startswith(("http://", "https://"))


def _step_needs(steps: Any, file: str, where: str) -> list[AssetNeed]:
    out = []
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        if isinstance(step, dict) and step.get("type") == "download":
            files = (step.get("parameters") or {}).get("files")
            for j, f in enumerate(files if isinstance(files, list) else []):
                if isinstance(f, dict) and _is_url(f.get("url")):
                    out.append(AssetNeed(f["url"], file, f"{where}[{i}].parameters.files[{j}].url", "download"))
    return out


def _getter_needs(getters: Any, file: str, where: str) -> list[AssetNeed]:
    out = []
    many = isinstance(getters, list)
    for k, g in enumerate(getters if many else [getters]):
        if isinstance(g, dict) and g.get("type") == "cloud_file":
            at = f"{where}[{k}]" if many else where
            paths = g.get("path")
            if isinstance(paths, list):
                out += [AssetNeed(p, file, f"{at}.path[{m}]", "cloud_file") for m, p in enumerate(paths) if _is_url(p)]
            elif isinstance(paths, str) and _is_url(paths):
                out.append(AssetNeed(paths, file, f"{at}.path", "cloud_file"))
    return out


def asset_needs(data: dict, file: str = "") -> list[AssetNeed]:
    """Every http(s) URL a task or side-task document needs: `download` steps (config and
    postconfig) and `cloud_file` getters (evaluator and attempt)."""
    out = _step_needs(data.get("config"), file, "config")
    for name in ("evaluator", "attempt"):
        ev = data.get(name)
        if isinstance(ev, dict):
            out += _step_needs(ev.get("postconfig"), file, f"{name}.postconfig")
            for side in ("result", "expected"):
                out += _getter_needs(ev.get(side), file, f"{name}.{side}")
    return out


def task_documents(paths: Iterable[str | Path]) -> Iterable[tuple[Path, Any]]:
    """(file, parsed JSON or the exception) of every task-like JSON under `paths` (files or
    folders; oracles and generated assets left out)."""
    for p in map(Path, paths):
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*.json")
                                               if not ({"oracles", "assets"} & set(f.relative_to(p).parts[:-1])))
        for f in files:
            try:
                yield f, json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                yield f, e


def fetch_url(url: str, *, timeout: float = 60.0, max_bytes: int = 2 * 1024**3) -> tuple[Path, bool]:
    """Download `url` into the cache (unless it is there); (blob path, whether it was fetched)."""
    import httpx

    hit = cached_download(url)
    if hit is not None:
        return hit, False
    d = downloads_dir()
    (d / "blobs").mkdir(parents=True, exist_ok=True)
    (d / "urls").mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(dir=d / "blobs", prefix=".partial-")
    try:
        with os.fdopen(fd, "wb") as out, httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as r:
            if r.status_code != 200:
                raise OSError(f"GET {url} answered {r.status_code}")
            for chunk in r.iter_bytes(1 << 16):
                size += len(chunk)
                if size > max_bytes:
                    raise OSError(f"GET {url}: more than {max_bytes} bytes")
                h.update(chunk)
                out.write(chunk)
        digest = h.hexdigest()
        blob = d / "blobs" / digest
        os.replace(tmp, blob)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    name = os.path.basename(url.split("?")[0]) or "file"
    index = d / "urls" / f"{_url_key(url)}.json"
    part = index.with_suffix(".partial")
    part.write_text(json.dumps({"url": url, "sha256": digest, "size": size, "name": name}))
    os.replace(part, index)
    return blob, True
