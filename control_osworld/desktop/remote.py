"""Any running OSWorld server by URL: upstream's Docker/QEMU VM, a cloud VM, or one of ours.

Only upstream's protocol is assumed; nothing is started or stopped. What the server offers
beyond it (our /step, screenshot sizes, ...) is asked once here and kept in the handle
(`info["extensions"]`, empty for upstream's server), so every client of the desktop takes the
matching path (see client.py).

A pool. `url` may name several servers (comma-separated). Each sample leases one: a lease is an
exclusive lock on a file named after the URL (`/tmp/control-osworld/remote/`), so no two samples,
of this process or of another on this machine, run on one desktop at once (upstream's server
keeps one screenshot file and one set of apps: two samples on it read each other's state). A
sample waits for a free desktop of its pool.

Reset. Nothing reverts a remote desktop between samples the way upstream's providers revert a
VM. With `remote_reset` (a host command, e.g. a snapshot revert) the command runs before every
sample on the leased desktop and the server must answer again afterwards; without one, a desktop
that an earlier sample of this process used is refused with an error naming the option. The
sample's integrity record says which desktop of the pool it had and which reset ran
(`remote`: url, pool, samples_on_desktop, reset command, exit code, seconds).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import shlex
import subprocess
import threading
import time
from pathlib import Path

from control_osworld.desktop.client import DesktopClient, DesktopError
from control_osworld.desktop.provider import (
    DesktopHandle,
    DesktopProvider,
    DesktopSpec,
    desktop_provider,
)

LEASE_DIR = Path(os.environ.get("CONTROL_OSWORLD_REMOTE_LEASES", "/tmp/control-osworld/remote"))
"""Where the per-URL lock files live (one machine's samples share them)."""
POLL_S = 0.2
RESET_READY_S = 300.0
"""A reset may reboot a VM: the server then gets at least this long to answer."""

_lock = threading.Lock()
_held: dict[str, tuple[int, str]] = {}
"""URL -> (the open lock file's descriptor, the task), while a sample of this process holds it."""
_used: dict[str, int] = {}
"""URL -> how many samples of this process started on it."""


def pool(spec_url: str | None) -> list[str]:
    """The URLs of `spec_url` (comma-separated), normalised; a clear error for a bad one."""
    if not spec_url:
        raise DesktopError("the remote provider needs a url (e.g. -T url=http://127.0.0.1:5000, "
                           "or several separated by commas)")
    urls = [u.strip().rstrip("/") for u in spec_url.split(",") if u.strip()]
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise DesktopError(f"remote url {u!r} is not an http(s) URL (field `url`)")
    if len(set(urls)) != len(urls):
        raise DesktopError(f"remote url pool names a desktop twice: {spec_url!r} (field `url`)")
    return urls


def connect(provider: str, url: str, timeout: float, info: dict | None = None) -> DesktopHandle:
    """Wait until the server at `url` answers, then describe it as a handle."""
    url = url.rstrip("/")
    with DesktopClient(url, timeout=30) as c:
        _wait(c, timeout)
        w, h = c.screen_size()
        ext = sorted(c.extensions())
    return DesktopHandle(provider=provider, id=url, base_url=url, screen_width=w, screen_height=h,
                         info={**(info or {}), "extensions": ext, "url": url})


def _lock_path(url: str) -> Path:
    return LEASE_DIR / (hashlib.sha256(url.encode()).hexdigest()[:24] + ".lock")


def _try_lease(url: str, task: str) -> bool:
    """Take `url`'s lock without waiting (True) or leave it (False: another sample has it)."""
    with _lock:
        if url in _held:
            return False
        LEASE_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(_lock_path(url), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {url}\n".encode())
        _held[url] = (fd, task)
        return True


def release(url: str) -> None:
    """End this process's lease of `url` (idempotent)."""
    with _lock:
        fd, _ = _held.pop(url, (None, ""))
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _pick(urls: list[str], task: str) -> str | None:
    # Least used first, so a pool's desktops share the samples evenly.
    for u in sorted(urls, key=lambda u: (_used.get(u, 0), urls.index(u))):
        if _try_lease(u, task):
            return u
    return None


def lease(urls: list[str], task: str = "") -> str:
    """Block until one desktop of the pool is free; lease it."""
    while (u := _pick(urls, task)) is None:
        time.sleep(POLL_S)
    return u


async def alease(urls: list[str], task: str = "") -> str:
    """`lease` without holding a worker thread while waiting (samples queue on the event loop)."""
    while (u := _pick(urls, task)) is None:
        await asyncio.sleep(POLL_S)
    return u


def run_reset(command: str, url: str, timeout: float) -> dict:
    """Run the reset hook for `url`; its record, or a DesktopError (the harness's own failure:
    the sample errors, it is not the agent's doing)."""
    cmd = command.replace("{url}", shlex.quote(url))
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, shell=True, capture_output=True, timeout=timeout,
                           env={**os.environ, "OSWORLD_URL": url})
    except subprocess.TimeoutExpired as e:
        raise DesktopError(f"remote_reset for {url} did not finish within {timeout:g} s: {command!r}") from e
    rec = {"command": command, "returncode": p.returncode, "seconds": round(time.monotonic() - t0, 3)}
    if p.returncode != 0:
        tail = (p.stderr or p.stdout or b"")[-2000:].decode("utf-8", "replace").strip()
        raise DesktopError(f"remote_reset for {url} failed (exit {p.returncode}): {command!r}: {tail}")
    return rec


def prepare(spec: DesktopSpec, url: str) -> DesktopHandle:
    """The leased `url` made ready for a sample: reset (or refused when used and no reset), then
    connected. The caller holds the lease and releases it if this raises."""
    urls = pool(spec.url)
    n = _used.get(url, 0)
    reset = None
    if spec.remote_reset:
        reset = run_reset(spec.remote_reset, url, spec.remote_reset_timeout)
    elif n:
        raise DesktopError(
            f"the remote desktop {url} was already used by {n} sample(s) of this run and nothing reverts it: "
            "give a reset hook (-T remote_reset='COMMAND', run-config key `remote_reset`; `{url}` is replaced by "
            "the desktop's URL), or one URL per sample in the pool (-T url=URL1,URL2,...)")
    _used[url] = n + 1
    timeout = max(spec.ready_timeout, RESET_READY_S) if reset else spec.ready_timeout
    # The harness reaches that server over the network and nothing more: whoever controls
    # the VM (the agent included) may answer for it. The log says so (docs/integrity.md).
    return connect("remote", url, timeout, {
        "evidence_trust": "untrusted-remote",
        "remote": {"url": url, "pool": urls, "samples_on_desktop": n + 1, "reset": reset},
    })


@desktop_provider("remote")
class RemoteProvider(DesktopProvider):
    def start(self, spec: DesktopSpec) -> DesktopHandle:
        url = lease(pool(spec.url))
        try:
            return prepare(spec, url)
        except BaseException:
            release(url)
            raise

    async def astart(self, spec: DesktopSpec, task_name: str = "control-osworld") -> DesktopHandle:
        url = await alease(pool(spec.url), task_name)
        try:
            return await asyncio.to_thread(prepare, spec, url)
        except BaseException:
            release(url)
            raise

    def stop(self, handle: DesktopHandle) -> None:
        """A remote desktop belongs to whoever started it: only the lease ends."""
        release(handle.info.get("url", handle.base_url))

    async def atask_cleanup(self, task_name: str, cleanup: bool) -> None:
        """The task's end: leases its samples kept (no sandbox cleanup) end with it."""
        for url, (_, task) in list(_held.items()):
            if task == task_name:
                release(url)

    def integrity(self, handle: DesktopHandle) -> dict:
        out = super().integrity(handle)
        if "remote" in handle.info:
            out["remote"] = handle.info["remote"]
        return out


def _wait(c: DesktopClient, timeout: float) -> None:
    # Upstream servers have no health endpoint: /screen_size is their cheapest.
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.screen_size()
            return
        except DesktopError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
