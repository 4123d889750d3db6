"""Live view: a desktop's screen in the browser (noVNC), watched from the trusted side.

Two host processes, both outside the desktop's namespaces (docs/integrity.md, "Live view"):

- `x11vnc -rawfb map:FILE@WxHx32:R/G/B+OFFSET`: reads Xvfb's `-fbdir` framebuffer file, the
  same file the server's screenshots read, memory-mapped through `/proc/<pid>/root` of the
  desktop's pid 1. No X connection at all, so no X client, no grab, nothing the agent can list
  or notice. It listens on a unix socket in a 0700 folder of the host, no TCP port; a link to it
  named by the view's random token is what websockify looks up (the token is in no argv). View-only (`-viewonly`; a raw framebuffer has no input path anyway).
- `websockify` (Debian's, with its `UnixDomainSocketDirectory` token plugin): serves noVNC's
  page on 127.0.0.1:PORT of the host and forwards a websocket to the socket whose name is the
  URL's token; a missing or wrong token finds no socket and the connection is refused.

With `control=True` (take-over) x11vnc runs without `-viewonly` and hands every input event to
its `-pipeinput` program, ours (desktop/inputpipe.py, host side): it records the event in the
view's folder (`events.jsonl`, what the harness turns into actions) and injects it through
XTEST over the desktop's X socket (`/proc/<pid>/root/tmp/.X11-unix/X0`, the trusted side's
cookie). That one X connection is the only thing a controlled view adds inside the desktop.

The desktop's processes cannot reach either: the local sandbox has its own network, mount and
pid namespaces (the host's loopback and /tmp are not theirs), a Docker desktop its own network
namespace. Where they can reach the port (`network="host"`), they still need the token.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from control_osworld.desktop.client import DesktopError
from control_osworld.desktop.provider import DesktopHandle
from control_osworld.resources import source_root

NOVNC_DIR = Path(os.environ.get("CONTROL_OSWORLD_NOVNC", "/usr/share/novnc"))
VIEW_BASE = Path(tempfile.gettempdir()) / "control-osworld-views"
FB_INSIDE = "run/trusted/Xvfb_screen0"
"""Xvfb's framebuffer file inside the desktop (vm/desktop-init.sh, split mode)."""
X_SOCKET_INSIDE = "tmp/.X11-unix/X0"
XAUTH_INSIDE = "run/trusted/Xauthority"
"""The trusted side's copy of the X cookie (vm/desktop-init.sh, split mode); the agent's is in its home."""


@dataclass(frozen=True)
class XwdGeometry:
    width: int
    height: int
    bpp: int
    offset: int
    bytes_per_line: int
    masks: tuple[int, int, int]

    def rawfb(self, path: Path) -> str:
        """x11vnc's `-rawfb` string for this file."""
        r, g, b = self.masks
        bpl = "" if self.bytes_per_line == self.width * self.bpp // 8 else f"-{self.bytes_per_line}"
        return f"map:{path}@{self.width}x{self.height}x{self.bpp}:{r:x}/{g:x}/{b:x}+{self.offset}{bpl}"


def xwd_geometry(path: Path) -> XwdGeometry:
    """The geometry in an XWD file's header (what Xvfb -fbdir writes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise DesktopError(f"live view: cannot read the desktop's framebuffer file {path}: {e}") from None
    if len(head) < 100:
        raise DesktopError(f"live view: {path} is not an XWD framebuffer file (short header)")
    (header_size, version, _fmt, _depth, width, height, _xoff, _byte_order, _unit, _bit_order, _pad,
     bpp, bytes_per_line, _vclass, r, g, b, _bits_rgb, _cmap_entries, ncolors) = struct.unpack(">20I", head[:80])
    if version != 7 or bpp not in (16, 24, 32) or not (0 < width <= 16384 and 0 < height <= 16384):
        raise DesktopError(f"live view: {path} is not an XWD framebuffer file (version {version}, {bpp} bpp)")
    return XwdGeometry(width, height, bpp, header_size + ncolors * 12, bytes_per_line, (r, g, b))


def framebuffer_file(handle: DesktopHandle) -> Path:
    """Where the host reads the desktop's framebuffer file: through /proc/<pid>/root of the
    desktop's pid 1 (needs root: the file is the trusted side's, in its 0700 folder)."""
    return desktop_root(handle) / FB_INSIDE


def desktop_root(handle: DesktopHandle) -> Path:
    """The desktop's file system as the host's root sees it: /proc/<its pid 1>/root."""
    if handle.provider == "local":
        if handle.info.get("evidence_trust") == "untrusted-unprivileged-local":
            raise DesktopError("live view: this local desktop was started without root, so it has no trusted side "
                               "and no framebuffer file (start it as root)")
        pid = handle.info.get("child_pid")
    elif handle.provider == "docker":
        import docker

        pid = docker.from_env().containers.get(handle.info["container"]).attrs["State"]["Pid"]
    else:
        raise DesktopError(f"live view: not available for the {handle.provider!r} provider (needs the desktop's "
                           "framebuffer file on this host)")
    if not pid:
        raise DesktopError("live view: the desktop is not running")
    return Path(f"/proc/{pid}/root")


def _die_with_parent() -> None:
    os.setsid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveView:
    url: str
    token: str
    port: int
    folder: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    control: bool = False

    gated: bool = False

    @property
    def gate_path(self) -> Path:
        """Gated control views inject input only while this file exists (desktop/inputpipe.py)."""
        return self.folder / "gate"

    def open_gate(self, is_open: bool) -> None:
        if is_open:
            self.gate_path.touch()
        else:
            self.gate_path.unlink(missing_ok=True)

    @property
    def events_path(self) -> Path:
        """The person's input events (control views), one JSON object a line (desktop/inputpipe.py)."""
        return self.folder / "events.jsonl"

    def alive(self) -> bool:
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        shutil.rmtree(self.folder, ignore_errors=True)


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise DesktopError(f"live view: `{tool}` is not installed (Debian: apt-get install novnc websockify x11vnc; "
                           "scripts/install.sh installs them)")
    return path


