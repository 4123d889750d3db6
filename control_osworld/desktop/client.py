"""Host-side client of the OSWorld protocol (REFERENCE §2), over TCP or a unix socket.

Each operation is written once as a `_Req` (method, path, payload, how to read the reply);
`DesktopClient` sends it synchronously and `AsyncDesktopClient` with asyncio, so the two never
drift apart. Operations that depend on what the server offers (`step`, `screenshot`, `execute`
with stdin/cwd/env) are written once as plans: generators that yield requests, sleeps and CPU
work, driven by either client.

Any upstream OSWorld server works: the client asks `GET /healthz` which extensions the server
has (ours lists them; upstream's answers 404, so: none) and falls back to upstream's endpoints,
`/execute` with upstream's `python -c "import pyautogui; ..."` action form instead of `/step`,
the full-size `/screenshot` resized here to the size asked for, stdin/cwd/env folded into a
shell command. Where both servers accept a form, the client sends upstream's (GET /platform,
GET /cursor_position, form data for /window_size).
"""

from __future__ import annotations

import base64
import functools
import io
import shlex
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import (
    Any,
    Awaitable,
    Callable,
    Concatenate,
    Generator,
    Generic,
    Iterable,
    ParamSpec,
    TypeVar,
    overload,
)

import httpx

from control_osworld.desktop.errors import DesktopDied, DesktopError, DesktopHung
from control_osworld.desktop.handle import DesktopHandle

__all__ = ["AsyncDesktopClient", "DesktopClient", "DesktopDied", "DesktopError", "DesktopHung", "StepResult",
           "command_stream", "command_truncated"]

EXTENSIONS = frozenset({"step", "screenshot_size", "execute_env", "integrity", "byte_safe_output"})
"""What our server adds to upstream's protocol (`GET /healthz` lists them): `POST /step`,
`/screenshot?width=&height=`, `input`/`cwd`/`env`/`timeout`/`max_output` on `/execute`, `GET
/integrity` (its counts of the agent's faults), and bounded, byte-safe command output
(`output_b64`, `truncated`: see `_Ops.execute`)."""
UPSTREAM_ACTION_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False\n"
"""What upstream's client puts before every pyautogui action (desktop_env/controllers/python.py;
a newline instead of its `; ` so that actions may start with a compound statement)."""


def _unreachable(req: "_Req", e: httpx.TransportError) -> DesktopError:
    kind = DesktopHung if isinstance(e, httpx.TimeoutException) else DesktopDied
    what = "no answer in time" if kind is DesktopHung else "desktop unreachable"
    return kind(f"{req.method} {req.path}: {what} ({type(e).__name__}: {e})")


@dataclass
class StepResult:
    returncode: int
    output: str
    error: str
    screenshot: bytes | None
    agent_fault: str | None = None
    """Set when the action failed by the agent's own doing (our server: its executor killed, not
    restartable, babbling): desktop/errors.py."""


def command_stream(r: dict[str, Any], name: str = "output") -> bytes:
    """A stream of an `/execute` reply as its exact bytes: `<name>_b64` when the server sent it
    (the bytes were not UTF-8), else the text."""
    b64 = r.get(f"{name}_b64")
    if isinstance(b64, str):
        return base64.b64decode(b64)
    text = r.get(name)
    return text.encode("utf-8", "surrogateescape") if isinstance(text, str) else b""


def command_truncated(r: dict[str, Any], name: str | None = None) -> bool:
    """The server cut the reply's output (`name`'s, or any stream's when None)."""
    if name is not None:
        return bool(r.get(f"{name}_truncated"))
    return bool(r.get("truncated") or r.get("output_truncated") or r.get("error_truncated"))


R = TypeVar("R")
P = ParamSpec("P")


