"""Collect files from the desktop for a checker, byte-safe and bounded (docs/integrity.md,
"Checkers that hold against an adversary").

One shell command, run as the harness's `checker` uid (`trusted`), lists the given roots with
`find -printf` (NUL-separated, so a name may hold any byte but NUL), optionally hashes the regular
files (`sha256sum -z`) and packs the ones a checker must read (`tar --null -T -`), and prints each
part base64-encoded on its own line. Nothing the agent controls is ever expanded by a shell (no
globs, names never pass through an argument list: E2BIG cannot happen), the server only ever sees
ASCII (its text decoding cannot fail or alter a name), and every part has a cap: past the cap,
or when a command of the pipeline failed, the collection raises `Unknown`, never "absent".

`await collect(ctx, roots, ...) -> Collected`: `entries` (path -> Entry), `contents` (path -> bytes
of the files read), `sha256` (path -> hex), `digest` (a hash of the listing with inode and ctime,
which the agent cannot set back: any change of the watched files changes it). Paths are `str`
with undecodable bytes as surrogate escapes (`os.fsdecode`); `label(path)` gives the JSON-safe
spelling that checker facts use.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import shlex
import tarfile
from dataclasses import dataclass, field
from typing import Any

from control_osworld.desktop.client import DesktopDied, DesktopError
from control_osworld.osworld.evaluators.unknown import Unknown

MAX_ENTRIES = 20000
"""Entries listed per root; past it the collection is unknown."""
MAX_READ_BYTES = 16 << 20
"""Bytes of packed content (tar) per collection."""
MAX_FILE_BYTES = 4 << 20
"""A file larger than this is never read or hashed (its entry says so: `big`)."""
TIMEOUT = 30.0


@dataclass(frozen=True)
class Entry:
    type: str
    """find's %y: f (regular file), d, l (symlink), p, s, c, b."""
    mode: int
    size: int
    depth: int


@dataclass
class Collected:
    roots: dict[str, bool] = field(default_factory=dict)
    """Root -> it exists (a symlink counts)."""
    entries: dict[str, Entry] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)
    digest: str = ""
    home: str = ""
    """The desktop's $HOME (what `~` in a root means)."""

    def resolve(self, root: str) -> str:
        """A root as an absolute path of the desktop (`~` expanded)."""
        if root == "~":
            return self.home
        return self.home + root[1:] if root.startswith("~/") else root

    def under(self, root: str) -> list[str]:
        """Entries at or under `root`, in a stable order."""
        base = self.resolve(root).rstrip("/") or "/"
        return sorted(p for p in self.entries if p == base or p.startswith(base.rstrip("/") + "/"))


def label(path: str) -> str:
    """A path as checker facts spell it: itself when it is valid UTF-8 (and does not start with
    `hex:`), else `hex:` and its bytes in hex (one spelling per name; JSON- and log-safe)."""
    raw = path.encode("utf-8", "surrogateescape")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or text.startswith("hex:") or any(ord(c) < 32 for c in text):
        return "hex:" + raw.hex()
    return text


def shell_path(p: str) -> str:
    """`p` as a shell word: `~` / `~/...` become "$HOME"/... (the agent's home), the rest quoted."""
    if p == "~":
        return '"$HOME"'
    if p.startswith("~/"):
        return '"$HOME"/' + shlex.quote(p[2:])
    return shlex.quote(p)


def _glob_expr(names: list[str]) -> str:
    return " -o ".join(f"-name {shlex.quote(n)}" for n in names)


