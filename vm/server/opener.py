"""`/setup/open_file`: open a file in the app its type belongs to and wait until that app is ready.

Upstream (desktop_env/server/main.py, `open_file`) runs `xdg-open PATH` and then polls
`wmctrl -l` until a window title contains the file name (or the name without its extension).
We do the same, and:
- look the type and its app up first (`xdg-mime`, from the file's name as on upstream's Ubuntu;
  the associations are ~/.config/mimeapps.list), so that a type nothing opens is a clear error
  naming the type instead of a timeout;
- fail at once when xdg-open itself fails, with its exit status;
- after the window appears, wait until the window's process has gone idle (no thread running or
  runnable for about half a second; at most `settle` seconds): LibreOffice, for one, titles its window
  before its toolbars exist, and keys typed into it then are lost. Doing this here makes what
  follows an `open` step (an agent's or an oracle's first keys) deterministic under load.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

IDLE_SAMPLES = 6


class OpenError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _as_agent() -> dict:
    """The agent's environment and uid for what we start (identity.py; a no-op out of split mode):
    the app opens as the agent's, with the agent's ~/.config/mimeapps.list."""
    import identity

    return {"env": identity.agent_env(), "preexec_fn": identity.agent_preexec()}


def _query(*args: str) -> str:
    r = subprocess.run(["xdg-mime", "query", *args], capture_output=True, text=True, errors="replace", timeout=20, **_as_agent())
    return r.stdout.strip().split(";")[0].strip()


def app_for(path: Path) -> tuple[str, str]:
    """(MIME type, desktop file) xdg-open will use for `path`; OpenError when there is none."""
    if shutil.which("xdg-open") is None or shutil.which("xdg-mime") is None:
        raise OpenError(501, "this desktop cannot open files: xdg-open is not installed (Debian package xdg-utils)")
    mime = _query("filetype", str(path)) or "unknown"
    desktop = _query("default", mime) if mime != "unknown" else ""
    if not desktop:
        raise OpenError(415, f"nothing on this desktop opens {path.name}: no application for type {mime} "
                             f"(associations: ~/.config/mimeapps.list)")
    return mime, desktop


def windows() -> list[tuple[str, int, str]]:
    """(id, pid, title) of every managed window (`wmctrl -lp`; needs an EWMH window manager)."""
    out = subprocess.run(["wmctrl", "-lp"], capture_output=True, text=True, errors="replace", timeout=10).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 4:
            rows.append((parts[0], int(parts[2]) if parts[2].isdigit() else 0, parts[4] if len(parts) > 4 else ""))
    return rows


def _running(pid: int) -> bool:
    """Whether a thread of `pid` is running or waiting to run (state R or D)."""
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("R", "D"):
                    return True
    except (OSError, IndexError):
        pass
    return False


def wait_idle(pid: int, timeout: float) -> bool:
    """Wait until no thread of `pid` was running or runnable in IDLE_SAMPLES samples 0.1 s
    apart (one stray sample allowed); False on timeout. Run states, not CPU time: on a loaded
    machine a busy app gets little CPU time but stays runnable."""
    deadline = time.monotonic() + timeout
    recent: list[bool] = []
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        recent = (recent + [_running(pid)])[-IDLE_SAMPLES:]
        if len(recent) == IDLE_SAMPLES and sum(recent) <= 1:
            return True
        time.sleep(0.1)
    return False


def open_and_wait(path: Path, timeout: float = 60.0, settle: float = 20.0) -> str:
    """Open `path` like upstream; returns a message once its window is there and idle."""
    if not path.exists():
        raise OpenError(404, f"no such file: {path}")
    mime, desktop = app_for(path)
    proc = subprocess.Popen(["xdg-open", str(path)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **_as_agent())
    names = [n.lower() for n in (path.name, path.stem) if n]
    deadline = time.monotonic() + timeout
    while True:
        hit = next(((wid, pid) for wid, pid, title in windows() if any(n in title.lower() for n in names)), None)
        if hit is not None:
            break
        code = proc.poll()
        if code not in (None, 0):
            raise OpenError(500, f"xdg-open {path} failed (exit {code}) for type {mime} ({desktop})")
        if time.monotonic() > deadline:
            raise OpenError(504, f"no window titled with {path.name!r} appeared within {timeout:g} s "
                                 f"(type {mime}, opened with {desktop})")
        time.sleep(0.2)
    idle = wait_idle(hit[1], min(settle, max(0.0, deadline - time.monotonic()))) if hit[1] else True
    return f"{path} opened successfully with {desktop}" + ("" if idle else " (still busy)")