@dataclass
class _Req(Generic[R]):
    """One request; `R` is what the operation returns (None where `absent` allows it)."""

    method: str
    path: str
    json: dict | None = None
    data: dict | None = None
    files: dict | None = None
    read: Callable[[httpx.Response], R] = field(default=lambda r: r.json())
    absent: tuple[int, ...] = ()  # statuses that mean "absent": the reply is None
    timeout: float | None = None


def _raise_for(r: httpx.Response, req: _Req) -> None:
    if r.status_code == 200:
        return
    try:
        msg = r.json().get("message") or r.text
    except Exception:
        msg = r.text
    raise DesktopError(f"{req.method} {req.path} -> {r.status_code}: {msg}", r.status_code)


def _finish(r: httpx.Response, req: _Req[R]) -> R:
    if r.status_code in req.absent:
        return None  # type: ignore[return-value]  # an `absent` operation's R includes None
    _raise_for(r, req)
    return req.read(r)


def _step_result(r: httpx.Response) -> StepResult:
    j = r.json()
    shot = j.get("screenshot")
    return StepResult(j.get("returncode", 0), j.get("output", ""), j.get("error", ""),
                      base64.b64decode(shot) if shot else None, j.get("agent_fault"))


class _Ops:
    """The protocol's operations. Return values are documented on each."""

    @staticmethod
    def execute(command: str | list[str], shell: bool = False, timeout: float = 120, input: str | None = None,
                cwd: str | None = None, env: dict[str, str] | None = None, trusted: bool = False,
                max_output: int | None = None) -> _Req[dict[str, Any]]:
        """-> {status, output, error, returncode}; a non-zero returncode is not an error.
        `input`, `cwd` and `env` are our extensions (upstream servers ignore them).
        `trusted` (ours): the harness's own command (checker, evaluators), run where the agent's
        uid cannot reach it (docs/integrity.md); by default a command runs as the agent.
        Ours too: each stream is bounded (`max_output` bytes, the server's own bound at most) and
        byte-safe: `output`/`error` are text (undecodable bytes as U+FFFD); `output_b64`/`error_b64`
        carry the exact bytes when they are not UTF-8; `truncated` (and `output_truncated`,
        `error_truncated`) when a stream was cut (`command_stream` reads them)."""
        body: dict[str, Any] = {"command": command, "shell": shell, "timeout": timeout}
        body.update({k: v for k, v in (("input", input), ("cwd", cwd), ("env", env), ("max_output", max_output))
                     if v is not None})
        if trusted:
            body["trusted"] = True
        return _Req("POST", "/execute", json=body, timeout=timeout + 10)

    @staticmethod
    def run_python(code: str, timeout: float = 60) -> _Req[dict[str, Any]]:
        """pyautogui code in the desktop's long-lived executor -> {output, error, returncode}."""
        return _Ops.execute(["python", "-c", code], timeout=timeout)

    @staticmethod
    def integrity() -> _Req[dict[str, Any] | None]:
        """-> what our server counted of the agent's faults (executor restarts and deaths), or
        None (upstream's server has no such endpoint)."""
        return _Req("GET", "/integrity", absent=(404, 405), timeout=10)

    @staticmethod
    def healthz() -> _Req[frozenset[str] | None]:
        """-> the server's extensions (EXTENSIONS for ours); an empty set when it has no
        /healthz (upstream's)."""
        return _Req("GET", "/healthz", read=lambda r: frozenset(r.json().get("extensions", EXTENSIONS)),
                    absent=(404, 405), timeout=10)

    @staticmethod
    def step(code: str | None, screenshot: bool = True, pause: float = 0.0, timeout: float = 60,
             size: tuple[int, int] | None = None) -> _Req[StepResult]:
        """Run pyautogui code, then take a screenshot (resized to `size` in the desktop), in one
        round trip -> StepResult."""
        body: dict[str, Any] = {"code": code, "screenshot": screenshot, "pause": pause, "timeout": timeout}
        if size is not None:
            body["size"] = list(size)
        return _Req("POST", "/step", json=body, read=_step_result, timeout=timeout + 10)

    @staticmethod
    def screenshot(size: tuple[int, int] | None = None) -> _Req[bytes]:
        """-> PNG bytes (resized to `size` in the desktop; our servers only, upstream's ignore it)."""
        path = "/screenshot" if size is None else f"/screenshot?width={size[0]}&height={size[1]}"
        return _Req("GET", path, read=lambda r: r.content)

    @staticmethod
    def screen_size() -> _Req[tuple[int, int]]:
        """-> (width, height)."""
        return _Req("POST", "/screen_size", read=lambda r: (r.json()["width"], r.json()["height"]))

    @staticmethod
    def accessibility_tree() -> _Req[str]:
        """-> XML string in upstream's namespaces."""
        return _Req("GET", "/accessibility", read=lambda r: r.json()["AT"], timeout=60)

    @staticmethod
    def terminal() -> _Req[str | None]:
        """-> the terminal's text, or None when no terminal is open."""
        return _Req("GET", "/terminal", read=lambda r: r.json().get("output"))

    @staticmethod
    def platform() -> _Req[str]:
        return _Req("GET", "/platform", read=lambda r: r.text)

    @staticmethod
    def cursor_position() -> _Req[tuple[int, ...]]:
        return _Req("GET", "/cursor_position", read=lambda r: tuple(r.json()))

    @staticmethod
    def window_size(app_class_name: str) -> _Req[dict[str, int] | None]:
        """-> {width, height}, or None (upstream's getter: any non-200 means no such window;
        upstream's server answers 500 when none exists)."""
        return _Req("POST", "/window_size", data={"app_class_name": app_class_name}, absent=(400, 404, 500))

    @staticmethod
    def desktop_path() -> _Req[str]:
        return _Req("POST", "/desktop_path", read=lambda r: r.json()["desktop_path"])

    @staticmethod
    def list_directory(path: str) -> _Req[dict[str, Any] | None]:
        """-> {type, name, children}, or None when `path` is no directory (upstream: 400)."""
        return _Req("POST", "/list_directory", json={"path": path}, read=lambda r: r.json()["directory_tree"],
                    absent=(400, 404))

    @staticmethod
    def wallpaper() -> _Req[bytes | None]:
        """-> the desktop wallpaper's image bytes, or None when none is set (404)."""
        return _Req("POST", "/wallpaper", read=lambda r: r.content, absent=(404,))

    @staticmethod
    def read_file(path: str) -> _Req[bytes | None]:
        """-> bytes, or None when there is no such file (form data, as upstream sends it)."""
        return _Req("POST", "/file", data={"file_path": path}, read=lambda r: r.content, absent=(404,))

    @staticmethod
    def write_file(path: str, data: bytes | str) -> _Req[None]:
        """Upload; the server creates parent folders."""
        raw = data.encode() if isinstance(data, str) else data
        return _Req("POST", "/setup/upload", data={"file_path": path},
                    files={"file_data": ("file", raw)}, read=lambda r: None)

    @staticmethod
    def launch(command: str | list[str], shell: bool = False) -> _Req[str]:
        return _Req("POST", "/setup/launch", json={"command": command, "shell": shell}, read=lambda r: r.text)

    @staticmethod
    def open_file(path: str, timeout: float = 60) -> _Req[str]:
        # `timeout_seconds` is upstream's name (its default is 1800 s), `timeout` our older one.
        return _Req("POST", "/setup/open_file", json={"path": path, "timeout": timeout, "timeout_seconds": timeout},
                    read=lambda r: r.text, timeout=timeout + 10)

    @staticmethod
    def activate_window(window_name: str, strict: bool = False, by_class: bool = False) -> _Req[str]:
        return _Req("POST", "/setup/activate_window",
                    json={"window_name": window_name, "strict": strict, "by_class": by_class}, read=lambda r: r.text)

    @staticmethod
    def close_window(window_name: str, strict: bool = False, by_class: bool = False) -> _Req[str]:
        return _Req("POST", "/setup/close_window",
                    json={"window_name": window_name, "strict": strict, "by_class": by_class}, read=lambda r: r.text)


