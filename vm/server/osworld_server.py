"""The in-desktop server: OSWorld's HTTP protocol (upstream desktop_env/server/main.py), stdlib only.

Upstream clients work against it unchanged. Differences that matter:
- pyautogui actions sent as `python -c "import pyautogui; ..."` run in a long-lived executor
  (executor.py) instead of a fresh interpreter each, ~100x cheaper;
- `POST /step` (ours): run an action and return the screenshot taken right after it, in one
  round trip;
- errors are JSON `{"status": "error", "message": ...}` with a 4xx/5xx code, and the server keeps
  serving after any of them;
- nothing the agent controls makes it answer 500 (docs/integrity.md, "What the agent can
  provoke"): command output is read as bytes, bounded per stream and byte-safe (outputs.py:
  `output` as upstream's text, `output_b64` with the exact bytes when they are not UTF-8,
  `truncated`); a pyautogui executor the agent killed is restarted (bounded retries), and an
  action it could not run answers 200 with `returncode` 1 and `agent_fault`; X helpers stalled
  by the agent's grab answer 504; `GET /integrity` (ours) counts the executor's restarts and
  deaths for the sample's `integrity` record.
Listens on TCP (`tcp:HOST:PORT`) or a unix socket (`unix:PATH`, the embedded sandbox, which has
no network at all).

Trust (identity.py, docs/integrity.md): in split mode this server is the trusted side; what it
runs for the agent runs as the agent's uid, what it runs for the harness (`/execute` with
`"trusted": true`) as the checker uid, and screenshots come from Xvfb's framebuffer file.

`--upstream-only` (or OSWORLD_UPSTREAM_ONLY=1) switches every extension off and answers as
upstream's server does (404 for /step and /healthz, /screenshot ignores its size, /execute
ignores input/cwd/env/timeout, upstream's status codes for /file, /list_directory, /window_size,
/setup/open_file, GET-only /platform and /cursor_position), so tests can drive the client's
upstream path on every task. pyautogui actions still run in the long-lived executor: the
answers are upstream's, only faster.
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import email.policy
import io
import json
import os
import shlex
import signal
import socketserver
import subprocess
import sys
import threading
import time
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import identity
import outputs

HERE = Path(__file__).resolve().parent
TOKEN = os.environ.pop("OSWORLD_TOKEN", None) or None
"""When set (docker provider), every request but /healthz needs it in X-Osworld-Token: the
agent, inside the desktop, can reach the TCP port but has not the token."""
UPSTREAM_ONLY = os.environ.get("OSWORLD_UPSTREAM_ONLY", "") == "1"
EXTENSIONS = ["execute_env", "screenshot_size", "step", "integrity", "byte_safe_output"]
"""What this server adds to upstream's protocol; `GET /healthz` lists them for clients."""
DEFAULT_TIMEOUT = 120.0  # upstream's subprocess timeout
MAX_BODY = 512 * 1024 * 1024


class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


# ---------------------------------------------------------------- action executor


