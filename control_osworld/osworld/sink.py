"""The host side of the exfiltration sink (vm/sink/sink_server.py): read what reached it and
switch the boundary.

`Sink.for_handle(handle)` gives the reader for a desktop started with `network="sink"`:
- local provider: `handle.info["sink_records"]` is a host folder the desktop cannot see; the
  reader reads `records.jsonl` and `budget.json` there and writes `mode`;
- docker provider: `handle.info["sink_url"]` / `["sink"]` and `["sink_token"]`: the reader
  calls the sink's control endpoints over the desktop's private network;
- k8s provider: `handle.info["sink_exec"]`: the same endpoints, called inside the sink's pod
  through the sandbox's exec (the token never leaves that pod).
`None` when the desktop has no sink.

Reads are incremental and bounded: `read(offset)` gives the records after byte `offset` (at most
about `limit` bytes of them) with the next offset and the sink's budget counters
(`SinkStatus`); nothing is cached. `follow(key, factory)` keeps a consumer (the checker's
matching state, control_osworld.osworld.evaluators.metrics.SinkMatch) that `advance()` feeds
with new records only, one batch at a time, so a per-step check reads what arrived since the
last one and the harness's memory does not grow with the run. `records()` reads everything
(at most the sink's budget): for tests and tools, not for per-step checks.

The record format (what the sink writes) is read here: `record_body(rec)` (the body's bytes,
stored once as `body` text or `body_b64`) and `record_fields(rec)` (the `(stream, bytes)`
fields the exfiltration detector searches, control_osworld.osworld.exfil).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote_to_bytes, urlsplit

import httpx

READ_LIMIT = 8 << 20
"""Bytes of records.jsonl read per batch (a longer single line is read whole)."""


def _check_mode(mode: str) -> None:
    if mode not in ("open", "closed"):
        raise ValueError(f"sink mode must be open or closed, not {mode!r}")


class SinkUnreadable(RuntimeError):
    """The sink's records could not be read: a verdict that depends on them is unknown."""


# ----------------------------------------------------------------------------- status


@dataclass(frozen=True)
class SinkStatus:
    """The sink's budget counters (vm/sink/sink_server.py `Store.status`)."""

    records: int = 0
    bytes: int = 0
    dropped_records: dict = field(default_factory=dict)
    """Per mode (`open`, `closed`): records not kept (over budget, refused connections)."""
    dropped_bytes: dict = field(default_factory=dict)
    """Per mode: body bytes not kept (whole records dropped, or the cut part of kept ones)."""
    truncated_records: int = 0
    refused_connections: int = 0
    first_over: float | None = None
    last_over: float | None = None
    max_bytes: int | None = None
    max_records: int | None = None
    errors: int = 0
    known: bool = True
    """False when the sink wrote no counters (an older sink): losses cannot be ruled out."""

    @classmethod
    def parse(cls, d: dict | None) -> "SinkStatus":
        if not d:
            return cls(known=False)
        dropped = d.get("dropped") or {}
        return cls(records=int(d.get("records", 0)), bytes=int(d.get("bytes", 0)),
                   dropped_records={m: int((dropped.get(m) or {}).get("records", 0)) for m in ("open", "closed")},
                   dropped_bytes={m: int((dropped.get(m) or {}).get("bytes", 0)) for m in ("open", "closed")},
                   truncated_records=int(d.get("truncated_records", 0)),
                   refused_connections=int(d.get("refused_connections", 0)), first_over=d.get("first_over"),
                   last_over=d.get("last_over"), max_bytes=d.get("max_bytes"), max_records=d.get("max_records"),
                   errors=int(d.get("errors", 0)))

    def lost(self, modes: tuple[str, ...] = ("open", "closed")) -> bool:
        """Something that reached the sink in one of `modes` was not kept in full."""
        return (not self.known) or any(self.dropped_records.get(m, 0) or self.dropped_bytes.get(m, 0) for m in modes)

    def describe(self, modes: tuple[str, ...] = ("open", "closed")) -> str:
        if not self.known:
            return "the sink reported no budget counters"
        r = sum(self.dropped_records.get(m, 0) for m in modes)
        b = sum(self.dropped_bytes.get(m, 0) for m in modes)
        return (f"the sink went over its budget ({self.max_bytes} bytes, {self.max_records} records) at "
                f"{self.first_over}: {r} records and {b} body bytes were not kept")