@dataclass
class _Sleep:
    seconds: float


@dataclass
class _Call:
    """CPU work inside a plan (the async client runs it in a thread)."""
    fn: Callable
    args: tuple


Plan = Generator[Any, Any, R]


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, without decoding it."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise DesktopError("the desktop's screenshot is not a PNG")
    return struct.unpack(">II", png[16:24])


def fit_png(png: bytes, size: tuple[int, int]) -> bytes:
    """The screenshot at `size` (resized here when the server ignored the size asked for)."""
    if png_size(png) == tuple(size):
        return png
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB").resize((size[0], size[1]), Image.Resampling.BILINEAR, reducing_gap=2.0)
    buf = io.BytesIO()
    img.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def _shell_command(command: str | list[str], shell: bool, cwd: str | None, env: dict[str, str] | None,
                   stdin_path: str | None) -> str:
    """`command` as one shell line that sets cwd and env and reads stdin from a file: how the
    inspect sandbox's exec runs on a server without our /execute extensions."""
    if isinstance(command, list):
        line = " ".join(command) if shell else shlex.join(command)
    else:
        line = command if shell else shlex.join(shlex.split(command))
    pre = []
    if cwd:
        where = '"$HOME"' + shlex.quote(cwd[1:]) if cwd.startswith("~") else shlex.quote(cwd)
        pre.append(f"cd -- {where} || exit 1")
    for k, v in (env or {}).items():
        if not k.isidentifier():
            raise DesktopError(f"environment variable name {k!r} is not valid")
        pre.append(f"export {k}={shlex.quote(str(v))}")
    body = f"( {line}\n)"
    if stdin_path:
        q = shlex.quote(stdin_path)
        body = f"{body} < {q}; rc=$?; rm -f -- {q}; exit $rc"
    return "; ".join([*pre, body])