def view_url(port: int, token: str, view_only: bool = True) -> str:
    q = {"autoconnect": "1", "resize": "scale", "view_only": "1" if view_only else "0",
         "path": f"websockify?token={token}"}
    return f"http://127.0.0.1:{port}/vnc.html?{urllib.parse.urlencode(q)}"


def start_view(handle: DesktopHandle, port: int | None = None, control: bool = False,
               ready_timeout: float = 15.0, gated: bool = False) -> LiveView:
    """Start the VNC server and the noVNC page for `handle`; returns the view (its URL holds the token).
    `gated` (with `control`): input reaches the desktop only while `view.open_gate(True)`."""
    x11vnc, websockify = _need("x11vnc"), _need("websockify")
    if not (NOVNC_DIR / "vnc.html").exists():
        raise DesktopError(f"live view: noVNC is not installed at {NOVNC_DIR} (Debian: apt-get install novnc)")
    root = desktop_root(handle)
    fb = root / FB_INSIDE
    geom = xwd_geometry(fb)
    token = secrets.token_urlsafe(24)
    VIEW_BASE.mkdir(mode=0o711, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{handle.id}-", dir=VIEW_BASE))  # 0700
    socks = folder / "sockets"
    socks.mkdir(mode=0o700)
    sock = folder / "vnc.sock"
    # websockify finds the socket by the token's name: a link, so the token is in no process's argv
    (socks / token).symlink_to(sock)
    port = port or free_port()
    view = LiveView(url=view_url(port, token, view_only=not control), token=token, port=port, folder=folder,
                    control=control, gated=gated and control)
    if control:
        # x11vnc runs the pipe through sh -c; the pipe imports this package (from where it is)
        pipe = " ".join(shlex.quote(a) for a in (
            sys.executable, "-m", "control_osworld.desktop.inputpipe", str(root / X_SOCKET_INSIDE),
            str(root / XAUTH_INSIDE), str(view.events_path), *([str(view.gate_path)] if view.gated else [])))
        # -nocmds would forbid the pipe; -norc still closes the remote-control channel
        mode = ["-pipeinput", pipe]
    else:
        mode = ["-viewonly", "-nocmds"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "PYTHONPATH": str(source_root())}
    try:
        with open(folder / "x11vnc.log", "wb") as log:
            view.procs.append(subprocess.Popen(
                [x11vnc, "-rawfb", geom.rawfb(fb), *mode, "-unixsock", str(sock), "-rfbport", "0",
                 "-nopw", "-forever", "-shared", "-norc", "-noipv6", "-nossl", "-noxdamage", "-q"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, close_fds=True,
                preexec_fn=_die_with_parent, env=env))
        _wait(lambda: sock.exists(), view, ready_timeout, "x11vnc")
        if control:
            _wait(lambda: view.events_path.exists() and b'"ready"' in view.events_path.read_bytes(), view,
                  ready_timeout, "the take-over's input pipe (x11vnc -pipeinput)")
        with open(folder / "websockify.log", "wb") as log:
            view.procs.append(subprocess.Popen(
                [websockify, "--web", str(NOVNC_DIR), "--token-plugin", "UnixDomainSocketDirectory",
                 "--token-source", str(socks), f"127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, close_fds=True,
                preexec_fn=_die_with_parent, env={"PATH": "/usr/bin:/bin", "HOME": str(folder)}))
        _wait(lambda: _listening(port), view, ready_timeout, "websockify")
    except BaseException:
        view.stop()
        raise
    return view


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(ready, view: LiveView, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        dead = [p for p in view.procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            logs = "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                           for p in sorted(view.folder.glob("*.log")))
            raise DesktopError(f"live view: {what} did not start{logs}")
        time.sleep(0.05)