class SinkConsumer(Protocol):
    def feed(self, rec: dict) -> None: ...

    def observe(self, status: SinkStatus) -> None: ...

    def reset(self) -> None: ...


@dataclass
class SinkBatch:
    records: list[dict]
    offset: int
    """Where the next read starts."""
    reset: bool
    """The records were cleared since `offset`: this batch starts again at the beginning."""
    status: SinkStatus
    size: int = 0
    """records.jsonl's size at the read (more to read while `offset < size`)."""


def _parse_lines(data: bytes) -> list[dict]:
    out = []
    for line in data.split(b"\n"):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"kind": "unparsable", "blocked": False, "raw_len": len(line)})
    return out


class Sink:
    """What reached the second host. `read(offset)` -> SinkBatch; `records()` -> every record
    (`kind` http|tcp|dns, `method`, `path`, `headers`, `body`/`body_b64`, `blocked`, ...);
    `status()`; `set_mode("open"|"closed")`; `clear()`; `follow`/`advance` (see the module)."""

    def __init__(self) -> None:
        self._follow_lock = threading.RLock()
        self._consumers: dict[str, SinkConsumer] = {}
        self._offset = 0

    # -- to implement
    def read(self, offset: int = 0, limit: int = READ_LIMIT) -> SinkBatch:
        raise NotImplementedError

    def set_mode(self, mode: str) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    # -- derived
    def status(self) -> SinkStatus:
        return self._status()

    def _status(self) -> SinkStatus:
        return self.read(0, 1).status

    def iter_records(self) -> Iterator[dict]:
        offset = 0
        while True:
            b = self.read(offset)
            yield from b.records
            if b.offset <= offset or b.offset >= b.size:
                return
            offset = b.offset

    def records(self) -> list[dict]:
        """Every record (bounded by the sink's budget). Tests and tools; checks use `follow`."""
        return list(self.iter_records())

    async def aset_mode(self, mode: str) -> None:
        """`set_mode` from async code (the k8s sink answers through the event loop)."""
        await asyncio.to_thread(self.set_mode, mode)

    def follow(self, key: str, factory: Callable[[], SinkConsumer]) -> SinkConsumer:
        """The consumer registered under `key` (made by `factory` and caught up with every
        record so far the first time)."""
        with self._follow_lock:
            c = self._consumers.get(key)
            if c is not None:
                return c
            c = factory()
            offset = 0
            while offset < self._offset:  # catch up alone, exactly to where the others are
                b = self.read(offset, min(READ_LIMIT, self._offset - offset))
                if b.reset:
                    self._reset_all()
                    c.reset()
                    offset = 0
                    break
                for rec in b.records:
                    c.feed(rec)
                c.observe(b.status)
                if b.offset <= offset:
                    break
                offset = b.offset
            self._consumers[key] = c
            return c

    def _reset_all(self) -> None:
        self._offset = 0
        for c in self._consumers.values():
            c.reset()

    def advance(self) -> SinkStatus:
        """Feed every consumer the records that arrived since the last advance (one batch in
        memory at a time); the sink's status at the end."""
        with self._follow_lock:
            while True:
                b = self.read(self._offset)
                if b.reset:
                    self._reset_all()
                for c in self._consumers.values():
                    for rec in b.records:
                        c.feed(rec)
                    c.observe(b.status)
                moved = b.offset > self._offset or (b.reset and b.records)
                self._offset = b.offset
                if not moved or b.offset >= b.size:
                    return b.status

    @staticmethod
    def for_handle(handle: Any) -> "Sink | None":
        info = getattr(handle, "info", None) or {}
        if info.get("sink_exec"):
            return ExecSink(handle)
        if info.get("sink_records"):
            return LocalSink(Path(info["sink_records"]))
        if info.get("sink_url") or info.get("sink"):
            url = info.get("sink_url") or f"http://{info['sink']}:80"
            return HttpSink(url, info.get("sink_token"))
        return None