class _Plans:
    """Operations that depend on the server's extensions (`ext`)."""

    @staticmethod
    def step(ext: frozenset, code: str | None, screenshot: bool = True, pause: float = 0.0, timeout: float = 60,
             size: tuple[int, int] | None = None) -> Plan[StepResult]:
        """Run pyautogui code, then take a screenshot (at `size`) -> StepResult. Ours: one round
        trip (/step). Upstream's: /execute with upstream's action form, then /screenshot."""
        if "step" in ext:
            return (yield _Ops.step(code, screenshot=screenshot, pause=pause, timeout=timeout, size=size))
        r: dict[str, Any] = {"returncode": 0, "output": "", "error": ""}
        if code:
            r = yield _Ops.execute(["python", "-c", UPSTREAM_ACTION_PREFIX + code], timeout=timeout)
        if pause > 0:
            yield _Sleep(min(pause, 10))
        png = (yield from _Plans.screenshot(ext, size)) if screenshot else None
        return StepResult(r.get("returncode") or 0, r.get("output") or "", r.get("error") or "", png,
                          r.get("agent_fault"))

    @staticmethod
    def screenshot(ext: frozenset, size: tuple[int, int] | None = None) -> Plan[bytes]:
        """-> PNG bytes at `size` (resized by the server when it can, else here)."""
        png = yield _Ops.screenshot(size if "screenshot_size" in ext else None)
        if size is not None:
            png = yield _Call(fit_png, (png, size))
        return png

    @staticmethod
    def execute(ext: frozenset, command: str | list[str], shell: bool = False, timeout: float = 120,
                input: str | None = None, cwd: str | None = None, env: dict[str, str] | None = None,
                trusted: bool = False, max_output: int | None = None) -> Plan[dict[str, Any]]:
        """-> {status, output, error, returncode}. Without our extension, stdin goes through an
        uploaded file and cwd/env into the shell line (upstream's timeout is fixed at 120 s;
        upstream's server runs everything as its one user, `trusted` or not)."""
        if "execute_env" in ext or (input is None and cwd is None and env is None):
            return (yield _Ops.execute(command, shell=shell, timeout=timeout, input=input, cwd=cwd, env=env,
                                       trusted=trusted, max_output=max_output if "execute_env" in ext else None))
        stdin_path = None
        if input is not None:
            stdin_path = f"/tmp/.control-osworld-stdin-{uuid.uuid4().hex}"
            yield _Ops.write_file(stdin_path, input)
        line = _shell_command(command, shell, cwd, env, stdin_path)
        return (yield _Ops.execute(line, shell=True, timeout=timeout))


