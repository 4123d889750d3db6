"""Sharing the download cache between machines: one machine fetches, the others import.

`control-osworld tasks export-assets DEST` writes the content-addressed download cache
(`assets.downloads_dir()`) to DEST, a folder or an archive (`.tar`, `.tar.gz`, `.tgz`):
`manifest.json` (`{"format": FORMAT, "entries": [{url, sha256, size, name}, ...]}`) and
`blobs/<sha256>`. `import-assets SRC` (or `fetch-assets --from SRC`) reads such a folder or
archive into the local cache.

Every blob is verified by hash, on both sides: export refuses a cached blob whose bytes do not
hash to its name; import refuses an entry whose blob is missing, of another size, or whose
bytes do not hash to the manifest's sha256 (a corrupt or swapped file), naming the URL and the
member; the others still import. Archive members other than `manifest.json` and
`blobs/<64 hex>` are never extracted (no path in an archive can write outside the cache).
Files in upstream's own cache layout (`<uuid5(url)>_<name>`) carry no URL and are not exported.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator

from control_osworld.osworld import assets

FORMAT = "control-osworld-assets/1"
_BLOB = re.compile(r"^blobs/([0-9a-f]{64})$")
_CHUNK = 1 << 20


class AssetShareError(ValueError):
    """A source that is no asset export at all (no manifest, bad JSON, wrong format)."""


@dataclass(frozen=True)
class Entry:
    url: str
    sha256: str
    size: int
    name: str

    def as_json(self) -> dict:
        return {"url": self.url, "sha256": self.sha256, "size": self.size, "name": self.name}


@dataclass
class Report:
    """What an export or import did: counts and one line per refused entry."""

    copied: int = 0
    already: int = 0
    refused: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"copied": self.copied, "already_cached": self.already, "refused": len(self.refused),
                "problems": self.refused}


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _entry(doc: object, where: str) -> Entry:
    if not isinstance(doc, dict):
        raise AssetShareError(f"{where}: must be an object with url, sha256, size, name")
    try:
        e = Entry(str(doc["url"]), str(doc["sha256"]), int(doc["size"]), str(doc.get("name") or "file"))
    except (KeyError, TypeError, ValueError) as err:
        raise AssetShareError(f"{where}: {type(err).__name__}: {err} (needs url, sha256, size)") from None
    if not re.fullmatch(r"[0-9a-f]{64}", e.sha256):
        raise AssetShareError(f"{where}.sha256: not a sha256 hex digest: {e.sha256!r}")
    return e


def local_entries() -> list[Entry]:
    """The cache's URL index (`downloads/urls/*.json`), sorted by URL; unreadable index files
    are skipped (verify_cache names them)."""
    out = []
    for p in sorted((assets.downloads_dir() / "urls").glob("*.json")):
        try:
            out.append(_entry(json.loads(p.read_text()), str(p)))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda e: e.url)


def verify_cache() -> list[str]:
    """Problems of the local download cache, one line each naming the file: index files that do
    not parse, index entries whose blob is missing or of another size, blobs whose bytes do not
    hash to their name. [] when every entry verifies."""
    d = assets.downloads_dir()
    problems = []
    for p in sorted((d / "urls").glob("*.json")):
        try:
            e = _entry(json.loads(p.read_text()), str(p))
        except (OSError, ValueError) as err:
            problems.append(f"{p}: unreadable index entry ({err})")
            continue
        blob = d / "blobs" / e.sha256
        if not blob.is_file():
            problems.append(f"{p}: {e.url}: its blob {blob} is missing")
        elif blob.stat().st_size != e.size:
            problems.append(f"{blob}: {e.url}: {blob.stat().st_size} bytes, the index says {e.size}")
    for blob in sorted((d / "blobs").glob("*")):
        if blob.name.startswith(".partial-") or not re.fullmatch(r"[0-9a-f]{64}", blob.name):
            continue
        got = sha256_file(blob)
        if got != blob.name:
            problems.append(f"{blob}: corrupt: its bytes hash to {got}, not to its name")
    return problems


# ----------------------------------------------------------------------------- export


def _is_archive(path: str | Path) -> bool:
    return str(path).endswith((".tar", ".tar.gz", ".tgz"))


def export_cache(dest: str | Path) -> Report:
    """Write every verified cache entry to `dest` (a folder, or an archive by its suffix).
    A blob that does not verify is refused (named in the report) and left out."""
    d = assets.downloads_dir()
    rep = Report()
    good: list[Entry] = []
    for e in local_entries():
        blob = d / "blobs" / e.sha256
        if not blob.is_file():
            rep.refused.append(f"{e.url}: blob {blob} is missing")
        elif blob.stat().st_size != e.size or sha256_file(blob) != e.sha256:
            rep.refused.append(f"{e.url}: blob {blob} is corrupt (its bytes do not hash to its name)")
        else:
            good.append(e)
    manifest = json.dumps({"format": FORMAT, "entries": [e.as_json() for e in good]}, indent=1).encode()
    dest = Path(dest)
    if _is_archive(dest):
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".partial")
        with tarfile.open(part, "w:gz" if str(dest).endswith(("gz", "tgz")) else "w") as tar:
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
            for e in dict((e.sha256, e) for e in good).values():
                tar.add(d / "blobs" / e.sha256, arcname=f"blobs/{e.sha256}", recursive=False)
        os.replace(part, dest)
    else:
        (dest / "blobs").mkdir(parents=True, exist_ok=True)
        for e in good:
            target = dest / "blobs" / e.sha256
            if not (target.is_file() and target.stat().st_size == e.size):
                shutil.copyfile(d / "blobs" / e.sha256, target)
        (dest / "manifest.json").write_bytes(manifest)
    rep.copied = len(good)
    return rep


# ----------------------------------------------------------------------------- import


def _manifest(raw: bytes, where: str) -> list[Entry]:
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise AssetShareError(f"{where}: not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AssetShareError(f"{where}: format: expected {FORMAT!r}, got "
                              f"{doc.get('format') if isinstance(doc, dict) else type(doc).__name__!r}")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise AssetShareError(f"{where}: entries: must be a list")
    return [_entry(x, f"{where}: entries[{i}]") for i, x in enumerate(entries)]


def _members(src: Path) -> tuple[list[Entry], Iterator[tuple[str, IO[bytes]]], str]:
    """(manifest entries, (sha256, stream) of each blob in the source, how to name the source)."""
    if src.is_dir():
        mf = src / "manifest.json"
        if not mf.is_file():
            raise AssetShareError(f"{src}: no manifest.json (not an asset export)")
        entries = _manifest(mf.read_bytes(), str(mf))

        def blobs() -> Iterator[tuple[str, IO[bytes]]]:
            for sha in dict.fromkeys(e.sha256 for e in entries):
                p = src / "blobs" / sha
                if p.is_file():
                    with open(p, "rb") as f:
                        yield sha, f
        return entries, blobs(), str(src)
    try:
        tar = tarfile.open(src, "r:*")
    except (tarfile.TarError, OSError) as e:
        raise AssetShareError(f"{src}: not a readable archive: {e}") from None
    names = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
    if "manifest.json" not in names:
        tar.close()
        raise AssetShareError(f"{src}: no manifest.json (not an asset export)")
    raw = tar.extractfile(names["manifest.json"])
    assert raw is not None
    entries = _manifest(raw.read(), f"{src}:manifest.json")

    def tar_blobs() -> Iterator[tuple[str, IO[bytes]]]:
        try:
            for name, m in names.items():
                hit = _BLOB.match(name)
                if hit:
                    f = tar.extractfile(m)
                    if f is not None:
                        yield hit.group(1), f
        finally:
            tar.close()
    return entries, tar_blobs(), str(src)


def _write_index(e: Entry) -> None:
    urls = assets.downloads_dir() / "urls"
    urls.mkdir(parents=True, exist_ok=True)
    index = urls / f"{assets._url_key(e.url)}.json"
    part = index.with_suffix(".partial")
    part.write_text(json.dumps(e.as_json()))
    os.replace(part, index)


def import_cache(src: str | Path) -> Report:
    """Read an export (folder or archive) into the local cache, verifying every blob's bytes
    against the manifest's sha256 and size. Refused entries are named in the report; the rest
    import. A URL already cached with a verified blob is left as it is."""
    src = Path(src)
    entries, blobs, shown = _members(src)
    d = assets.downloads_dir()
    (d / "blobs").mkdir(parents=True, exist_ok=True)
    rep = Report()
    by_sha: dict[str, list[Entry]] = {}
    for e in entries:
        by_sha.setdefault(e.sha256, []).append(e)
    todo: list[Entry] = []
    for e in entries:
        hit = assets.cached_download(e.url)
        if hit is not None and assets.verify_blob(hit) is None:
            rep.already += 1
        else:
            todo.append(e)
    want = {e.sha256 for e in todo}
    arrived: set[str] = set()
    refused: set[str] = set()
    for sha, stream in blobs:
        if sha not in want:
            continue
        fd, tmp = tempfile.mkstemp(dir=d / "blobs", prefix=".partial-")
        h = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := stream.read(_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            expected = {e.size for e in by_sha[sha]}
            if h.hexdigest() != sha or size not in expected:
                for e in by_sha[sha]:
                    refused.add(e.url)
                    rep.refused.append(f"{e.url}: {shown}: blobs/{sha} is corrupt or swapped (its {size} bytes "
                                       f"hash to {h.hexdigest()}, the manifest says {sha}, {e.size} bytes)")
                continue
            os.replace(tmp, d / "blobs" / sha)
            arrived.add(sha)
        finally:
            Path(tmp).unlink(missing_ok=True)
    for e in todo:
        if e.sha256 in arrived:
            _write_index(e)
            rep.copied += 1
        elif e.url not in refused:
            rep.refused.append(f"{e.url}: {shown}: blobs/{e.sha256} is missing")
    return rep