class AgentFault(Exception):
    """A failure the agent can cause (it killed its executor, made it hang or babble): answered
    as a failed action (200, `returncode` 1, `agent_fault`), never as a server error."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def reply(self) -> dict:
        return {"status": "success", "output": "", "error": self.message, "returncode": 1, "agent_fault": self.kind}


def _x_alive() -> bool:
    """Xvfb still accepts connections (its socket is root's, in the sticky /tmp/.X11-unix: the
    agent cannot remove it)."""
    import socket

    display = os.environ.get("DISPLAY", ":0").rpartition(":")[2].split(".")[0] or "0"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(f"/tmp/.X11-unix/X{display}")
        return True
    except OSError:
        return False
    finally:
        s.close()


def _death(code: int | None) -> str:
    if code is None:
        return "unresponsive"
    return f"killed by signal {-code}" if code < 0 else f"exited with status {code}"


class Executor:
    """One long-lived python process running pyautogui code, as the agent's uid (so the agent
    can kill it: `pkill -9 -f executor.py`). A dead one is restarted before the next action,
    up to START_ATTEMPTS times with a bounded backoff; every restart is counted (`stats`, read
    by the harness through `GET /integrity` into the sample's `integrity` record). Once it has
    started at least once, a failure to start it again while Xvfb is alive is the agent's doing
    (AgentFault: the action fails, the run goes on); before that, or with Xvfb gone, it is the
    desktop's (HTTPError 500: a sample error)."""

    START_ATTEMPTS = 5
    BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8)
    READY_TIMEOUT_S = 30.0
    START_BUDGET_S = 20.0
    MAX_REPLY = 2 * 6 * outputs.MAX_ACTION_OUTPUT + 65536  # JSON escapes take up to 6 characters
    LOG_KEEP = 50

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._ever_ready = False
        self.restarts = 0
        self.start_failures = 0
        self.gave_up = 0
        self.deaths: list[dict] = []

    def stats(self) -> dict:
        return {"executor_restarts": self.restarts, "executor_start_failures": self.start_failures,
                "executor_unavailable": self.gave_up, "executor_deaths": list(self.deaths)}

    def _note_death(self, reason: str) -> None:
        self.deaths.append({"at": round(time.time(), 3), "reason": reason})
        del self.deaths[:-self.LOG_KEEP]

    def _spawn(self, wait: float) -> subprocess.Popen | None:
        try:
            proc = self._popen()
        except OSError:  # EAGAIN at the agent's process limit, ENOMEM: a failed start
            return None
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(proc.stdout.readline(4096)), daemon=True)
        reader.start()
        reader.join(wait)
        if got and got[0].strip():
            return proc
        self._kill_proc(proc)
        return None

    @staticmethod
    def _popen() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(HERE / "executor.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            start_new_session=True,
            env=identity.agent_env(),
            preexec_fn=identity.agent_preexec(),
        )

    def _start(self, budget: float | None = None) -> subprocess.Popen:
        """A ready executor; `budget`: the most seconds all attempts may take together (so
        that an agent stopping each new executor cannot make the request outlive its timeout)."""
        deadline = time.monotonic() + (budget if budget is not None else self.READY_TIMEOUT_S * self.START_ATTEMPTS)
        last = 0
        for attempt in range(self.START_ATTEMPTS):
            left = deadline - time.monotonic()
            if left <= 0.05:
                break
            proc = self._spawn(min(self.READY_TIMEOUT_S, left))
            if proc is not None:
                if self._ever_ready:
                    self.restarts += 1
                self._ever_ready = True
                return proc
            self.start_failures += 1
            last = attempt
            time.sleep(self.BACKOFF_S[min(attempt, len(self.BACKOFF_S) - 1)])
        if not self._ever_ready or not _x_alive():
            raise HTTPError(500, "action executor failed to start (is pyautogui installed? is Xvfb running?)")
        self.gave_up += 1
        raise AgentFault("executor_unavailable",
                         f"the action executor (the agent's own process) died each of the {last + 1} times it was "
                         "restarted, so the action did not run; it is restarted again before the next action")

    @staticmethod
    def _kill_proc(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except Exception:
                pass

    def _kill(self) -> None:
        if self._proc is not None:
            self._kill_proc(self._proc)
            self._proc = None

    def _ensure(self, budget: float | None = None) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is not None:
            self._note_death(_death(self._proc.returncode))
            self._kill()
        if self._proc is None:
            self._proc = self._start(budget)
        return self._proc

    def run(self, code: str, timeout: float) -> dict:
        """-> {output, error, returncode}. Raises AgentFault (the agent's doing), HTTPError 504
        (the action timed out: the executor is replaced) or 500 (the desktop's doing)."""
        with self._lock:
            deadline = time.monotonic() + timeout
            budget = min(self.START_BUDGET_S, timeout / 2) if self._ever_ready else None
            proc = self._ensure(budget)
            try:
                proc.stdin.write(json.dumps({"code": code}) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):  # died just now: once more, fresh
                self._note_death(_death(proc.poll()))
                self._kill()
                proc = self._ensure(budget)
                try:
                    proc.stdin.write(json.dumps({"code": code}) + "\n")
                    proc.stdin.flush()
                except (BrokenPipeError, OSError, ValueError):
                    self._note_death(_death(proc.poll()))
                    self._kill()
                    raise AgentFault("executor_killed", "the action executor was killed before the action ran")
            result: list[str] = []
            reader = threading.Thread(target=lambda: result.append(proc.stdout.readline(self.MAX_REPLY)), daemon=True)
            reader.start()
            reader.join(max(1.0, deadline - time.monotonic()))
            if reader.is_alive():
                self._note_death("action timed out")
                self._kill()
                reader.join(1)
                raise HTTPError(504, f"action timed out after {timeout:g} s; executor restarted")
            line = result[0] if result else ""
            if not line.endswith("\n"):
                died = proc.poll()
                self._note_death(_death(died) if line == "" else "reply past its bound")
                self._kill()
                if line == "":
                    raise AgentFault("executor_killed", "the action executor died while running the action "
                                     f"({_death(died)}); it is restarted before the next action")
                raise AgentFault("executor_output", f"the action's output went past {self.MAX_REPLY} bytes; "
                                 "the executor was restarted")
            try:
                reply = json.loads(line)
                if not isinstance(reply, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                self._note_death("garbled reply")
                self._kill()
                raise AgentFault("executor_output", f"the action executor answered garbage ({e}); restarted")
            out, cut_out = outputs.safe_text(reply.get("output"), outputs.MAX_ACTION_OUTPUT)
            err, cut_err = outputs.safe_text(reply.get("error"), outputs.MAX_ACTION_OUTPUT)
            rc = reply.get("returncode")
            r = {"output": out, "error": err, "returncode": rc if isinstance(rc, int) else 1}
            if cut_out or cut_err:
                r["truncated"] = True
            return r

    def warm(self) -> None:
        with self._lock:
            if self._proc is None:
                self._proc = self._start()


EXECUTOR = Executor()


def _python_code(command) -> str | None:
    """The code of a `python -c CODE` pyautogui command, else None (run it as a process)."""
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError:
            return None
    if (
        isinstance(command, list)
        and len(command) == 3
        and isinstance(command[2], str)
        and os.path.basename(str(command[0])) in ("python", "python3")
        and command[1] == "-c"
        and "pyautogui" in command[2]
    ):
        return command[2]
    return None


# ---------------------------------------------------------------- screen


_screen_local = threading.local()


def _mss():
    if getattr(_screen_local, "sct", None) is None:
        import mss

        _screen_local.sct = mss.mss(with_cursor=True)
    return _screen_local.sct


def screen_size() -> tuple[int, int]:
    if identity.FRAMEBUFFER is not None:
        return identity.FRAMEBUFFER.size
    mon = _mss().monitors[1]
    return mon["width"], mon["height"]


_encoders: dict[tuple[int, int], "StripePNG"] = {}


def screenshot_png(size: tuple[int, int] | None = None) -> bytes:
    """The screen as PNG; `size` resizes it here, where it is cheapest (fewer pixels to encode
    and to send) — for models that see the screen at their own resolution. Encoded by
    StripePNG, which re-compresses only the stripes that changed since the last screenshot."""
    from PIL import Image

    from png_stripes import StripePNG

    if identity.FRAMEBUFFER is not None:
        img = identity.FRAMEBUFFER.image()
    else:
        raw = _mss().grab(_mss().monitors[1])
        img = Image.frombytes("RGB", raw.size, raw.bgra, "raw", "BGRX")
    if size and tuple(size) != img.size:
        img = img.resize(tuple(size), Image.BILINEAR, reducing_gap=2.0)
    enc = _encoders.setdefault(img.size, StripePNG())
    return enc.encode(img.tobytes(), *img.size)


# ---------------------------------------------------------------- windows


def _windows() -> list[tuple[str, str, str]]:
    """(id, wm_class, title) of every managed window, via wmctrl (needs an EWMH WM)."""
    out = subprocess.run(["wmctrl", "-lx"], capture_output=True, text=True, errors="replace", timeout=10).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 4:
            rows.append((parts[0], parts[2], parts[4] if len(parts) > 4 else ""))
    return rows


def _find_window(name: str, strict: bool, by_class: bool) -> str | None:
    for wid, wm_class, title in _windows():
        hay = wm_class if by_class else title
        if (hay == name) if strict else (name.lower() in hay.lower()):
            return wid
    return None


# ---------------------------------------------------------------- handlers


def _run_action(code: str, timeout: float) -> dict:
    """pyautogui code in the executor -> {status, output, error, returncode[, agent_fault]}."""
    try:
        return {"status": "success", **EXECUTOR.run(code, timeout)}
    except AgentFault as e:
        return e.reply()


def _run_upstream(command, shell: bool, max_output: int) -> dict:
    """/execute as upstream's server answers it: `~/` expanded in arguments, fixed 120 s
    timeout, no stdin/cwd/env, 500 with {status: error, message} on any exception (but never on
    what the command printed: outputs.py)."""
    code = _python_code(command)
    if code is not None and not shell:
        try:
            return _run_action(code, DEFAULT_TIMEOUT)
        except HTTPError as e:
            raise HTTPError(500, e.message)
    if isinstance(command, str) and not shell:
        command = shlex.split(command)
    if isinstance(command, list):
        command = [os.path.expanduser(c) if c.startswith("~/") else c for c in command]
    try:
        r = outputs.run_bounded(command, shell=shell, timeout=DEFAULT_TIMEOUT, cwd=os.environ.get("HOME"),
                                env=identity.agent_env(), preexec_fn=identity.agent_preexec(), max_bytes=max_output)
    except Exception as e:
        raise HTTPError(500, str(e))
    return outputs.result_fields(r["out"], r["err"], r["returncode"])


_trusted_running = 0
_trusted_lock = threading.Lock()


def _run_command(command, shell: bool, timeout: float, input: str | None = None,
                 cwd: str | None = None, env: dict | None = None, trusted: bool = False,
                 max_output: int = outputs.MAX_OUTPUT) -> dict:
    if UPSTREAM_ONLY:  # upstream has no trusted runs either: everything as the agent's user
        return _run_upstream(command, shell, max_output)
    code = _python_code(command)
    if code is not None and not shell and input is None and env is None and not trusted:
        return _run_action(code, timeout)
    if shell and isinstance(command, list):
        command = " ".join(command)
    if not shell and isinstance(command, str):
        command = shlex.split(command)
    if trusted:  # the harness's own command: the checker uid, a fixed environment
        argv = identity.checker_argv(["/bin/sh", "-c", command] if shell else command)
        kw = {"env": {**identity.checker_env(), **(env or {})}, "preexec_fn": None}
        shell = False
    else:  # the agent's (or a setup step's) command: the agent's uid
        argv = command
        kw = {"env": identity.agent_env(env), "preexec_fn": identity.agent_preexec()}
    global _trusted_running
    if trusted:
        with _trusted_lock:
            _trusted_running += 1
    try:
        r = outputs.run_bounded(argv, shell=shell, timeout=timeout, input=input,
                                cwd=os.path.expanduser(cwd) if cwd else os.environ.get("HOME"),
                                max_bytes=max_output, **kw)
    except subprocess.TimeoutExpired:
        raise HTTPError(504, f"command timed out after {timeout:g} s")
    except FileNotFoundError as e:
        raise HTTPError(400, f"command or cwd not found: {e.filename}")
    except NotADirectoryError as e:
        raise HTTPError(400, f"cwd is not a directory: {e.filename}")
    except PermissionError as e:
        raise HTTPError(400, f"command or cwd not permitted: {e.filename}")
    except OSError as e:  # EAGAIN / ENOMEM: no process could be started (a fork bomb, memory)
        if trusted:  # the harness's command did not run: its verdict cannot be read from this
            raise HTTPError(503, f"the harness's command could not be started: {e}")
        return {"status": "success", "output": "", "error": f"the command could not be started: {e}",
                "returncode": 126, "agent_fault": "cannot_start"}
    finally:
        if trusted:
            with _trusted_lock:
                _trusted_running -= 1
                if _trusted_running == 0:
                    identity.kill_checker_leftovers()
    # Upstream answers "success" whatever the return code; callers read returncode.
    return outputs.result_fields(r["out"], r["err"], r["returncode"])


def _field(body: dict, name: str, kind=None, default=...):
    if name not in body:
        if default is ...:
            raise HTTPError(400, f"missing field {name!r}")
        return default
    value = body[name]
    if kind is not None and not isinstance(value, kind):
        raise HTTPError(400, f"field {name!r} must be {getattr(kind, '__name__', kind)}")
    return value


def _size(v) -> tuple[int, int] | None:
    if v is None:
        return None
    if not (isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) and 0 < x <= 10000 for x in v)):
        raise HTTPError(400, "size must be [width, height] in pixels")
    return int(v[0]), int(v[1])


