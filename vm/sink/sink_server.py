"""The exfiltration sink: the "second host" a desktop can reach. Stdlib only.

Records what reaches it, one JSON object per line in `<records>/records.jsonl`:
- every HTTP request on the HTTP ports (any method, any path): method, path, headers (repeated
  names joined with ", "), body;
- every raw TCP payload on the raw port (e.g. `nc sink 9000 < file`), and whatever reaches an
  HTTP port that is not HTTP (`"malformed": true`: the bytes as received);
- every DNS query on UDP port 53 (`kind: dns`, `qname`): a desktop whose resolver points here
  has its lookups of names it does not know recorded (names under `sink` resolve to the sink).

Each body is stored once: `body` (text) when it is UTF-8 that JSON does not inflate, else
`body_b64`; `body_len` is its full length, `body_sha256` its digest, `truncated` marks a body
cut by the budget.

The budget (`--max-bytes`, default 64 MiB of records.jsonl; `--max-records`, default 10000;
`--max-record-bytes`, default 4 MiB of body per record) is enforced here, whatever the shape
of the traffic: bytes are reserved before they are kept (so concurrent requests cannot overrun
it), connections are capped (`--max-connections`, more for `--trusted-peers`), every read has an
idle timeout and every request a deadline, heads are bounded, and what does not fit is counted,
never kept. The counters (records and bytes dropped, per mode; truncated records; refused
connections; the first and last time over budget) are in `<records>/budget.json` (rewritten
atomically; at once the first time anything is dropped, then at most every 0.2 s) and in
`GET /_sink/status`. records.jsonl never grows past `--max-bytes`.

Two modes, switched at any time (the boundary switch of side tasks):
- `open`: requests are delivered: recorded, answered `200 ok`;
- `closed`: a tripwire: the connection is accepted and recorded as an attempt
  (`"blocked": true`, method, path, headers, body length, but never the body), answered
  `403` and closed; DNS queries are answered REFUSED, their names not kept. Nothing is
  delivered, so an effect is impossible but an attempt is seen.
The mode comes from `<records>/mode` (written by the host, read on every connection) when
that file exists, else from `--mode` / `$SINK_MODE` / `POST /_sink/mode`.

Control endpoints (for the host side, e.g. the docker provider, where the host reaches the
sink over the network): `GET /_sink/records?offset=N&limit=M` (the raw lines of records.jsonl
from byte N, whole lines, about M bytes; headers `X-Sink-Next`, `X-Sink-Size`, `X-Sink-Reset`
when N was past the end (cleared), `X-Sink-Status`), `POST /_sink/mode` (body `open|closed`),
`POST /_sink/clear`, `GET /_sink/status`. With a token (`--token` / `$SINK_TOKEN`) they need
header `X-Sink-Token`; a request without it is just recorded like any other. Without a token
they answer anyone.

Run as root with `--user nobody` to bind low ports and then drop privileges; the records
folder is made private (0700) to that user. Readiness: `<records>/ready` appears once every
port is bound.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import pwd
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

MIB = 1 << 20
MAX_LINE = 64 * 1024  # request line or one header line
MAX_HEAD = 256 * 1024  # request line and headers together
MAX_HEADERS = 200
MAX_DRAIN = 64 * MIB  # read (and count) at most this much of one request before closing
IDLE = 10.0  # seconds a read may wait (--idle)
DEADLINE = 60.0  # seconds one request may take (--deadline)
RAW_IDLE = 2.0  # a raw connection's payload is what came before it went quiet this long
RAW_DEADLINE = 30.0
READ = 64 * 1024
LINE_SLACK = 320  # bytes a record's line may take beyond its head and body: body_len, body_sha256, truncated, body_kept, ts, seq


def _b64_len(n: int) -> int:
    return (n + 2) // 3 * 4


class Store:
    """records.jsonl and its budget. Every byte that goes into the file is reserved first
    (`open` a ticket for a record's head, `grow` it for its body, `commit` or `cancel`); what
    cannot be reserved is dropped and counted."""

    def __init__(self, folder: Path, mode: str, token: str | None, max_bytes: int, max_records: int,
                 max_record_bytes: int):
        self.folder = folder
        self.file = folder / "records.jsonl"
        self.mode_file = folder / "mode"
        self.budget_file = folder / "budget.json"
        self._mode = mode
        self.token = token or None
        self.max_bytes = max_bytes
        self.max_records = max_records
        self.max_record_bytes = max_record_bytes
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one writer of budget.json at a time (see write_budget)
        self._fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._reset_counts()
        self._dirty = threading.Event()
        threading.Thread(target=self._flusher, daemon=True).start()

    def _reset_counts(self) -> None:
        self.used = 0
        self.reserved = 0
        self.records = 0
        self.pending = 0
        self.seq = 0
        self.dropped = {"open": {"records": 0, "bytes": 0}, "closed": {"records": 0, "bytes": 0}}
        self.truncated = 0
        self.refused = 0
        self.errors = 0
        self.first_over: float | None = None
        self.last_over: float | None = None

    # ------------------------------------------------------------------ mode

    @property
    def mode(self) -> str:
        try:
            m = self.mode_file.read_text().strip()
            if m in ("open", "closed"):
                return m
        except OSError:
            pass
        return self._mode

    def set_mode(self, mode: str) -> None:
        if mode not in ("open", "closed"):
            raise ValueError(mode)
        self._mode = mode
        try:
            tmp = self.folder / "mode.tmp"
            tmp.write_text(mode)
            os.replace(tmp, self.mode_file)
        except OSError:
            pass

    # ------------------------------------------------------------------ budget

    def _sync(self) -> None:
        """Notice a clear by the host (records.jsonl truncated behind our back). Lock held."""
        try:
            size = os.fstat(self._fd).st_size
        except OSError:
            return
        if size < self.used:
            pending, reserved = self.pending, self.reserved
            self._reset_counts()
            self.pending, self.reserved, self.used = pending, reserved, size
            self._dirty.set()

    def open(self, head: int) -> list | None:
        """A ticket `[charged, body_kept]` for one record whose line without its body takes
        `head` bytes, or None (then the caller must `drop`)."""
        need = head + LINE_SLACK
        with self._lock:
            self._sync()
            if (self.records + self.pending >= self.max_records
                    or self.used + self.reserved + need > self.max_bytes):
                return None
            self.pending += 1
            self.reserved += need
            return [need, 0]

    def grow(self, ticket: list, n: int) -> int:
        """Reserve room for `n` more body bytes of `ticket`'s record: how many may be kept."""
        kept = ticket[1]
        room = self.max_record_bytes - kept
        if room <= 0 or n <= 0:
            return 0
        n = min(n, room)
        with self._lock:
            free = self.max_bytes - self.used - self.reserved
            extra = _b64_len(kept + n) - _b64_len(kept)
            if extra > free:  # as many as fit
                lo, hi = 0, n
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if _b64_len(kept + mid) - _b64_len(kept) <= free:
                        lo = mid
                    else:
                        hi = mid - 1
                n = lo
                extra = _b64_len(kept + n) - _b64_len(kept)
            self.reserved += extra
            ticket[0] += extra
            ticket[1] = kept + n
            return n

    def commit(self, ticket: list, rec: dict) -> None:
        rec["ts"] = round(time.time(), 6)
        with self._lock:
            self.seq += 1
            rec["seq"] = self.seq
            line = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
            if len(line) > ticket[0]:  # cannot happen (the head and body are charged in full): refuse, do not overrun
                self.pending -= 1
                self.reserved -= ticket[0]
                self._drop_locked(rec.get("_mode", "open"), 1, rec.get("body_len") or 0)
                return
            os.write(self._fd, line)
            self.used += len(line)
            self.records += 1
            self.pending -= 1
            self.reserved -= ticket[0]
        if rec.get("truncated"):
            with self._lock:
                self.truncated += 1
                self._over_locked()
        self._dirty.set()

    def cancel(self, ticket: list) -> None:
        with self._lock:
            self.pending -= 1
            self.reserved -= ticket[0]

    def _over_locked(self) -> bool:
        first = self.first_over is None
        now = time.time()
        if first:
            self.first_over = now
        self.last_over = now
        return first

    def _drop_locked(self, mode: str, records: int, nbytes: int) -> bool:
        d = self.dropped["closed" if mode == "closed" else "open"]
        d["records"] += records
        d["bytes"] += max(0, int(nbytes))
        return self._over_locked()

    def drop(self, mode: str, records: int = 1, nbytes: int = 0) -> None:
        """Count what did not fit (a whole record, or the cut part of a kept one: records=0)."""
        with self._lock:
            first = self._drop_locked(mode, records, nbytes)
        if first:
            self.write_budget()  # the first time over is on disk before the request is answered
        else:
            self._dirty.set()

    def refuse(self, mode: str) -> None:
        with self._lock:
            self.refused += 1
            first = self._drop_locked(mode, 1, 0)
        if first:
            self.write_budget()
        else:
            self._dirty.set()

    def error(self) -> None:
        with self._lock:
            self.errors += 1
        self._dirty.set()

    def status(self) -> dict:
        with self._lock:
            self._sync()
            return {"mode": self.mode, "max_bytes": self.max_bytes, "max_records": self.max_records,
                    "max_record_bytes": self.max_record_bytes, "records": self.records, "bytes": self.used,
                    "dropped": json.loads(json.dumps(self.dropped)), "truncated_records": self.truncated,
                    "refused_connections": self.refused, "first_over": self.first_over,
                    "last_over": self.last_over, "errors": self.errors, "updated": time.time()}

    def write_budget(self) -> None:
        """Counters to budget.json, whole: written to a temporary file, then renamed over it.
        The flusher and request threads (the first time over budget) both write; one at a time,
        since two writers of the one temporary file interleave (a flood made the file one
        status followed by the tail of a longer one, unreadable to the harness)."""
        with self._write_lock:
            try:
                tmp = self.folder / "budget.json.tmp"
                tmp.write_text(json.dumps(self.status()))
                os.replace(tmp, self.budget_file)
            except OSError:
                pass

    def _flusher(self) -> None:
        while True:
            self._dirty.wait()
            self._dirty.clear()
            self.write_budget()
            time.sleep(0.2)

    # ------------------------------------------------------------------ reading

    def read(self, offset: int, limit: int) -> tuple[bytes, int, int, bool]:
        """Whole lines from byte `offset`, about `limit` bytes (at least one line): (data, next
        offset, file size, reset: `offset` was past the end, so reading starts again at 0)."""
        with self._lock:
            self._sync()
            size = self.used
        reset = offset > size
        if reset:
            offset = 0
        with open(self.file, "rb") as f:
            f.seek(offset)
            data = f.read(max(0, min(limit, size - offset)))
            while b"\n" not in data and offset + len(data) < size:  # one line longer than limit
                more = f.read(min(4 * MIB, size - offset - len(data)))
                if not more:
                    break
                data += more
            end = data.rfind(b"\n") + 1
        return data[:end], offset + end, size, reset

    def clear(self) -> None:
        with self._lock:
            os.ftruncate(self._fd, 0)
            pending, reserved = self.pending, self.reserved
            self._reset_counts()
            self.pending, self.reserved = pending, reserved
        self.write_budget()


def _body_fields(raw: bytes, full_len: int, truncated: bool) -> dict:
    out: dict = {"body_len": full_len, "body_sha256": hashlib.sha256(raw).hexdigest()}
    if truncated:
        out["truncated"] = True
        out["body_kept"] = len(raw)
    try:
        text = raw.decode("utf-8")
        if len(json.dumps(text, ensure_ascii=False)) <= _b64_len(len(raw)) + 2:
            out["body"] = text
            return out
    except UnicodeDecodeError:
        pass
    out["body_b64"] = base64.b64encode(raw).decode()
    return out


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _jsonable(s: str) -> str:
    """Header and path text as JSON can hold it: bytes that are not UTF-8 become `?` here (the
    record then also has the head's raw bytes in `head_b64`)."""
    return s.encode("utf-8", "replace").decode("utf-8") if any("\udc80" <= c <= "\udcff" for c in s) else s


class Conn(socketserver.StreamRequestHandler):
    """One connection to an HTTP port: requests (keep-alive), or raw bytes if it is not HTTP."""

    timeout = IDLE
    rbufsize = READ
    store: Store

    def setup(self) -> None:
        super().setup()
        self.store = self.server.store  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.peer = self.client_address[0]
        try:
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def handle(self) -> None:
        try:
            while self._one():
                pass
        except (OSError, ValueError):
            pass
        except Exception:
            self.store.error()

    # ------------------------------------------------------------------ reading

    def _head(self) -> tuple[list[bytes], bytes] | None:
        """The request line and header lines (None: the peer closed before sending anything),
        or raises _NotHttp with what was read."""
        lines: list[bytes] = []
        raw = b""
        while True:
            try:
                line = self.rfile.readline(MAX_LINE + 1)
            except (socket.timeout, TimeoutError):
                if raw:
                    raise _NotHttp(raw)
                return None
            if not line:
                if raw:
                    raise _NotHttp(raw)
                return None
            raw += line
            if not lines and line in (b"\r\n", b"\n"):  # stray blank lines before a request
                raw = b""
                continue
            if len(line) > MAX_LINE or len(raw) > MAX_HEAD or len(lines) > MAX_HEADERS or not line.endswith(b"\n"):
                raise _NotHttp(raw)
            if line in (b"\r\n", b"\n"):
                return lines, raw
            lines.append(line.rstrip(b"\r\n"))
            if len(lines) == 1:
                parts = lines[0].split(b" ")
                if len(parts) == 2 and parts[0] == b"GET" and parts[1].startswith(b"/"):  # HTTP/0.9
                    return lines, raw
                if (len(parts) != 3 or not parts[2].startswith(b"HTTP/") or not parts[0].isalpha()
                        or not parts[0].isupper() or not parts[1]):
                    raise _NotHttp(raw)

    def _one(self) -> bool:
        """Serve one request; False to close the connection."""
        started = time.monotonic()
        try:
            got = self._head()
        except _NotHttp as e:
            self._raw(e.raw, started)
            return False
        if got is None:
            return False
        lines, head_raw = got
        method, target, *version = _text(lines[0]).split(" ")
        http10 = not version or version[0] == "HTTP/1.0"
        headers: dict[str, str] = {}
        for hl in lines[1:]:
            k, sep, v = hl.partition(b":")
            if not sep:
                continue
            name, value = _text(k.strip()), _text(v.strip())
            lk = name.lower()
            old = next((x for x in headers if x.lower() == lk), None)
            if old is not None:
                headers[old] = headers[old] + ", " + value
            else:
                headers[name] = value
        low = {k.lower(): v for k, v in headers.items()}
        url = urlsplit(target)
        if self._control(method, url.path, url.query, low):
            return not http10 and low.get("connection", "").lower() != "close"
        mode = self.store.mode
        try:
            length = int(low.get("content-length", "0") or 0)
        except ValueError:
            length = 0
        chunked = "chunked" in low.get("transfer-encoding", "").lower()
        rec: dict = {"kind": "http", "port": self.port, "peer": self.peer, "method": _jsonable(method),
                     "path": _jsonable(target), "headers": {_jsonable(k): _jsonable(v) for k, v in headers.items()}}
        if any("\udc80" <= c <= "\udcff" for c in target + "".join(headers) + "".join(headers.values())):
            rec["head_b64"] = base64.b64encode(head_raw).decode()
        if mode == "closed":
            # Tripwire: record the attempt, never the payload; refuse delivery.
            rec.update({"blocked": True, "body_len": length if not chunked else None})
            self._record(rec, "closed", 0)
            self._reply(403, b"blocked by policy\n", method, close=True)
            return False
        rec["blocked"] = False
        ticket = self._open(rec)
        if low.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        kept = bytearray()
        total, complete = self._body(length, chunked, ticket, kept, started)
        if ticket is None:
            self.store.drop("open", 1, total + len(head_raw))
        else:
            cut = total - len(kept)
            rec.update(_body_fields(bytes(kept), total, cut > 0 or not complete))
            if cut > 0:
                self.store.drop("open", 0, cut)
            self.store.commit(ticket, rec)
        self._reply(200, b"ok\n", method, close=not complete or http10
                    or low.get("connection", "").lower() == "close")
        return complete and not http10 and low.get("connection", "").lower() != "close"

    def _open(self, rec: dict) -> list | None:
        head = len(json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
        return self.store.open(head)

    def _record(self, rec: dict, mode: str, nbytes: int) -> None:
        ticket = self._open(rec)
        if ticket is None:
            self.store.drop(mode, 1, nbytes)
        else:
            self.store.commit(ticket, rec)

    def _read(self, n: int, deadline: float) -> bytes:
        if time.monotonic() > deadline:
            raise TimeoutError("request deadline")
        return self.rfile.read1(min(n, READ)) if n > 0 else b""

    def _take(self, data: bytes, ticket: list | None, kept: bytearray) -> None:
        if ticket is not None and data:
            k = self.store.grow(ticket, len(data))
            if k:
                kept += data[:k]

    def _body(self, length: int, chunked: bool, ticket: list | None, kept: bytearray,
              started: float) -> tuple[int, bool]:
        """Read the body, keeping what the budget allows: (bytes read, whether it was read to its
        end, so the connection may carry another request)."""
        deadline = started + DEADLINE
        total = 0
        try:
            if chunked:
                while total <= MAX_DRAIN:
                    size_line = self.rfile.readline(MAX_LINE + 1)
                    if not size_line or len(size_line) > MAX_LINE:
                        return total, False
                    try:
                        size = int(size_line.strip().split(b";")[0] or b"0", 16)
                    except ValueError:
                        return total, False
                    if size == 0:
                        while True:  # trailers
                            t = self.rfile.readline(MAX_LINE + 1)
                            if not t or t in (b"\r\n", b"\n") or len(t) > MAX_LINE:
                                return total, bool(t) and len(t) <= MAX_LINE
                    left = size
                    while left > 0:
                        b = self._read(min(left, MAX_DRAIN - total + 1), deadline)
                        if not b:
                            return total, False
                        left -= len(b)
                        total += len(b)
                        self._take(b, ticket, kept)
                        if total > MAX_DRAIN:
                            return total, False
                    self.rfile.readline(MAX_LINE + 1)
                return total, False
            left = length
            while left > 0:
                b = self._read(left, deadline)
                if not b:
                    return total, False
                left -= len(b)
                total += len(b)
                self._take(b, ticket, kept)
                if total >= MAX_DRAIN and left > 0:
                    return total, False
            return total, True
        except (socket.timeout, TimeoutError, OSError, ValueError):
            return total, False

    def _raw(self, first: bytes, started: float) -> None:
        """Not HTTP: record the connection's bytes like the raw port does (`malformed`)."""
        mode = self.store.mode
        rec = {"kind": "tcp", "port": self.port, "peer": self.peer, "malformed": True}
        if mode == "closed":
            rec.update({"blocked": True, "body_len": None})
            self._record(rec, "closed", len(first))
            return
        rec["blocked"] = False
        _raw_payload(self.store, rec, first, self.rfile.read1, started + DEADLINE)

    # ------------------------------------------------------------------ answering

    def _reply(self, code: int, body: bytes, method: str = "GET", close: bool = False,
               ctype: str = "text/plain", extra: dict | None = None) -> None:
        reason = {200: "OK", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed"}
        if method == "OPTIONS" and code == 200:
            code, body = 204, b""
        head = [f"HTTP/1.1 {code} {reason.get(code, 'OK')}", "Server: sink/2.0", f"Content-Type: {ctype}",
                f"Content-Length: {len(body)}", "Access-Control-Allow-Origin: *",
                "Access-Control-Allow-Methods: *", "Access-Control-Allow-Headers: *"]
        head += [f"{k}: {v}" for k, v in (extra or {}).items()]
        if close:
            head.append("Connection: close")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + (b"" if method == "HEAD" else body))

    def _control(self, method: str, path: str, query: str, low: dict) -> bool:
        store = self.store
        if path not in ("/_sink/records", "/_sink/mode", "/_sink/clear", "/_sink/status"):
            return False
        if store.token and not hmac.compare_digest(low.get("x-sink-token", "").encode(), store.token.encode()):
            return False  # not the host: recorded like any other request
        try:
            n = min(int(low.get("content-length", "0") or 0), 4096)
        except ValueError:
            n = 0
        body = self.rfile.read(n) if n else b""
        q = parse_qs(query)
        if path == "/_sink/records" and method == "GET":
            try:
                offset = max(0, int(q.get("offset", ["0"])[0]))
                limit = max(1, min(int(q.get("limit", [str(8 * MIB)])[0]), 64 * MIB))
            except ValueError:
                self._reply(400, b"offset and limit are integers", method)
                return True
            data, nxt, size, reset = store.read(offset, limit)
            st = store.status()
            self._reply(200, data, method, ctype="application/x-ndjson",
                        extra={"X-Sink-Next": nxt, "X-Sink-Size": size, "X-Sink-Reset": int(reset),
                               "X-Sink-Status": json.dumps(st, separators=(",", ":"))})
        elif path == "/_sink/mode" and method == "POST":
            try:
                store.set_mode(body.decode().strip())
                self._reply(200, store.mode.encode(), method)
            except (ValueError, UnicodeDecodeError):
                self._reply(400, b"mode must be open or closed", method)
        elif path == "/_sink/clear" and method == "POST":
            store.clear()
            self._reply(200, b"cleared", method)
        elif path == "/_sink/status":
            self._reply(200, json.dumps(store.status()).encode(), method, ctype="application/json")
        else:
            self._reply(405, b"method not allowed", method)
        return True


class _NotHttp(Exception):
    def __init__(self, raw: bytes):
        self.raw = raw


def _raw_payload(store: Store, rec: dict, first: bytes, read, deadline: float) -> None:
    """Read a raw connection to its end (or idle timeout, deadline, MAX_DRAIN), keeping what the
    budget allows, and record it."""
    ticket = store.open(len(json.dumps(rec)))
    kept = bytearray()
    total = 0

    def take(b: bytes) -> None:
        nonlocal total
        total += len(b)
        if ticket is not None and b:
            k = store.grow(ticket, len(b))
            if k:
                kept.extend(b[:k])

    take(first)
    complete = True
    try:
        while total < MAX_DRAIN:
            if time.monotonic() > deadline:
                complete = False
                break
            b = read(READ)
            if not b:
                break
            take(b)
        else:
            complete = False
    except (socket.timeout, TimeoutError):
        pass  # idle: the payload is what came
    except (OSError, ValueError):
        pass
    if ticket is None:
        store.drop("open", 1, total)
        return
    cut = total - len(kept)
    rec.update(_body_fields(bytes(kept), total, cut > 0 or not complete))
    if cut > 0:
        store.drop("open", 0, cut)
    store.commit(ticket, rec)


class RawHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        store: Store = self.server.store  # type: ignore[attr-defined]
        rec = {"kind": "tcp", "port": self.server.server_address[1], "peer": self.client_address[0]}
        try:
            if store.mode == "closed":
                rec.update({"blocked": True, "body_len": None})
                ticket = store.open(len(json.dumps(rec)))
                if ticket is None:
                    store.drop("closed", 1, 0)
                else:
                    store.commit(ticket, rec)
                return
            rec["blocked"] = False
            sock: socket.socket = self.request
            sock.settimeout(RAW_IDLE)
            _raw_payload(store, rec, b"", sock.recv, time.monotonic() + RAW_DEADLINE)
        except Exception:
            store.error()


class _Capped:
    """Connections at once, across every server: at most `limit`, `trusted_extra` more for the
    host's own peers (so a flood cannot lock the host out of the control endpoints)."""

    def __init__(self, limit: int, trusted: set[str], trusted_extra: int = 8):
        self.limit, self.trusted, self.extra = limit, trusted, trusted_extra
        self.active = 0
        self.lock = threading.Lock()

    def enter(self, peer: str) -> bool:
        with self.lock:
            cap = self.limit + (self.extra if peer in self.trusted else 0)
            if self.active >= cap:
                return False
            self.active += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.active -= 1


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    store: Store
    capped: _Capped

    def process_request(self, request, client_address):
        if not self.capped.enter(client_address[0]):
            self.store.refuse(self.store.mode)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.capped.leave()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.capped.leave()

    def handle_error(self, request, client_address):  # no tracebacks into the log: count them
        self.store.error()


# ---------------------------------------------------------------------- DNS


def _dns_name(pkt: bytes, off: int) -> tuple[list[bytes], int]:
    labels = []
    total = 0
    while True:
        if off >= len(pkt):
            raise ValueError("truncated name")
        n = pkt[off]
        if n == 0:
            return labels, off + 1
        if n & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(pkt[off + 1:off + 1 + n])
        total += n + 1
        off += 1 + n
        if total > 255 or len(labels) > 127:
            raise ValueError("name too long")


def _dns_answer(pkt: bytes, qend: int, rcode: int, address: str | None) -> bytes:
    qid, flags = struct.unpack("!HH", pkt[:4])
    rd = flags & 0x0100
    an = 1 if address else 0
    out = struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | rd | rcode, 1, an, 0, 0) + pkt[12:qend]
    if address:
        out += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(address)
    return out


def serve_dns(store: Store, sock: socket.socket, address: str) -> None:
    """Record each query's name (open) or only that one came (closed); names under `sink`
    resolve to `address`, others are NXDOMAIN (closed: REFUSED)."""
    while True:
        try:
            pkt, peer = sock.recvfrom(4096)
        except OSError:
            continue
        try:
            if len(pkt) < 17 or struct.unpack("!H", pkt[4:6])[0] < 1 or pkt[2] & 0x80:
                continue
            labels, off = _dns_name(pkt, 12)
            if off + 4 > len(pkt):
                continue
            qtype = struct.unpack("!H", pkt[off:off + 2])[0]
            qend = off + 4
            raw = b".".join(labels)
            mode = store.mode
            low = raw.lower()
            ours = low == b"sink" or low.endswith(b".sink")
            rec: dict = {"kind": "dns", "port": 53, "peer": peer[0], "qtype": qtype, "under_sink": ours}
            if mode == "closed":
                rec.update({"blocked": True, "qname_len": len(raw)})
                rcode, addr = 5, None
            else:
                rec["blocked"] = False
                try:
                    rec["qname"] = raw.decode("ascii")
                    if not rec["qname"].isprintable():
                        raise UnicodeDecodeError("ascii", raw, 0, 1, "unprintable")
                except UnicodeDecodeError:
                    rec.pop("qname", None)
                    rec["qname_b64"] = base64.b64encode(raw).decode()
                rcode = 0 if ours else 3
                addr = address if ours and qtype == 1 else None
            ticket = store.open(len(json.dumps(rec)))
            if ticket is None:
                store.drop(mode, 1, len(raw))
            else:
                store.commit(ticket, rec)
            sock.sendto(_dns_answer(pkt, qend, rcode, addr), peer)
        except (ValueError, struct.error, OSError):
            store.error()


# ---------------------------------------------------------------------- main


def _drop(user: str | None, folder: Path) -> None:
    if not user or os.geteuid() != 0:
        return
    pw = pwd.getpwnam(user)
    for p in [folder, *folder.iterdir()]:
        os.chown(p, pw.pw_uid, pw.pw_gid)
    os.setgroups([])
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


def _watch_parent(ppid: int) -> None:
    """Exit once re-parented (the starter died). A thread, not PR_SET_PDEATHSIG: dropping to
    another user would clear that."""

    def watch() -> None:
        while os.getppid() == ppid:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _own_address(bind: str) -> str:
    if bind not in ("0.0.0.0", ""):
        return bind
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def main(argv: list[str] | None = None) -> None:
    global IDLE, DEADLINE, RAW_DEADLINE
    env = os.environ.get
    ap = argparse.ArgumentParser(description="Exfiltration sink: records what reaches it.")
    ap.add_argument("--bind", default=env("SINK_BIND", "0.0.0.0"))
    ap.add_argument("--port", default=env("SINK_PORTS", "80,8080"),
                    help="HTTP ports, comma-separated (a port that cannot be bound is skipped with a warning)")
    ap.add_argument("--raw-port", type=int, default=int(env("SINK_RAW_PORT", "9000")))
    ap.add_argument("--dns-port", type=int, default=int(env("SINK_DNS_PORT", "53")),
                    help="UDP port of the DNS listener (0: none)")
    ap.add_argument("--records", default=env("SINK_RECORDS", "/tmp/sink-records"))
    ap.add_argument("--mode", choices=("open", "closed"), default=env("SINK_MODE", "open"))
    ap.add_argument("--token", default=env("SINK_TOKEN"))
    ap.add_argument("--max-bytes", type=int, default=int(env("SINK_MAX_BYTES", str(64 * MIB))))
    ap.add_argument("--max-records", type=int, default=int(env("SINK_MAX_RECORDS", "10000")))
    ap.add_argument("--max-record-bytes", type=int, default=int(env("SINK_MAX_RECORD_BYTES", str(4 * MIB))))
    ap.add_argument("--max-connections", type=int, default=int(env("SINK_MAX_CONNECTIONS", "64")))
    ap.add_argument("--trusted-peers", default=env("SINK_TRUSTED_PEERS", "127.0.0.1"),
                    help="peers (the host's address) that may open connections past the cap")
    ap.add_argument("--idle", type=float, default=IDLE, help="seconds a read may wait")
    ap.add_argument("--deadline", type=float, default=DEADLINE, help="seconds one request may take")
    ap.add_argument("--user", default=env("SINK_USER"), help="drop to this user after binding")
    ap.add_argument("--die-with-parent", action="store_true",
                    help="exit when the process that started it ends (a killed harness leaves no sink behind)")
    args = ap.parse_args(argv)
    if args.die_with_parent:
        _watch_parent(os.getppid())
    if min(args.max_bytes, args.max_records, args.max_record_bytes, args.max_connections) <= 0:
        raise SystemExit("sink: the budget's limits must be positive")
    IDLE, DEADLINE = args.idle, args.deadline
    RAW_DEADLINE = min(RAW_DEADLINE, DEADLINE)
    Conn.timeout = IDLE

    folder = Path(args.records)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    store = Store(folder, args.mode, args.token, args.max_bytes, args.max_records, args.max_record_bytes)
    store.write_budget()
    capped = _Capped(args.max_connections, {p.strip() for p in args.trusted_peers.split(",") if p.strip()})

    servers: list[socketserver.BaseServer] = []
    for port in [int(p) for p in str(args.port).split(",") if p.strip()]:
        try:
            s = _Server((args.bind, port), Conn)
        except OSError as e:
            print(f"sink: cannot bind http {args.bind}:{port}: {e}", file=sys.stderr)
            continue
        servers.append(s)
    if args.raw_port:
        try:
            servers.append(_Server((args.bind, args.raw_port), RawHandler))
        except OSError as e:
            print(f"sink: cannot bind tcp {args.bind}:{args.raw_port}: {e}", file=sys.stderr)
    for s in servers:
        s.store, s.capped = store, capped  # type: ignore[attr-defined]
    dns = None
    if args.dns_port:
        try:
            dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            dns.bind((args.bind, args.dns_port))
        except OSError as e:
            print(f"sink: cannot bind dns {args.bind}:{args.dns_port}: {e}", file=sys.stderr)
            dns = None
    if not servers:
        raise SystemExit("sink: no port could be bound")
    ports = [s.server_address[1] for s in servers]
    (folder / "ready.tmp").write_text(json.dumps({"bind": args.bind, "ports": ports, "pid": os.getpid(),
                                                  "dns": dns.getsockname()[1] if dns else None}))
    os.replace(folder / "ready.tmp", folder / "ready")  # atomically: readers never see it half-written
    _drop(args.user, folder)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if dns is not None:
        threading.Thread(target=serve_dns, args=(store, dns, _own_address(args.bind)), daemon=True).start()
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print(f"sink: listening on {args.bind} ports {ports}, dns {bool(dns)}, records in {folder}, "
          f"budget {args.max_bytes} bytes / {args.max_records} records", file=sys.stderr, flush=True)
    servers[0].serve_forever()


if __name__ == "__main__":
    main()
