"""Host-side client of the OSWorld protocol (REFERENCE §2), over TCP or a unix socket.

Each operation is written once as a `_Req` (method, path, payload, how to read the reply);
`DesktopClient` sends it synchronously and `AsyncDesktopClient` with asyncio, so the two never
drift apart.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx

from control_osworld.desktop.provider import DesktopHandle


class DesktopError(RuntimeError):
    """The desktop's server refused or failed a request; `status` is its HTTP code."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass
class StepResult:
    returncode: int
    output: str
    error: str
    screenshot: bytes | None


@dataclass
class _Req:
    method: str
    path: str
    json: dict | None = None
    data: dict | None = None
    files: dict | None = None
    read: Callable[[httpx.Response], Any] = field(default=lambda r: r.json())
    missing_ok: bool = False  # a 404 means "absent" (upstream: anything but 200 = no file)
    timeout: float | None = None


def _raise_for(r: httpx.Response, req: _Req) -> None:
    if r.status_code == 200:
        return
    try:
        msg = r.json().get("message") or r.text
    except Exception:
        msg = r.text
    raise DesktopError(f"{req.method} {req.path} -> {r.status_code}: {msg}", r.status_code)


def _finish(r: httpx.Response, req: _Req):
    if req.missing_ok and r.status_code == 404:
        return None
    _raise_for(r, req)
    return req.read(r)


def _step_result(r: httpx.Response) -> StepResult:
    j = r.json()
    shot = j.get("screenshot")
    return StepResult(j.get("returncode", 0), j.get("output", ""), j.get("error", ""),
                      base64.b64decode(shot) if shot else None)


class _Ops:
    """The protocol's operations. Return values are documented on each."""

    @staticmethod
    def execute(command: str | list[str], shell: bool = False, timeout: float = 120, input: str | None = None,
                cwd: str | None = None, env: dict[str, str] | None = None, trusted: bool = False) -> _Req:
        """-> {status, output, error, returncode}; a non-zero returncode is not an error.
        `input`, `cwd` and `env` are our extensions (upstream servers ignore them).
        `trusted` (ours): the harness's own command (checker, evaluators), run where the agent's
        uid cannot reach it (docs/integrity.md); by default a command runs as the agent."""
        body = {"command": command, "shell": shell, "timeout": timeout}
        body.update({k: v for k, v in (("input", input), ("cwd", cwd), ("env", env)) if v is not None})
        if trusted:
            body["trusted"] = True
        return _Req("POST", "/execute", json=body, timeout=timeout + 10)

    @staticmethod
    def run_python(code: str, timeout: float = 60) -> _Req:
        """pyautogui code in the desktop's long-lived executor -> {output, error, returncode}."""
        return _Ops.execute(["python", "-c", code], timeout=timeout)

    @staticmethod
    def step(code: str | None, screenshot: bool = True, pause: float = 0.0, timeout: float = 60,
             size: tuple[int, int] | None = None) -> _Req:
        """Run pyautogui code, then take a screenshot (resized to `size` in the desktop), in one
        round trip -> StepResult."""
        body = {"code": code, "screenshot": screenshot, "pause": pause, "timeout": timeout}
        if size is not None:
            body["size"] = list(size)
        return _Req("POST", "/step", json=body, read=_step_result, timeout=timeout + 10)

    @staticmethod
    def screenshot(size: tuple[int, int] | None = None) -> _Req:
        """-> PNG bytes (resized to `size` in the desktop; our servers only, upstream's ignore it)."""
        path = "/screenshot" if size is None else f"/screenshot?width={size[0]}&height={size[1]}"
        return _Req("GET", path, read=lambda r: r.content)

    @staticmethod
    def screen_size() -> _Req:
        """-> (width, height)."""
        return _Req("POST", "/screen_size", read=lambda r: (r.json()["width"], r.json()["height"]))

    @staticmethod
    def accessibility_tree() -> _Req:
        """-> XML string in upstream's namespaces."""
        return _Req("GET", "/accessibility", read=lambda r: r.json()["AT"], timeout=60)

    @staticmethod
    def terminal() -> _Req:
        """-> the terminal's text, or None when no terminal is open."""
        return _Req("GET", "/terminal", read=lambda r: r.json().get("output"))

    @staticmethod
    def platform() -> _Req:
        return _Req("POST", "/platform", read=lambda r: r.text)

    @staticmethod
    def cursor_position() -> _Req:
        return _Req("POST", "/cursor_position", read=lambda r: tuple(r.json()))

    @staticmethod
    def window_size(app_class_name: str) -> _Req:
        return _Req("POST", "/window_size", json={"app_class_name": app_class_name}, missing_ok=True)

    @staticmethod
    def desktop_path() -> _Req:
        return _Req("POST", "/desktop_path", read=lambda r: r.json()["desktop_path"])

    @staticmethod
    def list_directory(path: str) -> _Req:
        return _Req("POST", "/list_directory", json={"path": path}, read=lambda r: r.json()["directory_tree"],
                    missing_ok=True)

    @staticmethod
    def read_file(path: str) -> _Req:
        """-> bytes, or None when there is no such file (form data, as upstream sends it)."""
        return _Req("POST", "/file", data={"file_path": path}, read=lambda r: r.content, missing_ok=True)

    @staticmethod
    def write_file(path: str, data: bytes | str) -> _Req:
        """Upload; the server creates parent folders."""
        raw = data.encode() if isinstance(data, str) else data
        return _Req("POST", "/setup/upload", data={"file_path": path},
                    files={"file_data": ("file", raw)}, read=lambda r: None)

    @staticmethod
    def launch(command: str | list[str], shell: bool = False) -> _Req:
        return _Req("POST", "/setup/launch", json={"command": command, "shell": shell}, read=lambda r: r.text)

    @staticmethod
    def open_file(path: str, timeout: float = 60) -> _Req:
        return _Req("POST", "/setup/open_file", json={"path": path, "timeout": timeout}, read=lambda r: r.text,
                    timeout=timeout + 10)

    @staticmethod
    def activate_window(window_name: str, strict: bool = False, by_class: bool = False) -> _Req:
        return _Req("POST", "/setup/activate_window",
                    json={"window_name": window_name, "strict": strict, "by_class": by_class}, read=lambda r: r.text)

    @staticmethod
    def close_window(window_name: str, strict: bool = False, by_class: bool = False) -> _Req:
        return _Req("POST", "/setup/close_window",
                    json={"window_name": window_name, "strict": strict, "by_class": by_class}, read=lambda r: r.text)


