"""Commands run with bounded, byte-safe output (docs/integrity.md, "What the agent can provoke").

What a command prints is the agent's to choose: any bytes (`printf '\\377'`), any amount (`yes`).
The server must neither fail on it (a 500 `UnicodeDecodeError` would turn the agent's own output
into a harness error) nor hold it all in memory. So each stream is read as bytes, at most
`max_bytes` of it kept (the rest read and dropped, so the command is never blocked on a full
pipe), and answered in upstream's JSON shape:

- `output` / `error`: the stream as text, UTF-8 with undecodable bytes replaced by U+FFFD (what
  upstream's clients read; identical to upstream's answer whenever the bytes are valid UTF-8);
- `output_b64` / `error_b64` (ours): the exact bytes, base64, only when they are not valid UTF-8,
  so any bytes round-trip;
- `output_truncated` / `error_truncated` and `truncated` (ours): true when a stream went past
  `max_bytes`; `output_bytes` / `error_bytes`: how many bytes the stream had in all.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import threading
import time

MAX_OUTPUT = int(os.environ.get("OSWORLD_MAX_OUTPUT", str(64 * 1024 * 1024)))
"""Bytes kept per stream by default (a request may ask for less with `max_output`): above what
the checker's collections print (evaluators/collect.py: 16 MiB read, base64, plus listings)."""
MAX_ACTION_OUTPUT = 4 * 1024 * 1024
"""Bytes kept per stream of a pyautogui action (the executor is the agent's process)."""
_CHUNK = 1 << 16


class Bounded:
    """One stream's kept bytes and total length."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.total = 0

    def feed(self, b: bytes) -> None:
        self.total += len(b)
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += b[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.kept)


def _pump(stream, sink: Bounded) -> None:
    try:
        while True:
            b = stream.read1(_CHUNK) if hasattr(stream, "read1") else stream.read(_CHUNK)
            if not b:
                break
            sink.feed(b)
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _feed_stdin(stream, data: bytes | None) -> None:
    try:
        if data:
            stream.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass  # the command did not read all of it: its business
    finally:
        try:
            stream.close()
        except OSError:
            pass


def run_bounded(argv, *, shell: bool, timeout: float, input: str | bytes | None = None, cwd: str | None = None,
                env: dict | None = None, preexec_fn=None, max_bytes: int = MAX_OUTPUT) -> dict:
    """Run `argv` (its own session), at most `timeout` seconds -> {returncode, out: Bounded,
    err: Bounded}. Raises subprocess.TimeoutExpired (the process group killed) and what Popen
    raises (FileNotFoundError, NotADirectoryError, PermissionError)."""
    data = input.encode("utf-8", "surrogateescape") if isinstance(input, str) else input
    p = subprocess.Popen(argv, shell=shell, stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, preexec_fn=preexec_fn,
                         start_new_session=True)
    out, err = Bounded(max_bytes), Bounded(max_bytes)
    threads = [threading.Thread(target=_pump, args=(p.stdout, out), daemon=True),
               threading.Thread(target=_pump, args=(p.stderr, err), daemon=True)]
    if data:
        threads.append(threading.Thread(target=_feed_stdin, args=(p.stdin, data), daemon=True))
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    try:
        p.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_group(p)
        raise
    # The command exited; what it left running in its session may still hold the pipes open
    # (`sleep 100 &`): read what is there for a moment, then stop waiting for it.
    for t in threads[:2]:
        t.join(max(0.0, min(2.0, deadline - time.monotonic())))
    return {"returncode": p.returncode, "out": out, "err": err}


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            p.kill()
        except OSError:
            pass
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        pass


def stream_fields(name: str, data: bytes | bytearray, truncated: bool = False, total: int | None = None) -> dict:
    """`name` (output/error) as upstream's text field plus our byte-safe ones (see the module's doc)."""
    raw = bytes(data)
    try:
        text, exact = raw.decode("utf-8"), True
    except UnicodeDecodeError:
        text, exact = raw.decode("utf-8", "replace"), False
    fields: dict = {name: text}
    if not exact:
        fields[f"{name}_b64"] = base64.b64encode(raw).decode("ascii")
    if truncated:
        fields[f"{name}_truncated"] = True
        fields[f"{name}_bytes"] = total if total is not None else len(raw)
    return fields


def result_fields(out: Bounded, err: Bounded, returncode: int) -> dict:
    """The JSON reply of a command run by `run_bounded` (upstream's shape, plus ours)."""
    r = {"status": "success", **stream_fields("output", out.kept, out.truncated, out.total),
         **stream_fields("error", err.kept, err.truncated, err.total), "returncode": returncode}
    if out.truncated or err.truncated:
        r["truncated"] = True
    return r


def safe_text(value, cap: int = MAX_OUTPUT) -> tuple[str, bool]:
    """A string from an untrusted process (the agent's pyautogui executor) made safe to answer:
    lone surrogates replaced, at most `cap` bytes -> (text, truncated)."""
    if not isinstance(value, str):
        value = "" if value is None else str(value)
    raw = value.encode("utf-8", "replace")
    cut = len(raw) > cap
    return raw[:cap].decode("utf-8", "replace"), cut