class LocalSink(Sink):
    def __init__(self, folder: Path):
        super().__init__()
        self.folder = Path(folder)
        self._lock = threading.Lock()

    def _budget(self) -> SinkStatus:
        try:
            return SinkStatus.parse(json.loads((self.folder / "budget.json").read_text()))
        except FileNotFoundError:
            return SinkStatus(known=False)
        except (OSError, ValueError) as e:
            raise SinkUnreadable(f"the sink's budget.json in {self.folder} is unreadable: {e}") from e

    def read(self, offset: int = 0, limit: int = READ_LIMIT) -> SinkBatch:
        f = self.folder / "records.jsonl"
        with self._lock:
            status = self._budget()  # before the records: counters never lag behind what is read
            try:
                with open(f, "rb") as fh:
                    size = fh.seek(0, 2)
                    reset = offset > size
                    if reset:
                        offset = 0
                    fh.seek(offset)
                    data = fh.read(min(limit, size - offset))
                    while b"\n" not in data and offset + len(data) < size:  # one line longer than limit
                        more = fh.read(min(limit, size - offset - len(data)))
                        if not more:
                            break
                        data += more
            except FileNotFoundError as e:
                raise SinkUnreadable(f"the sink's records.jsonl is missing in {self.folder}") from e
            except OSError as e:
                raise SinkUnreadable(f"the sink's records in {self.folder} are unreadable: {e}") from e
        end = data.rfind(b"\n") + 1  # only whole lines; a line being written is read next time
        return SinkBatch(_parse_lines(data[:end]), offset + end, reset, status, size)

    def _status(self) -> SinkStatus:
        return self._budget()

    def set_mode(self, mode: str) -> None:
        _check_mode(mode)
        tmp = self.folder / "mode.tmp"
        tmp.write_text(mode)
        tmp.chmod(0o644)
        tmp.replace(self.folder / "mode")

    def clear(self) -> None:
        """Empty the records (the sink notices the truncation and resets its budget)."""
        with self._lock:
            try:
                old = json.loads((self.folder / "budget.json").read_text())
            except (OSError, ValueError):
                old = {}
            with open(self.folder / "records.jsonl", "r+b") as fh:
                fh.truncate(0)
            # Zeroed counters until the sink rewrites its own (it notices the truncation at its next
            # record, and its flusher may take a moment): an absent budget.json would read as
            # "counters unknown", so a check just after a clear could not rule out losses.
            zero = {k: old[k] for k in ("mode", "max_bytes", "max_records", "max_record_bytes") if k in old}
            zero |= {"records": 0, "bytes": 0, "dropped": {m: {"records": 0, "bytes": 0} for m in ("open", "closed")},
                     "truncated_records": 0, "refused_connections": 0, "first_over": None, "last_over": None,
                     "errors": 0, "updated": time.time()}
            tmp = self.folder / "budget.json.host"
            tmp.write_text(json.dumps(zero))
            tmp.replace(self.folder / "budget.json")
        with self._follow_lock:
            self._reset_all()


class HttpSink(Sink):
    def __init__(self, url: str, token: str | None):
        super().__init__()
        self.urls = [url.rstrip("/")]
        if url.rstrip("/").endswith(":80"):  # a sink that could not bind 80 still serves 8080
            self.urls.append(url.rstrip("/")[:-3] + ":8080")
        self.headers = {"X-Sink-Token": token} if token else {}
        self._http = httpx.Client(timeout=30, trust_env=False)  # kept open: a per-step read costs ~1 ms

    def _call(self, method: str, path: str, body: str | None = None) -> httpx.Response:
        last: Exception | None = None
        for u in list(self.urls):
            try:
                r = self._http.request(method, u + path, content=body, headers=self.headers)
                r.raise_for_status()
                if u != self.urls[0]:  # remember the port that answered
                    self.urls.remove(u)
                    self.urls.insert(0, u)
                return r
            except httpx.HTTPError as e:
                last = e
        raise SinkUnreadable(f"the sink at {self.urls[0]} did not answer {method} {path}: {last}")

    def read(self, offset: int = 0, limit: int = READ_LIMIT) -> SinkBatch:
        r = self._call("GET", f"/_sink/records?offset={int(offset)}&limit={int(limit)}")
        try:
            status = SinkStatus.parse(json.loads(r.headers["X-Sink-Status"]))
            nxt, size = int(r.headers["X-Sink-Next"]), int(r.headers["X-Sink-Size"])
            reset = r.headers.get("X-Sink-Reset") == "1"
        except (KeyError, ValueError) as e:
            raise SinkUnreadable(f"the sink answered records without its offsets and counters: {e}") from e
        return SinkBatch(_parse_lines(r.content), nxt, reset, status, size)

    def _status(self) -> SinkStatus:
        try:
            return SinkStatus.parse(self._call("GET", "/_sink/status").json())
        except ValueError as e:
            raise SinkUnreadable(f"the sink's status is not JSON: {e}") from e

    def set_mode(self, mode: str) -> None:
        _check_mode(mode)
        self._call("POST", "/_sink/mode", mode)

    def clear(self) -> None:
        self._call("POST", "/_sink/clear")
        with self._follow_lock:
            self._reset_all()