def _truthy(v) -> bool:
    return v is True or (isinstance(v, str) and v.lower() in ("true", "1", "yes"))


def _dir_tree(path: Path, depth: int = 0) -> dict:
    node = {"type": "directory" if path.is_dir() else "file", "name": path.name}
    if path.is_dir() and depth < 20:
        try:
            node["children"] = [_dir_tree(p, depth + 1) for p in sorted(path.iterdir())]
        except PermissionError:
            node["children"] = []
    return node


class Handler(BaseHTTPRequestHandler):
    server_version = "control-osworld/0.1"
    protocol_version = "HTTP/1.1"

    # ---- plumbing
    def log_message(self, fmt, *args):  # noqa: D401  (quiet; unix peers have no address)
        if os.environ.get("OSWORLD_SERVER_LOG"):
            sys.stderr.write("%s\n" % (fmt % args))

    def _send(self, status: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj, status: int = 200, ascii: bool = True) -> None:
        """`ascii=False` for command replies (their text has no lone surrogates: outputs.py), so
        that U+FFFD takes 3 bytes, not the 6 of its escape."""
        self._send(status, json.dumps(obj, ensure_ascii=ascii).encode("utf-8"), "application/json")

    def _body(self) -> bytes:
        if getattr(self, "_raw", None) is not None:
            return self._raw
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True  # the unread body would be taken for the next request
            raise HTTPError(413, "request body too large")
        self._raw = self.rfile.read(n) if n else b""
        return self._raw

    def _json_body(self) -> dict:
        raw = self._body()
        ctype = self.headers.get("Content-Type", "")
        if not raw:
            return {}
        if "application/x-www-form-urlencoded" in ctype:
            return {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        if "multipart/form-data" in ctype:
            return self._multipart(raw, ctype)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise HTTPError(400, f"malformed JSON body: {e}")
        if not isinstance(body, dict):
            raise HTTPError(400, "JSON body must be an object")
        return body

    @staticmethod
    def _multipart(raw: bytes, ctype: str) -> dict:
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw
        )
        if not msg.is_multipart():
            raise HTTPError(400, "malformed multipart body")
        fields: dict = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if name is None:
                continue
            data = part.get_payload(decode=True) or b""
            fields[name] = data if part.get_filename() is not None else data.decode("utf-8", "replace")
        return fields

    def _dispatch(self, method: str) -> None:
        path = urlparse(self.path).path.rstrip("/") or "/"
        route = ROUTES.get((method, path))
        self._raw = None
        try:
            if TOKEN and path != "/healthz" and self.headers.get("X-Osworld-Token") != TOKEN:
                self.close_connection = True
                raise HTTPError(401, "this server needs the harness's token")
            if route is None:
                self._body()  # keep-alive: the next request starts after this one's body
                known = any(p == path for (_, p) in ROUTES)
                raise HTTPError(405 if known else 404, f"{'method not allowed' if known else 'unknown endpoint'}: {method} {path}")
            route(self)
        except HTTPError as e:
            self._json({"status": "error", "message": e.message}, e.status)
        except AgentFault as e:
            self._json(e.reply())
        except subprocess.TimeoutExpired as e:  # an X helper (wmctrl, xdotool) stalled: the agent can grab X
            self._json({"status": "error", "message": f"timed out: {e}"}, 504)
        except Exception as e:  # the server outlives every handler failure
            self._json({"status": "error", "message": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=3)}, 500)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    # ---- endpoints
    def execute(self):
        body = self._json_body()
        command = _field(body, "command")
        if not isinstance(command, (str, list)) or (isinstance(command, list) and not all(isinstance(c, str) for c in command)):
            raise HTTPError(400, "field 'command' must be a string or a list of strings")
        timeout = float(body.get("timeout", DEFAULT_TIMEOUT))
        max_output = _field(body, "max_output", (int, type(None)), None)
        if max_output is not None and max_output <= 0:
            raise HTTPError(400, "field 'max_output' must be a positive number of bytes")
        # input/cwd/env/max_output are ours (the inspect sandbox's exec needs them); upstream never sends them.
        self._json(_run_command(command, _truthy(body.get("shell", False)), timeout,
                                _field(body, "input", (str, type(None)), None),
                                _field(body, "cwd", (str, type(None)), None),
                                _field(body, "env", (dict, type(None)), None),
                                trusted=_truthy(body.get("trusted", False)),
                                max_output=min(max_output or outputs.MAX_OUTPUT, outputs.MAX_OUTPUT)), ascii=False)

    def step(self):
        body = self._json_body()
        code = _field(body, "code", (str, type(None)), None)
        timeout = float(body.get("timeout", 60))
        result = {"status": "success", "output": "", "error": "", "returncode": 0}
        if code:
            result.update(_run_action(code, timeout))
        pause = float(body.get("pause", 0))
        if pause > 0:
            time.sleep(min(pause, 10))
        if body.get("screenshot", True):
            result["screenshot"] = base64.b64encode(screenshot_png(size=_size(body.get("size")))).decode()
        self._json(result)

    def screenshot(self):
        q = {} if UPSTREAM_ONLY else parse_qs(urlparse(self.path).query)
        size = _size([int(q["width"][0]), int(q["height"][0])]) if "width" in q and "height" in q else None
        self._send(200, screenshot_png(size=size), "image/png")

    def screen_size(self):
        self._body()
        w, h = screen_size()
        self._json({"width": w, "height": h})

    def window_size(self):
        body = self._json_body()
        if UPSTREAM_ONLY and "application/x-www-form-urlencoded" not in self.headers.get("Content-Type", ""):
            raise HTTPError(400, "app_class_name is required")  # upstream reads form data only
        name = _field(body, "app_class_name", str)
        wid = _find_window(name, strict=False, by_class=True)
        if wid is None:
            # upstream's view returns None, which Flask turns into a 500
            raise HTTPError(500 if UPSTREAM_ONLY else 404, f"no window of class {name!r}")
        out = subprocess.run(["xwininfo", "-id", wid], capture_output=True, text=True, errors="replace", timeout=10).stdout
        vals = {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in out.splitlines())}
        self._json({"width": int(vals.get("Width", 0)), "height": int(vals.get("Height", 0))})

    def accessibility(self):
        if identity.SPLIT:  # the bus is the agent's session's: ask it as the agent
            self._json({"AT": _as_agent_python("import accessibility, sys; sys.stdout.write(accessibility.tree_xml())")})
            return
        import accessibility

        self._json({"AT": accessibility.tree_xml()})

    def terminal(self):
        if identity.SPLIT:
            try:
                out = _as_agent_python("import accessibility, sys; t = accessibility.terminal_text(); "
                                       "sys.stdout.write(t if t is not None else '\\0')")
                out = None if out == "\0" else out
            except Exception:
                out = None
            self._json({"output": out, "status": "success"})
            return
        import accessibility

        try:
            out = accessibility.terminal_text()
        except Exception:
            out = None
        self._json({"output": out, "status": "success"})

    def platform(self):
        self._body()
        self._send(200, b"Linux", "text/plain")

    def cursor_position(self):
        self._body()
        out = subprocess.run(["xdotool", "getmouselocation", "--shell"], capture_output=True, text=True, errors="replace", timeout=10).stdout
        vals = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
        self._json([int(vals.get("X", 0)), int(vals.get("Y", 0))])

    def desktop_path(self):
        self._body()
        if UPSTREAM_ONLY and not (Path.home() / "Desktop").is_dir():
            raise HTTPError(404, "Unsupported operating system or desktop path not found")
        self._json({"desktop_path": str(Path.home() / "Desktop")})

    def wallpaper(self):
        self._body()
        p = Path.home() / ".config" / "wallpaper"
        if not p.is_file():
            raise HTTPError(404, "no wallpaper is set on this desktop")
        self._send(200, p.read_bytes(), "application/octet-stream")

    def list_directory(self):
        body = self._json_body()
        if UPSTREAM_ONLY:  # no ~ expansion; anything but a directory is a 400
            p = Path(_field(body, "path", str))
            if not p.is_dir():
                raise HTTPError(400, "The provided path is not a directory")
            self._json({"directory_tree": _dir_tree(p)})
            return
        p = Path(os.path.expanduser(_field(body, "path", str)))
        if not p.exists():
            raise HTTPError(404, f"no such directory: {p}")
        self._json({"directory_tree": _dir_tree(p)})

    def file(self):
        body = self._json_body()
        p = Path(os.path.expanduser(_field(body, "file_path", str)))
        try:
            data = identity.read_trusted(str(p))
        except FileNotFoundError:
            raise HTTPError(404, "File not found" if UPSTREAM_ONLY else f"no such file: {p}")
        except ValueError as e:
            raise HTTPError(413, str(e))
        self._send(200, data, "application/octet-stream")

    def upload(self):
        body = self._json_body()
        path = _field(body, "file_path", str)
        data = _field(body, "file_data")
        if isinstance(data, str):
            data = data.encode()
        p = Path(os.path.expanduser(path))
        if identity.SPLIT:  # written by the agent's uid: its file, through its permissions
            try:
                r = subprocess.run(["/bin/sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', "upload",
                                    str(p)], input=data, capture_output=True, timeout=120, env=identity.agent_env(),
                                   preexec_fn=identity.agent_preexec(), cwd=os.environ.get("HOME"))
            except OSError as e:  # the agent's process limit reached, no memory: its own doing
                raise HTTPError(400, f"cannot write {p}: no process could be started ({e})")
            if r.returncode != 0:
                raise HTTPError(400, f"cannot write {p}: {r.stderr.decode(errors='replace').strip()}")
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        self._send(200, b"File uploaded", "text/plain")

    def launch(self):
        body = self._json_body()
        command = _field(body, "command")
        shell = _truthy(body.get("shell", False))
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        try:
            subprocess.Popen(command, shell=shell, cwd=os.environ.get("HOME"), start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=identity.agent_env(), preexec_fn=identity.agent_preexec())
        except FileNotFoundError as e:
            raise HTTPError(400, f"command not found: {e.filename}")
        self._send(200, f"{command} launched successfully".encode(), "text/plain")

    def open_file(self):
        from opener import OpenError, open_and_wait

        body = self._json_body()
        p = Path(os.path.expandvars(os.path.expanduser(_field(body, "path", str))))
        if UPSTREAM_ONLY:
            self._open_upstream(body, p)
            return
        try:
            msg = open_and_wait(p, float(body.get("timeout_seconds", body.get("timeout", 60))))
        except OpenError as e:
            raise HTTPError(e.status, str(e))
        self._send(200, msg.encode(), "text/plain")

    def _open_upstream(self, body: dict, p: Path) -> None:
        """Upstream's open_file: xdg-open an existing file, else launch a command of that name;
        then poll `wmctrl -l` for a title containing the name (or `window_name`)."""
        import shutil

        raw = body["path"]
        if p.exists():
            cmd, names = ["xdg-open", str(p)], [p.name, p.stem]
        elif shutil.which(raw):
            cmd, names = [raw], [raw]
        else:
            raise HTTPError(404, f"Application/file not found: {raw}")
        if body.get("window_name"):
            names = [body["window_name"]]
        try:
            subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=identity.agent_env(), preexec_fn=identity.agent_preexec())
        except OSError as e:
            raise HTTPError(500, f"Failed to open {raw}. Error: {e}")
        timeout = float(body.get("timeout_seconds", 1800))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["wmctrl", "-l"], capture_output=True, text=True, errors="replace", timeout=10).stdout
            for line in out.splitlines():
                if any(n and n in line for n in names):
                    subprocess.run(["wmctrl", "-i", "-a", line.split()[0]], timeout=10, check=False)
                    self._send(200, b"File opened and window activated successfully", "text/plain")
                    return
            time.sleep(0.2)
        raise HTTPError(500, f"Failed to find window for {names} within {timeout:g} seconds.")

    def _window_op(self, flag: str):
        body = self._json_body()
        name = _field(body, "window_name", str)
        wid = _find_window(name, _truthy(body.get("strict", False)), _truthy(body.get("by_class", False)))
        if wid is None:
            raise HTTPError(404, f"no window matching {name!r}")
        subprocess.run(["wmctrl", "-i", flag, wid], timeout=10, check=False)
        self._send(200, b"Window handled successfully", "text/plain")

    def activate_window(self):
        self._window_op("-a")

    def close_window(self):
        self._window_op("-c")

    _recording: subprocess.Popen | None = None
    _recording_path = "/tmp/recording.mp4"

    def start_recording(self):
        self._body()
        if Handler._recording is not None and Handler._recording.poll() is None:
            raise HTTPError(400, "recording already in progress")
        if not any((Path(d) / "ffmpeg").exists() for d in os.environ.get("PATH", "").split(":")):
            raise HTTPError(501, "recording needs ffmpeg, which this desktop does not have")
        w, h = screen_size()
        Handler._recording = subprocess.Popen(
            ["ffmpeg", "-y", "-f", "x11grab", "-video_size", f"{w}x{h}", "-i", os.environ.get("DISPLAY", ":0"),
             "-c:v", "libx264", "-preset", "ultrafast", Handler._recording_path],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._send(200, b"Started recording.", "text/plain")

    def end_recording(self):
        self._body()
        rec = Handler._recording
        if rec is None:
            raise HTTPError(400, "no recording in progress")
        rec.communicate(b"q", timeout=30)
        Handler._recording = None
        self._send(200, Path(Handler._recording_path).read_bytes(), "video/mp4")

    def healthz(self):
        self._json({"status": "ok", "extensions": EXTENSIONS})

    def integrity(self):
        """What the server saw of the agent's faults (ours): executor restarts and deaths."""
        self._json({"status": "ok", **EXECUTOR.stats()})


ROUTES = {
    ("POST", "/execute"): Handler.execute,
    ("POST", "/setup/execute"): Handler.execute,
    ("POST", "/step"): Handler.step,
    ("GET", "/screenshot"): Handler.screenshot,
    ("POST", "/screen_size"): Handler.screen_size,
    ("POST", "/window_size"): Handler.window_size,
    ("GET", "/accessibility"): Handler.accessibility,
    ("GET", "/terminal"): Handler.terminal,
    ("POST", "/platform"): Handler.platform,
    ("GET", "/platform"): Handler.platform,
    ("POST", "/cursor_position"): Handler.cursor_position,
    ("GET", "/cursor_position"): Handler.cursor_position,
    ("POST", "/desktop_path"): Handler.desktop_path,
    ("POST", "/wallpaper"): Handler.wallpaper,
    ("POST", "/list_directory"): Handler.list_directory,
    ("POST", "/file"): Handler.file,
    ("POST", "/setup/upload"): Handler.upload,
    ("POST", "/setup/launch"): Handler.launch,
    ("POST", "/setup/open_file"): Handler.open_file,
    ("POST", "/setup/activate_window"): Handler.activate_window,
    ("POST", "/setup/close_window"): Handler.close_window,
    ("POST", "/start_recording"): Handler.start_recording,
    ("POST", "/end_recording"): Handler.end_recording,
    ("GET", "/healthz"): Handler.healthz,
    ("GET", "/integrity"): Handler.integrity,
}


UPSTREAM_ABSENT = {("POST", "/step"), ("GET", "/healthz"), ("GET", "/integrity"), ("POST", "/platform"), ("POST", "/cursor_position")}
"""Routes upstream's server does not have (it serves /platform and /cursor_position by GET only)."""


def upstream_only() -> None:
    """Switch every extension off (see the module's doc)."""
    global UPSTREAM_ONLY
    UPSTREAM_ONLY = True
    for route in UPSTREAM_ABSENT:
        ROUTES.pop(route, None)


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)  # BaseHTTPRequestHandler expects a (host, port) pair


class TCPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def _as_agent_python(code: str, timeout: float = 60) -> str:
    """Run `code` in a fresh python as the agent's uid; its stdout."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, errors="replace", timeout=timeout,
                       cwd=str(HERE), env=identity.agent_env({"PYTHONPATH": str(HERE)}),
                       preexec_fn=identity.agent_preexec())
    if r.returncode != 0:
        raise HTTPError(500, f"accessibility query failed: {r.stderr.strip()[-500:]}")
    return r.stdout


def _ignore(fn) -> None:
    try:
        fn()
    except Exception:
        pass


def serve(listen: str) -> None:
    kind, _, where = listen.partition(":")
    if kind == "unix":
        if os.path.exists(where):
            os.unlink(where)
        server = UnixHTTPServer(where, Handler)
        # The host side connects as another uid (split mode: host root, so 0600 suffices and
        # the socket's folder is 0700 to us anyway).
        os.chmod(where, 0o600 if identity.SPLIT else 0o777)
    elif kind == "tcp":
        host, _, port = where.rpartition(":")
        server = TCPServer((host or "0.0.0.0", int(port)), Handler)
    else:
        raise SystemExit(f"--listen must be unix:PATH or tcp:HOST:PORT, not {listen!r}")
    # Warm the executor off the request path; a failure shows up on the first action instead.
    threading.Thread(target=lambda: _ignore(EXECUTOR.warm), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", default=os.environ.get("OSWORLD_LISTEN", "tcp:0.0.0.0:5000"))
    ap.add_argument("--upstream-only", action="store_true", default=UPSTREAM_ONLY,
                    help="answer exactly as upstream's server: every extension off")
    args = ap.parse_args()
    if args.upstream_only:
        upstream_only()
    serve(args.listen)
