"""Who runs what inside the desktop (docs/integrity.md).

In split mode (the server started as uid 0 with OSWORLD_AGENT_UID set: the local provider as
root, the Docker image) the server is the trusted side and starts:
- the agent's processes (pyautogui executor, commands and apps run for the agent, setup
  steps, uploads) as the agent's uid: no capabilities, no_new_privs, RLIMIT_NPROC, a high OOM
  score, the agent's own X cookie;
- the harness's own commands (side-task checker, evaluator getters: `/execute` with
  `"trusted": true`) as the checker uid with CAP_DAC_READ_SEARCH only (it reads what the agent
  hides, writes nothing of the agent's); what such a command leaves running is killed after it.
Out of split mode every function here runs things as the server itself runs (one uid).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import stat
import struct
import threading
from pathlib import Path

AGENT_UID = int(os.environ["OSWORLD_AGENT_UID"]) if os.environ.get("OSWORLD_AGENT_UID") else None
CHECKER_UID = int(os.environ.get("OSWORLD_CHECKER_UID", "999"))
SPLIT = AGENT_UID is not None and os.geteuid() == 0
AGENT_NPROC = int(os.environ.get("OSWORLD_AGENT_NPROC", "2048"))
FBDIR = os.environ.get("OSWORLD_FBDIR") if SPLIT else None
MAX_READ = 512 * 1024 * 1024
"""Largest file the trusted side reads for the harness."""
_PR_SET_NO_NEW_PRIVS = 38

_TRUSTED_ONLY = ("OSWORLD_", "XAUTHORITY")


def agent_env(extra: dict | None = None) -> dict | None:
    """The environment of the agent's processes (None out of split mode: inherit ours)."""
    if not SPLIT:
        return {**os.environ, **extra} if extra else None
    env = {k: v for k, v in os.environ.items() if not k.startswith(_TRUSTED_ONLY)}
    env["XAUTHORITY"] = os.environ.get("OSWORLD_AGENT_XAUTHORITY", str(Path.home() / ".Xauthority"))
    env.pop("PYTHONNOUSERSITE", None)
    return {**env, **(extra or {})}


def _become_agent() -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    resource.setrlimit(resource.RLIMIT_NPROC, (AGENT_NPROC, AGENT_NPROC))
    os.setgroups([])
    os.setresgid(AGENT_UID, AGENT_UID, AGENT_UID)
    os.setresuid(AGENT_UID, AGENT_UID, AGENT_UID)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def agent_preexec():
    """preexec_fn for a process of the agent (None out of split mode)."""
    return _become_agent if SPLIT else None


def checker_argv(command: list[str]) -> list[str]:
    """`command` as the checker uid (split mode), with CAP_DAC_READ_SEARCH only."""
    if not SPLIT:
        return command
    u = str(CHECKER_UID)
    return ["setpriv", f"--reuid={u}", f"--regid={u}", "--clear-groups",
            "--inh-caps=-all,+dac_read_search", "--ambient-caps=-all,+dac_read_search",
            "--bounding-set=-all,+dac_read_search", "--no-new-privs", "--", *command]


def checker_env() -> dict:
    """A fixed environment for the harness's commands: nothing the agent set (no user site,
    no BASH_ENV/ENV), HOME still /home/user so `~` in a task's command means the agent's home."""
    keep = ("PATH", "HOME", "LANG", "DISPLAY", "SCREEN_WIDTH", "SCREEN_HEIGHT", "USER", "LOGNAME", "SHELL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONNOUSERSITE"] = "1"
    if SPLIT:
        env["USER"] = env["LOGNAME"] = "checker"
        # X access for commands such as xdotool: the agent's cookie (the agent has it anyway)
        env["XAUTHORITY"] = os.environ.get("OSWORLD_AGENT_XAUTHORITY", env.get("HOME", "/") + "/.Xauthority")
    return env


_reap_lock = threading.Lock()


def kill_checker_leftovers() -> None:
    """Kill every process of the checker uid: what a harness command left behind (or what the
    agent's code, run by such a command, tried to keep alive) never outlives it."""
    if not SPLIT:
        return
    with _reap_lock:
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    if os.stat(f"/proc/{p}").st_uid == CHECKER_UID:
                        os.kill(int(p), 9)
                except OSError:
                    pass


def read_trusted(path: str) -> bytes:
    """A file's bytes for the harness: follows symlinks only to a regular file (never a
    FIFO, device or socket the agent planted to hang or flood the reader), at most MAX_READ."""
    real = os.path.realpath(os.path.expanduser(path))
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise FileNotFoundError(f"{path}: {e.strerror}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileNotFoundError(f"{path}: not a regular file")
        if st.st_size > MAX_READ:
            raise ValueError(f"{path}: larger than {MAX_READ} bytes")
        chunks, left = [], MAX_READ + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > MAX_READ:
            raise ValueError(f"{path}: larger than {MAX_READ} bytes")
        return data
    finally:
        os.close(fd)


class Framebuffer:
    """Xvfb's screen as its `-fbdir` file (XWD) in the trusted folder, memory-mapped: no X
    request, so nothing the agent does to the X server (a grab, a hung client) blocks or
    alters a screenshot."""

    def __init__(self, path: str):
        self.path = path
        self._map = None
        self._geom = None

    def _open(self):
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            self._map = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        (header_size, _version, _fmt, depth, width, height, _xoff, byte_order, _unit, _bit_order, _pad,
         bpp, bytes_per_line, _vclass, _r, _g, _b, _bits_rgb, _cmap_entries, ncolors) = struct.unpack(
            ">20I", self._map[:80])
        if bpp != 32:
            raise RuntimeError(f"framebuffer has {bpp} bits per pixel, expected 32")
        offset = header_size + ncolors * 12
        self._geom = (width, height, bytes_per_line, offset, "BGRX" if byte_order == 0 else "XRGB")

    def image(self):
        from PIL import Image

        if self._map is None:
            self._open()
        w, h, stride, off, raw = self._geom
        return Image.frombuffer("RGB", (w, h), self._map[off:off + stride * h], "raw", raw, stride, 1)

    @property
    def size(self) -> tuple[int, int]:
        if self._map is None:
            self._open()
        return self._geom[0], self._geom[1]


FRAMEBUFFER = Framebuffer(os.path.join(FBDIR, "Xvfb_screen0")) if FBDIR else None