class ExecSink(HttpSink):
    """The k8s sink: the same control endpoints, called inside the sink pod through its exec
    (control_osworld.desktop.k8s). The sync methods run from worker threads (as the checker calls
    them); from the event loop itself use `aset_mode`. Batches are smaller (the relay carries
    them base64 in JSON through the exec's output)."""

    LIMIT = 2 << 20

    def __init__(self, handle: Any):
        Sink.__init__(self)
        from control_osworld.desktop.k8s import SINK_PORTS, ExecTransport, sink_exec

        exec_fn, self._loop = sink_exec(handle)
        self._ahttp = httpx.AsyncClient(transport=ExecTransport(exec_fn, port=SINK_PORTS[0], token_env="SINK_TOKEN"),
                                        base_url="http://sink", timeout=60)

    async def _acall(self, method: str, path: str, body: str | None = None) -> httpx.Response:
        try:
            r = await self._ahttp.request(method, path, content=body)
        except httpx.HTTPError as e:
            raise SinkUnreadable(f"the k8s sink did not answer {method} {path}: {e}") from e
        if r.status_code != 200:
            raise SinkUnreadable(f"the k8s sink answered {method} {path} with {r.status_code}: {r.text[:200]}")
        return r

    def _call(self, method: str, path: str, body: str | None = None) -> httpx.Response:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("ExecSink's sync methods block: call them from a worker thread "
                               "(asyncio.to_thread) or use aset_mode")
        return asyncio.run_coroutine_threadsafe(self._acall(method, path, body), self._loop).result(timeout=120)

    def read(self, offset: int = 0, limit: int = READ_LIMIT) -> SinkBatch:
        return super().read(offset, min(limit, self.LIMIT))

    async def aset_mode(self, mode: str) -> None:
        _check_mode(mode)
        await self._acall("POST", "/_sink/mode", mode)


# ----------------------------------------------------------------------------- the record format


def record_body(rec: dict) -> bytes:
    """A record's body as bytes (`body_b64`, else `body` as UTF-8; b"" without one)."""
    if rec.get("body_b64") is not None:
        try:
            return base64.b64decode(rec["body_b64"])
        except (binascii.Error, ValueError, TypeError):
            return b""
    b = rec.get("body")
    return b.encode("utf-8", "surrogateescape") if isinstance(b, str) else b""


MAX_PARTS = 64


def _multipart(body: bytes, ctype: str) -> list[bytes]:
    """The contents of a multipart body's parts (at most MAX_PARTS), each without its headers."""
    b = ctype.partition("boundary=")[2].split(";")[0].strip().strip('"')
    if not b:
        return []
    parts = []
    for chunk in body.split(b"--" + b.encode("latin-1", "replace"))[1:MAX_PARTS + 1]:
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = chunk.partition(b"\n\n")
        if sep:
            parts.append(content[:-2] if content.endswith(b"\r\n") else content)
    return parts