def script(roots: list[str], *, depth: int | list[int] = 0, hash_files: bool = False, read: list[str] | None = None,
           grep: str | None = None, max_entries: int = MAX_ENTRIES, max_read: int = MAX_READ_BYTES,
           max_file: int = MAX_FILE_BYTES, follow: bool = False) -> str:
    """The collection's command: bash (for pipefail and PIPESTATUS) with GNU find, head, tar and
    coreutils. Each part prints `NAME BASE64 STATUS` (STATUS: the part's pipeline, 0 = whole)."""
    size = f"-size -{max_file + 1}c"
    parts = ["set -o pipefail; LC_ALL=C; export LC_ALL",
             'part() { printf "%s " "$1"; }',
             "ok() { base64 -w0; echo \" ${PIPESTATUS[0]}\"; }"]
    parts.append("part HOME; { printf %s \"$HOME\"; } | base64 -w0; echo ' 0'")
    depths = list(depth) if isinstance(depth, list) else [depth] * len(roots)
    for i, root in enumerate(roots):
        r, depth = shell_path(root), depths[i]
        parts.append(f"if [ -e {r} ] || [ -L {r} ]; then echo R{i} 1; else echo R{i} 0; fi")
        lf = "-L " if follow else ""
        parts.append(f"part L{i}; {{ find {lf}{r} -maxdepth {int(depth)} -printf '%y/%m/%s/%d/%i/%C@\\0%p\\0' 2>/dev/null"
                     f" | head -z -n {2 * (max_entries + 1)}; }} | ok")
        if hash_files:
            parts.append(f"part H{i}; {{ find {lf}{r} -maxdepth {int(depth)} -type f {size} -print0 2>/dev/null"
                         f" | head -z -n {max_entries} | xargs -0 -r sha256sum -z -- 2>/dev/null; }} | ok")
        if read:
            sel = f"find -L {r} -maxdepth {int(depth)} -type f {size} \\( {_glob_expr(read)} \\) -print0 2>/dev/null"
            sel += f" | head -z -n {max_entries}"
            if grep:  # grep's 1 (no match) is no failure; 2 is
                sel += (" | xargs -0 -r sh -c 'grep -laZE -e \"$0\" -- \"$@\" 2>/dev/null; [ $? -le 1 ]' "
                        + shlex.quote(grep))
            parts.append(f"part T{i}; {{ {sel} | tar --null --no-recursion --dereference --verbatim-files-from -T - -cf - "
                         f"2>/dev/null | head -c {max_read + 1}; }} | ok")
    parts.append("echo END")
    return "\n".join(parts)


def fingerprint_guard(roots: list[str], depth: int | list[int], prev: str | None) -> str:
    """A prefix for `script`: prints `FP <sha256>` of the roots' listing (symlinks followed; type,
    mode, size, inode, ctime and name of every entry: the agent cannot change a file and set its
    ctime back), and stops with `SAME` when it equals `prev` (nothing watched changed since)."""
    depths = list(depth) if isinstance(depth, list) else [depth] * len(roots)
    finds = "; ".join(f"find -L {shell_path(r)} -maxdepth {int(d)} -printf '%y/%m/%s/%i/%C@\\0%p\\0' 2>/dev/null; "
                      f"echo \" $?\"" for r, d in zip(roots, depths))
    out = [f"fp=$( {{ {finds}; }} | sha256sum ); fp=${{fp%% *}}; echo \"FP $fp\""]
    if prev:
        out.append(f"if [ \"$fp\" = {shlex.quote(prev)} ]; then echo SAME; echo END; exit 0; fi")
    return "\n".join(out) + "\n"


def _b64(v: str, what: str) -> bytes:
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError) as e:
        raise Unknown(f"collect: part {what} is not base64 ({e})") from e


def parse(output: str, roots: list[str], *, hash_files: bool = False, read: list[str] | None = None,
          max_entries: int = MAX_ENTRIES, max_read: int = MAX_READ_BYTES) -> Collected:
    """The collection from the command's output; `Unknown` past a cap, when a part's pipeline
    failed, or on a malformed part."""
    parts: dict[str, bytes] = {}
    status: dict[str, str] = {}
    lines = output.splitlines()
    if not lines or lines[-1] != "END":
        raise Unknown("collect: the command did not run to its end")
    lines = [line for line in lines if not line.startswith("FP ")]
    for line in lines[:-1]:
        bits = line.split(" ")
        if len(bits) == 2 and bits[0].startswith("R"):
            status[bits[0]] = bits[1]
        elif len(bits) == 3:
            parts[bits[0]] = _b64(bits[1], bits[0])
            status[bits[0]] = bits[2]
        elif line.strip():
            raise Unknown(f"collect: unexpected output line {line[:80]!r}")
    c = Collected()
    c.home = parts.get("HOME", b"").decode("utf-8", "surrogateescape")
    h = hashlib.sha256()
    for i, root in enumerate(roots):
        if f"R{i}" not in status or f"L{i}" not in parts:
            raise Unknown(f"collect: no listing of {root} in the output (the command was cut short)")
        c.roots[root] = status[f"R{i}"] == "1"
        fields = parts[f"L{i}"].split(b"\0")
        if fields and fields[-1] == b"":
            fields.pop()
        if len(fields) // 2 > max_entries:
            raise Unknown(f"collect: {root} has more than {max_entries} entries (the cap)")
        if c.roots[root] and status[f"L{i}"] != "0":
            raise Unknown(f"collect: listing {root} failed (status {status[f'L{i}']})")
        if len(fields) % 2 or (c.roots[root] and not fields):
            raise Unknown(f"collect: the listing of {root} is malformed")
        for meta, raw in zip(fields[0::2], fields[1::2]):
            try:
                y, mode, size, d, _ino, _ctime = meta.decode("ascii").split("/", 5)
                entry = Entry(y, int(mode, 8), int(size), int(d))
            except ValueError as e:
                raise Unknown(f"collect: a listing record of {root} is malformed ({meta[:40]!r})") from e
            c.entries[raw.decode("utf-8", "surrogateescape")] = entry
            h.update(meta + b"\0" + raw + b"\0")
        if not c.roots[root]:
            continue
        if hash_files:
            if f"H{i}" not in parts or status[f"H{i}"] != "0":
                raise Unknown(f"collect: hashing the files of {root} failed (status {status.get(f'H{i}')})")
            for rec in parts[f"H{i}"].split(b"\0"):
                if not rec:
                    continue
                digest, sep, name = rec.partition(b"  ")
                if not sep or len(digest) != 64:
                    digest, sep, name = rec.partition(b" *")
                if not sep or len(digest) != 64:
                    raise Unknown(f"collect: a hash record of {root} is malformed")
                c.sha256[name.decode("utf-8", "surrogateescape")] = digest.decode("ascii")
        if read:
            data = parts.get(f"T{i}", b"")
            if len(data) > max_read:
                raise Unknown(f"collect: the files to read under {root} are more than {max_read} bytes (the cap)")
            if f"T{i}" not in parts or status[f"T{i}"] != "0":
                raise Unknown(f"collect: reading the files of {root} failed (status {status.get(f'T{i}')})")
            c.contents.update(_untar(data, root))
    c.digest = h.hexdigest()
    return c


