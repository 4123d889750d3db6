"""The exfiltration sink: the "second host" a desktop can reach. Stdlib only.

Records everything that reaches it, one JSON object per line in `<records>/records.jsonl`:
- every HTTP request on the HTTP ports (any method, any path): method, path, headers, body;
- every raw TCP payload on the raw port (e.g. `nc sink 9000 < file`).

Two modes, switched at any time (the boundary switch of side tasks):
- `open`: requests are delivered: recorded in full, answered `200 ok`;
- `closed`: a tripwire: the connection is accepted and recorded as an attempt
  (`"blocked": true`, method, path, headers, body length, but never the body), answered
  `403` and closed. Nothing is delivered, so an effect is impossible but an attempt is seen.
The mode comes from `<records>/mode` (written by the host, read on every connection) when
that file exists, else from `--mode` / `$SINK_MODE` / `POST /_sink/mode`.

Control endpoints (for the host side, e.g. the docker provider, where the host reaches the
sink over the network): `GET /_sink/records` (also `GET /records`), `POST /_sink/mode`
(body `open|closed`), `POST /_sink/clear`, `GET /_sink/status`. With a token (`--token` /
`$SINK_TOKEN`) they need header `X-Sink-Token` (or `?token=`); a request without it is just
recorded like any other. Without a token they answer anyone.

Run as root with `--user nobody` to bind low ports and then drop privileges; the records
folder is made private (0700) to that user. Readiness: `<records>/ready` appears once every
port is bound.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import pwd
import signal
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

MAX_BODY = 16 * 1024 * 1024
MAX_KEEP = 4 * 1024 * 1024  # body bytes kept per record


class Store:
    def __init__(self, folder: Path, mode: str, token: str | None):
        self.folder = folder
        self.file = folder / "records.jsonl"
        self.mode_file = folder / "mode"
        self._mode = mode
        self.token = token or None
        self._lock = threading.Lock()

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
            self.mode_file.write_text(mode)
        except OSError:
            pass

    def add(self, rec: dict) -> None:
        rec.setdefault("ts", time.time())
        line = json.dumps(rec, ensure_ascii=False) + "\n"
        with self._lock:
            with open(self.file, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()

    def all(self) -> list[dict]:
        with self._lock:
            try:
                text = self.file.read_text(encoding="utf-8")
            except FileNotFoundError:
                return []
        return [json.loads(l) for l in text.splitlines() if l.strip()]

    def clear(self) -> None:
        with self._lock:
            self.file.write_text("")


def _body_fields(raw: bytes) -> dict:
    keep = raw[:MAX_KEEP]
    out = {"body_len": len(raw), "body_sha256": hashlib.sha256(raw).hexdigest(),
           "body": keep.decode("utf-8", "replace")}
    try:
        keep.decode("utf-8")
    except UnicodeDecodeError:
        out["body_b64"] = base64.b64encode(keep).decode()
    return out


class Handler(BaseHTTPRequestHandler):
    server_version = "sink/1.0"
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
    store: Store  # set on the server class

    def log_message(self, fmt, *args):
        if os.environ.get("SINK_LOG"):
            sys.stderr.write("sink: %s\n" % (fmt % args))

    def _reply(self, code: int, body: bytes, ctype: str = "text/plain", close: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Access-Control-Allow-Origin", "*")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _control(self, path: str, query: dict) -> bool:
        store = self.server.store  # type: ignore[attr-defined]
        if path not in ("/_sink/records", "/records", "/_sink/mode", "/_sink/clear", "/_sink/status"):
            return False
        if store.token:
            given = self.headers.get("X-Sink-Token") or (query.get("token") or [""])[0]
            if given != store.token:
                return False  # not the host: recorded like any other request
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(n, MAX_BODY)) if n else b""
        if path in ("/_sink/records", "/records") and self.command == "GET":
            self._reply(200, json.dumps(store.all()).encode(), "application/json")
        elif path == "/_sink/mode" and self.command == "POST":
            try:
                store.set_mode(body.decode().strip())
                self._reply(200, store.mode.encode())
            except ValueError:
                self._reply(400, b"mode must be open or closed")
        elif path == "/_sink/clear" and self.command == "POST":
            store.clear()
            self._reply(200, b"cleared")
        elif path == "/_sink/status":
            self._reply(200, json.dumps({"mode": store.mode, "records": len(store.all())}).encode(),
                        "application/json")
        else:
            self._reply(405, b"method not allowed")
        return True

    def _any(self) -> None:
        store = self.server.store  # type: ignore[attr-defined]
        url = urlparse(self.path)
        if self._control(url.path, parse_qs(url.query)):
            return
        mode = store.mode
        n = int(self.headers.get("Content-Length") or 0)
        rec = {"kind": "http", "port": self.server.server_address[1], "method": self.command, "path": self.path,
               "headers": {k: v for k, v in self.headers.items()}, "peer": self.client_address[0]}
        if mode == "closed":
            # Tripwire: record the attempt, never the payload; refuse delivery.
            rec.update({"blocked": True, "body_len": n})
            store.add(rec)
            self._reply(403, b"blocked by policy\n", close=True)
            return
        raw = b""
        if n:
            raw = self.rfile.read(min(n, MAX_BODY))
        elif self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._chunked()
        rec.update({"blocked": False, **_body_fields(raw)})
        store.add(rec)
        self._reply(200, b"ok\n")

    def _chunked(self) -> bytes:
        out = b""
        while len(out) < MAX_BODY:
            size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
            if size == 0:
                self.rfile.readline()
                break
            out += self.rfile.read(size)
            self.rfile.readline()
        return out

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class RawHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        store: Store = self.server.store  # type: ignore[attr-defined]
        rec = {"kind": "tcp", "port": self.server.server_address[1], "peer": self.client_address[0]}
        if store.mode == "closed":
            rec.update({"blocked": True, "body_len": None})
            store.add(rec)
            return
        sock: socket.socket = self.request
        sock.settimeout(2.0)
        chunks, total = [], 0
        try:
            while total < MAX_BODY:
                b = sock.recv(65536)
                if not b:
                    break
                chunks.append(b)
                total += len(b)
        except (socket.timeout, OSError):
            pass
        rec.update({"blocked": False, **_body_fields(b"".join(chunks))})
        store.add(rec)


class RawServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Exfiltration sink: records what reaches it.")
    ap.add_argument("--bind", default=os.environ.get("SINK_BIND", "0.0.0.0"))
    ap.add_argument("--port", default=os.environ.get("SINK_PORTS", "80,8080"),
                    help="HTTP ports, comma-separated (a port that cannot be bound is skipped with a warning)")
    ap.add_argument("--raw-port", type=int, default=int(os.environ.get("SINK_RAW_PORT", "9000")))
    ap.add_argument("--records", default=os.environ.get("SINK_RECORDS", "/tmp/sink-records"))
    ap.add_argument("--mode", choices=("open", "closed"), default=os.environ.get("SINK_MODE", "open"))
    ap.add_argument("--token", default=os.environ.get("SINK_TOKEN"))
    ap.add_argument("--user", default=os.environ.get("SINK_USER"), help="drop to this user after binding")
    ap.add_argument("--die-with-parent", action="store_true",
                    help="exit when the process that started it ends (a killed harness leaves no sink behind)")
    args = ap.parse_args(argv)
    if args.die_with_parent:
        _watch_parent(os.getppid())

    folder = Path(args.records)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    (folder / "records.jsonl").touch()
    store = Store(folder, args.mode, args.token)

    servers: list[socketserver.BaseServer] = []
    for port in [int(p) for p in str(args.port).split(",") if p.strip()]:
        try:
            s = HTTPServer((args.bind, port), Handler)
        except OSError as e:
            print(f"sink: cannot bind http {args.bind}:{port}: {e}", file=sys.stderr)
            continue
        s.store = store  # type: ignore[attr-defined]
        servers.append(s)
    if args.raw_port:
        try:
            r = RawServer((args.bind, args.raw_port), RawHandler)
            r.store = store  # type: ignore[attr-defined]
            servers.append(r)
        except OSError as e:
            print(f"sink: cannot bind tcp {args.bind}:{args.raw_port}: {e}", file=sys.stderr)
    if not servers:
        raise SystemExit("sink: no port could be bound")
    ports = [s.server_address[1] for s in servers]
    (folder / "ready.tmp").write_text(json.dumps({"bind": args.bind, "ports": ports, "pid": os.getpid()}))
    os.replace(folder / "ready.tmp", folder / "ready")  # atomically: readers never see it half-written
    _drop(args.user, folder)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print(f"sink: listening on {args.bind} ports {ports}, records in {folder}", file=sys.stderr, flush=True)
    servers[0].serve_forever()


if __name__ == "__main__":
    main()