TOKEN_HEADER = "X-Osworld-Token"
"""The server's token (docker provider: the harness alone has it; docs/integrity.md)."""


def _transport_args(base_url: str, uds: str | None, token: str | None = None) -> dict:
    return {"base_url": base_url if not uds else "http://desktop",
            **({"headers": {TOKEN_HEADER: token}} if token else {})}


class DesktopClient:
    """Synchronous client. `DesktopClient("http://host:5000")` or `DesktopClient(uds=path)`."""

    def __init__(self, base_url: str = "http://desktop", uds: str | None = None, timeout: float = 60,
                 token: str | None = None):
        transport = httpx.HTTPTransport(uds=uds) if uds else None
        self._http = httpx.Client(transport=transport, timeout=timeout, **_transport_args(base_url, uds, token))

    @classmethod
    def for_handle(cls, handle: DesktopHandle, timeout: float = 60) -> "DesktopClient":
        return cls(handle.base_url, handle.uds, timeout, token=handle.info.get("server_token"))

    def _send(self, req: _Req):
        try:
            r = self._http.request(req.method, req.path, json=req.json, data=req.data, files=req.files,
                                   timeout=req.timeout or httpx.USE_CLIENT_DEFAULT)
        except httpx.TransportError as e:
            raise DesktopError(f"{req.method} {req.path}: desktop unreachable ({type(e).__name__}: {e})") from e
        return _finish(r, req)

    def __getattr__(self, name: str):
        op = getattr(_Ops, name)
        return lambda *a, **k: self._send(op(*a, **k))

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                self._http.get("/healthz", timeout=2).raise_for_status()
                return
            except Exception as e:  # not listening yet
                last = e
                time.sleep(0.02)
        raise DesktopError(f"desktop not ready after {timeout:g} s: {last}")

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncDesktopClient:
    """The same operations, awaitable (used by the inspect sandbox and the agent loop)."""

    def __init__(self, base_url: str = "http://desktop", uds: str | None = None, timeout: float = 60,
                 transport: httpx.AsyncBaseTransport | None = None, token: str | None = None):
        if transport is None and uds:
            transport = httpx.AsyncHTTPTransport(uds=uds)
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout, **_transport_args(base_url, uds, token))

    @classmethod
    def for_handle(cls, handle: DesktopHandle, timeout: float = 60,
                   transport: httpx.AsyncBaseTransport | None = None) -> "AsyncDesktopClient":
        """`transport`: the provider's own way to the server (k8s: the sandbox's exec), if any."""
        return cls(handle.base_url, handle.uds, timeout, transport, token=handle.info.get("server_token"))

    async def _send(self, req: _Req):
        try:
            r = await self._http.request(req.method, req.path, json=req.json, data=req.data, files=req.files,
                                         timeout=req.timeout or httpx.USE_CLIENT_DEFAULT)
        except httpx.TransportError as e:
            raise DesktopError(f"{req.method} {req.path}: desktop unreachable ({type(e).__name__}: {e})") from e
        return _finish(r, req)

    def __getattr__(self, name: str):
        op = getattr(_Ops, name)
        return lambda *a, **k: self._send(op(*a, **k))

    async def aclose(self) -> None:
        await self._http.aclose()
