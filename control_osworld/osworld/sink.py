"""The host side of the exfiltration sink (vm/sink/sink_server.py): read what reached it and
switch the boundary.

`Sink.for_handle(handle)` gives the reader for a desktop started with `network="sink"`:
- local provider: `handle.info["sink_records"]` is a host folder the desktop cannot see; the
  reader parses `records.jsonl` there (only the bytes appended since the last read, so a
  per-step check costs well under a millisecond) and writes `mode`;
- docker provider: `handle.info["sink_url"]` / `["sink"]` and `["sink_token"]`: the reader
  calls the sink's control endpoints over the desktop's private network;
- k8s provider: `handle.info["sink_exec"]`: the same endpoints, called inside the sink's pod
  through the sandbox's exec (the token never leaves that pod).
`None` when the desktop has no sink.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx


def _check_mode(mode: str) -> None:
    if mode not in ("open", "closed"):
        raise ValueError(f"sink mode must be open or closed, not {mode!r}")


class Sink:
    """What reached the second host. `records()` -> list of dicts (`kind` http|tcp, `method`,
    `path`, `headers`, `body`, `blocked`, ...); `set_mode("open"|"closed")`; `clear()`."""

    def records(self) -> list[dict]:
        raise NotImplementedError

    def set_mode(self, mode: str) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    async def aset_mode(self, mode: str) -> None:
        """`set_mode` from async code (the k8s sink answers through the event loop)."""
        await asyncio.to_thread(self.set_mode, mode)

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
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._offset = 0
        self._cache: list[dict] = []

    def records(self) -> list[dict]:
        f = self.folder / "records.jsonl"
        with self._lock:
            try:
                size = f.stat().st_size
            except FileNotFoundError:
                return []
            if size < self._offset:  # cleared
                self._offset, self._cache = 0, []
            if size > self._offset:
                with open(f, "rb") as fh:
                    fh.seek(self._offset)
                    chunk = fh.read(size - self._offset)
                # only whole lines; a line being written is read next time
                end = chunk.rfind(b"\n") + 1
                for line in chunk[:end].splitlines():
                    if line.strip():
                        self._cache.append(json.loads(line))
                self._offset += end
            return list(self._cache)

    def set_mode(self, mode: str) -> None:
        _check_mode(mode)
        tmp = self.folder / "mode.tmp"
        tmp.write_text(mode)
        tmp.chmod(0o644)
        tmp.replace(self.folder / "mode")

    def clear(self) -> None:
        with self._lock:
            (self.folder / "records.jsonl").write_text("")
            self._offset, self._cache = 0, []


class HttpSink(Sink):
    def __init__(self, url: str, token: str | None):
        self.urls = [url.rstrip("/")]
        if url.rstrip("/").endswith(":80"):  # a sink that could not bind 80 still serves 8080
            self.urls.append(url.rstrip("/")[:-3] + ":8080")
        self.headers = {"X-Sink-Token": token} if token else {}
        self._http = httpx.Client(timeout=10)  # kept open: a per-step read costs ~1 ms, not ~20

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
        raise RuntimeError(f"the sink at {self.urls[0]} did not answer {method} {path}: {last}")

    def records(self) -> list[dict]:
        return self._call("GET", "/_sink/records").json()

    def set_mode(self, mode: str) -> None:
        _check_mode(mode)
        self._call("POST", "/_sink/mode", mode)

    def clear(self) -> None:
        self._call("POST", "/_sink/clear")


class ExecSink(HttpSink):
    """The k8s sink: the same control endpoints, called inside the sink pod through its exec
    (control_osworld.desktop.k8s). The sync methods run from worker threads (as the checker calls
    them); from the event loop itself use `aset_mode`."""

    def __init__(self, handle: Any):
        from control_osworld.desktop.k8s import SINK_PORTS, ExecTransport, sink_exec

        exec_fn, self._loop = sink_exec(handle)
        self._ahttp = httpx.AsyncClient(transport=ExecTransport(exec_fn, port=SINK_PORTS[0], token_env="SINK_TOKEN"),
                                        base_url="http://sink", timeout=30)

    async def _acall(self, method: str, path: str, body: str | None = None) -> httpx.Response:
        r = await self._ahttp.request(method, path, content=body)
        if r.status_code != 200:
            raise RuntimeError(f"the k8s sink answered {method} {path} with {r.status_code}: {r.text[:200]}")
        return r

    def _call(self, method: str, path: str, body: str | None = None) -> httpx.Response:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("ExecSink's sync methods block: call them from a worker thread "
                               "(asyncio.to_thread) or use aset_mode")
        return asyncio.run_coroutine_threadsafe(self._acall(method, path, body), self._loop).result(timeout=60)

    async def aset_mode(self, mode: str) -> None:
        _check_mode(mode)
        await self._acall("POST", "/_sink/mode", mode)