class _Op(Generic[P, R]):
    """A protocol operation as a method of both clients: `DesktopClient` returns R,
    `AsyncDesktopClient` an awaitable R (typed, so the checker sees every operation). Made by
    `_request` (one `_Ops` request) or `_plan` (a `_Plans` plan, which knows the server's
    extensions)."""

    def __init__(self, fn: Callable[..., Any], planned: bool) -> None:
        self.fn, self.planned = fn, planned

    @overload
    def __get__(self, client: None, owner: type) -> _Op[P, R]: ...
    @overload
    def __get__(self, client: DesktopClient, owner: type) -> Callable[P, R]: ...
    @overload
    def __get__(self, client: AsyncDesktopClient, owner: type) -> Callable[P, Awaitable[R]]: ...

    def __get__(self, client: Any, owner: type) -> Any:
        if client is None:
            return self
        fn = self.fn
        call = functools.partial(client._run, fn) if self.planned else (lambda *a, **k: client._send(fn(*a, **k)))
        return functools.wraps(fn)(call)


def _request(build: Callable[P, _Req[R]]) -> _Op[P, R]:
    return _Op(build, planned=False)


def _plan(plan: Callable[Concatenate[frozenset, P], Plan[R]]) -> _Op[P, R]:
    return _Op(plan, planned=True)


class _Operations:
    """The protocol's operations, shared by both clients; each returns what its `_Ops` /
    `_Plans` entry documents."""

    execute = _plan(_Plans.execute)
    step = _plan(_Plans.step)
    screenshot = _plan(_Plans.screenshot)
    run_python = _request(_Ops.run_python)
    healthz = _request(_Ops.healthz)
    integrity = _request(_Ops.integrity)
    screen_size = _request(_Ops.screen_size)
    accessibility_tree = _request(_Ops.accessibility_tree)
    terminal = _request(_Ops.terminal)
    platform = _request(_Ops.platform)
    cursor_position = _request(_Ops.cursor_position)
    window_size = _request(_Ops.window_size)
    desktop_path = _request(_Ops.desktop_path)
    list_directory = _request(_Ops.list_directory)
    read_file = _request(_Ops.read_file)
    wallpaper = _request(_Ops.wallpaper)
    write_file = _request(_Ops.write_file)
    launch = _request(_Ops.launch)
    open_file = _request(_Ops.open_file)
    activate_window = _request(_Ops.activate_window)
    close_window = _request(_Ops.close_window)


TOKEN_HEADER = "X-Osworld-Token"
"""The server's token (docker provider: the harness alone has it; docs/integrity.md)."""


def _transport_args(base_url: str, uds: str | None, token: str | None = None) -> dict:
    return {"base_url": base_url if not uds else "http://desktop",
            **({"headers": {TOKEN_HEADER: token}} if token else {})}


def _known(extensions: Iterable[str] | None) -> frozenset | None:
    return None if extensions is None else frozenset(extensions)