def _untar(data: bytes, root: str) -> dict[str, bytes]:
    if not data:
        return {}
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:", encoding="utf-8", errors="surrogateescape") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                f = tf.extractfile(m)
                if f is None:
                    continue
                out["/" + m.name.lstrip("/")] = f.read()
    except (tarfile.TarError, EOFError, OSError) as e:
        raise Unknown(f"collect: the contents read under {root} are not a whole archive ({e})") from e
    return out


async def collect(ctx: Any, roots: list[str], *, depth: int | list[int] = 0, hash_files: bool = False,
                  read: list[str] | None = None, grep: str | None = None, max_entries: int = MAX_ENTRIES,
                  max_read: int = MAX_READ_BYTES, max_file: int = MAX_FILE_BYTES,
                  timeout: float = TIMEOUT, follow: bool = False, cache: dict | None = None) -> Collected:
    """Collect `roots` on the desktop behind `ctx.client` (see the module docstring): list each
    to `depth` (one for all, or one per root), hash its regular files (`hash_files`), read the ones whose name matches a glob of
    `read` (and, with `grep`, whose content matches that extended regex). Reading follows
    symlinks (as bash, a session or an app reading the file would); listing and hashing follow
    them with `follow`. With `cache` (a dict kept from check to check), the command first
    fingerprints the roots and, when nothing changed since the last collection, returns that one
    (one cheap command per check while the agent leaves the watched files alone)."""
    cmd = script(roots, depth=depth, hash_files=hash_files, read=read, grep=grep, max_entries=max_entries,
                 max_read=max_read, max_file=max_file, follow=follow)
    key = hashlib.sha256(cmd.encode("utf-8", "surrogateescape")).hexdigest()
    prev = cache.get(key) if cache is not None else None
    if cache is not None:
        cmd = fingerprint_guard(roots, depth, prev[0] if prev else None) + cmd
    try:
        r = await ctx.client.execute(["bash", "--norc", "--noprofile", "-c", cmd], timeout=timeout, trusted=True)
    except DesktopDied:
        raise
    except DesktopError as e:
        raise Unknown(f"collect: the server failed the command: {e}") from e
    out = r.get("output")
    if not isinstance(out, str):
        raise Unknown("collect: the server gave no output text")
    if any(ord(c) > 127 for c in out):
        raise Unknown("collect: the output is not the ASCII the command prints (altered on the way)")
    if cache is not None:
        fp = next((line[3:] for line in out.splitlines() if line.startswith("FP ")), "")
        if len(fp) != 64:
            raise Unknown("collect: the command printed no fingerprint")
        if out.splitlines()[-2:] == ["SAME", "END"]:
            if prev is None or prev[0] != fp:
                raise Unknown("collect: the command said nothing changed, against no earlier collection")
            return prev[1]
        c = parse(out, roots, hash_files=hash_files, read=read, max_entries=max_entries, max_read=max_read)
        cache[key] = (fp, c)
        return c
    return parse(out, roots, hash_files=hash_files, read=read, max_entries=max_entries, max_read=max_read)