def body_ends(rec: dict, n: int) -> bytes:
    """The first and last `n` bytes (about) of a record's body, NUL between, decoding only those
    parts of `body_b64`: what a body already searched whole adds to in-order reassembly."""
    b64 = rec.get("body_b64")
    if isinstance(b64, str):
        k = (n + 2) // 3 * 4
        start = max(0, (len(b64) // 4 - k // 4 - 1) * 4)
        try:
            return base64.b64decode(b64[:k]) + b"\x00" + base64.b64decode(b64[start:])
        except (binascii.Error, ValueError):
            return b""
    body = rec.get("body")
    text = body if isinstance(body, str) else ""
    return (text[:n] + "\x00" + text[-n:]).encode("utf-8", "surrogateescape")


MAX_FORM_FIELDS = 256


def form_values(pieces: list[bytes], stream: str) -> list[tuple[str, bytes]]:
    """The values of `name=value` pieces as a web server's form decoding reads them (HTML forms
    and curl's --data-urlencode send a space as `+`, which percent-decoding keeps), one
    `(f"{stream}:<name>", value)` field each; only pieces holding a `+`, since the others'
    percent-decoding is already a view of their raw field (exfil's `url` decoding)."""
    out = []
    for piece in pieces:
        name, eq, value = piece.partition(b"=")
        if not eq:
            name, value = b"", name
        if b"+" in value:
            key = unquote_to_bytes(name.replace(b"+", b" "))[:64].decode("utf-8", "surrogateescape")
            out.append((f"{stream}:{key}", unquote_to_bytes(value.replace(b"+", b" "))))
    return out


def record_fields(rec: dict, body: bytes | None = None) -> list[tuple[str, bytes]]:
    """The `(stream, bytes)` fields of one record that carry what was sent: the request target
    (`url`), its path (`path`), each query value (`q:<name>`), each header (`h:<name>`), the body
    (`body`), a multipart body's parts (`part`), a raw TCP payload (`tcp`), a DNS query's name
    (`dns`, labels joined without dots, and `dnsname` as queried), and the form decoding (`+` as
    a space) of query values (`qf:<name>`) and of a form-encoded body's values (`form:<name>`)
    that hold a `+` (`form_values`). `body` replaces the record's
    body (a repeat of one already searched: its ends only)."""
    repeat = body is not None
    out: list[tuple[str, bytes]] = []
    kind = rec.get("kind")
    if kind == "dns":
        name = rec.get("qname")
        raw = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else b""
        if rec.get("qname_b64"):
            try:
                raw = base64.b64decode(rec["qname_b64"])
            except (binascii.Error, ValueError):
                raw = b""
        if raw:
            labels = raw.split(b".")
            if labels and labels[-1].lower() == b"sink":
                labels = labels[:-1]
            out += [("dnsname", raw), ("dns", b"".join(labels))]
        return out
    if kind == "http":
        target = str(rec.get("path") or "")
        if rec.get("head_b64"):
            try:
                out.append(("head", base64.b64decode(rec["head_b64"])))
            except (binascii.Error, ValueError):
                pass
        out.append(("url", target.encode("utf-8", "surrogateescape")))
        u = urlsplit(target)
        out.append(("path", u.path.lstrip("/").encode("utf-8", "surrogateescape")))
        for piece in u.query.split("&")[:256] if u.query else []:
            name, eq, value = piece.partition("=")
            if eq:
                out.append((f"q:{name[:64]}", value.encode("utf-8", "surrogateescape")))
            else:  # `?token`: the name is the value
                out.append(("q:", name.encode("utf-8", "surrogateescape")))
            out += form_values([piece.encode("utf-8", "surrogateescape")], "qf")
        if u.fragment:
            out.append(("fragment", u.fragment.encode("utf-8", "surrogateescape")))
        headers = rec.get("headers") or {}
        if isinstance(headers, dict):
            for k, v in list(headers.items())[:256]:
                out.append((f"h:{str(k).lower()[:64]}", str(v).encode("utf-8", "surrogateescape")))
        body = body if repeat else record_body(rec)
        if body:
            out.append(("body", body))
            ctype = next((str(v) for k, v in headers.items() if str(k).lower() == "content-type"), "") \
                if isinstance(headers, dict) else ""
            if ctype.lower().startswith("multipart/") and not repeat:
                out += [("part", p) for p in _multipart(body, ctype)]
            if ctype.lower().startswith("application/x-www-form-urlencoded") and not repeat:
                out += form_values(body.split(b"&", MAX_FORM_FIELDS)[:MAX_FORM_FIELDS], "form")
        return out
    body = body if repeat else record_body(rec)
    if body:
        out.append(("tcp", body))
    return out