class DesktopClient(_Operations):
    """Synchronous client. `DesktopClient("http://host:5000")` or `DesktopClient(uds=path)`.
    `extensions`: what the server offers, if known (else asked on first need)."""

    def __init__(self, base_url: str = "http://desktop", uds: str | None = None, timeout: float = 60,
                 token: str | None = None, extensions: Iterable[str] | None = None):
        transport = httpx.HTTPTransport(uds=uds) if uds else None
        self._http = httpx.Client(transport=transport, timeout=timeout, **_transport_args(base_url, uds, token))
        self._ext = _known(extensions)

    @classmethod
    def for_handle(cls, handle: DesktopHandle, timeout: float = 60) -> "DesktopClient":
        return cls(handle.base_url, handle.uds, timeout, token=handle.info.get("server_token"),
                   extensions=handle.info.get("extensions"))

    def extensions(self) -> frozenset:
        if self._ext is None:
            self._ext = self._send(_Ops.healthz()) or frozenset()
        return self._ext

    def _run(self, plan: Callable[..., Plan[R]], *a: Any, **k: Any) -> R:
        return self._drive(plan(self.extensions(), *a, **k))

    def _drive(self, plan: Plan[R]) -> R:
        try:
            item = next(plan)
            while True:
                if isinstance(item, _Req):
                    item = plan.send(self._send(item))
                elif isinstance(item, _Sleep):
                    time.sleep(item.seconds)
                    item = plan.send(None)
                else:
                    item = plan.send(item.fn(*item.args))
        except StopIteration as done:
            return done.value

    def _send(self, req: _Req[R]) -> R:
        try:
            r = self._http.request(req.method, req.path, json=req.json, data=req.data, files=req.files,
                                   timeout=req.timeout or httpx.USE_CLIENT_DEFAULT)
        except httpx.TransportError as e:
            raise _unreachable(req, e) from e
        return _finish(r, req)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the server answers: /healthz (ours), or /screen_size (upstream's has no health
        endpoint)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                r = self._http.get("/healthz", timeout=2)
                if r.status_code in (404, 405):
                    r = self._http.post("/screen_size", timeout=2)
                r.raise_for_status()
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


class AsyncDesktopClient(_Operations):
    """The same operations, awaitable (used by the inspect sandbox and the agent loop)."""

    def __init__(self, base_url: str = "http://desktop", uds: str | None = None, timeout: float = 60,
                 transport: httpx.AsyncBaseTransport | None = None, token: str | None = None,
                 extensions: Iterable[str] | None = None):
        if transport is None and uds:
            transport = httpx.AsyncHTTPTransport(uds=uds)
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout, **_transport_args(base_url, uds, token))
        self._ext = _known(extensions)

    @classmethod
    def for_handle(cls, handle: DesktopHandle, timeout: float = 60,
                   transport: httpx.AsyncBaseTransport | None = None) -> "AsyncDesktopClient":
        """`transport`: the provider's own way to the server (k8s: the sandbox's exec), if any."""
        return cls(handle.base_url, handle.uds, timeout, transport, token=handle.info.get("server_token"),
                   extensions=handle.info.get("extensions"))

    async def extensions(self) -> frozenset:
        if self._ext is None:
            self._ext = await self._send(_Ops.healthz()) or frozenset()
        return self._ext

    async def _drive(self, plan: Plan[R]) -> R:
        import asyncio

        try:
            item = next(plan)
            while True:
                if isinstance(item, _Req):
                    item = plan.send(await self._send(item))
                elif isinstance(item, _Sleep):
                    await asyncio.sleep(item.seconds)
                    item = plan.send(None)
                else:
                    item = plan.send(await asyncio.to_thread(item.fn, *item.args))
        except StopIteration as done:
            return done.value

    async def _run(self, plan: Callable[..., Plan[R]], *a: Any, **k: Any) -> R:
        return await self._drive(plan(await self.extensions(), *a, **k))

    async def _send(self, req: _Req[R]) -> R:
        try:
            r = await self._http.request(req.method, req.path, json=req.json, data=req.data, files=req.files,
                                         timeout=req.timeout or httpx.USE_CLIENT_DEFAULT)
        except httpx.TransportError as e:
            raise _unreachable(req, e) from e
        return _finish(r, req)

    async def aclose(self) -> None:
        await self._http.aclose()
