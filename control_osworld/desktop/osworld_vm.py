"""Upstream OSWorld's own Docker VM: its image (QEMU inside a container) booting the user's
Ubuntu disk image, started the way upstream's docker provider starts it
(desktop_env/providers/docker/provider.py): image `happysixd/osworld-docker`, environment
DISK_SIZE / RAM_SIZE / CPU_CORES (KVM=N without /dev/kvm), `cap_add NET_ADMIN`, the disk image
mounted read-only at /System.qcow2, /dev/kvm passed through when present, container ports 5000
(server), 8006 (VNC web), 9222 (Chrome debugging) and 8080 (VLC) published, then a wait until
the VM's server answers. The desktop is then driven through the remote/upstream path (its
server is upstream's own, with none of our extensions).

Differences from upstream's provider: the ports are published on 127.0.0.1 only (the VM's
server has no authentication), and the container carries our label so `stop` in another
process finds it. The harness cannot enforce its trust boundaries inside that VM (REFERENCE §2):
evidence comes through upstream's server, which the agent's user can reach.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from control_osworld.desktop.client import DesktopClient, DesktopError
from control_osworld.desktop.provider import (
    DesktopHandle,
    DesktopProvider,
    DesktopSpec,
    desktop_provider,
)
from control_osworld.desktop.remote import connect

IMAGE = "happysixd/osworld-docker"
LABEL = "control-osworld.osworld-vm"
VM_PORTS = {"server": 5000, "vnc": 8006, "chrome": 9222, "vlc": 8080}
BOOT_TIMEOUT = 300.0  # upstream's _wait_for_vm_ready


def vm_environment() -> dict[str, str]:
    """Upstream's defaults, each overridable by OSWORLD_VM_<NAME> on the host."""
    env = {k: os.environ.get(f"OSWORLD_VM_{k}", v) for k, v in
           (("DISK_SIZE", "32G"), ("RAM_SIZE", "4G"), ("CPU_CORES", "4"))}
    if not os.path.exists("/dev/kvm"):
        env["KVM"] = "N"
    return env


def docker_client():
    """The container runtime (tests replace this function with a fake)."""
    from control_osworld.desktop.docker import _docker

    return _docker()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@desktop_provider("osworld-vm")
class OSWorldVMProvider(DesktopProvider):
    def start(self, spec: DesktopSpec) -> DesktopHandle:
        if not spec.vm_image:
            raise DesktopError("the osworld-vm provider needs vm_image: the path of upstream's VM disk image "
                               "(e.g. -T vm_image=~/osworld/Ubuntu.qcow2)")
        disk = Path(spec.vm_image).expanduser().resolve()
        if not disk.is_file():
            raise DesktopError(f"vm_image: no such file {disk}")
        client = docker_client()
        image = spec.image or IMAGE
        ports = {name: _free_port() for name in VM_PORTS}
        try:
            container = client.containers.run(
                image,
                environment=vm_environment(),
                cap_add=["NET_ADMIN"],
                devices=["/dev/kvm"] if os.path.exists("/dev/kvm") else [],
                volumes={str(disk): {"bind": "/System.qcow2", "mode": "ro"}},
                ports={VM_PORTS[n]: ("127.0.0.1", p) for n, p in ports.items()},
                labels={LABEL: "true"},
                detach=True,
            )
        except Exception as e:
            if type(e).__name__ == "ImageNotFound":
                raise DesktopError(f"upstream's image {image} is not on this machine (docker pull {image})") from e
            raise DesktopError(f"could not start upstream's VM container from {image}: {e}") from e
        info = {"container": container.id, "image": image, "vm_image": str(disk),
                **{f"{n}_port": p for n, p in ports.items()}}
        url = f"http://127.0.0.1:{ports['server']}"
        try:
            _wait_booted(container, url, max(spec.ready_timeout, BOOT_TIMEOUT))
            return connect("osworld-vm", url, 30, info)
        except BaseException:
            _remove(container)
            raise

    def stop(self, handle: DesktopHandle) -> None:
        cid = handle.info.get("container")
        if not cid:
            return
        try:
            container = docker_client().containers.get(cid)
        except Exception:
            return  # already gone
        _remove(container)


def _wait_booted(container, url: str, timeout: float) -> None:
    """Until the VM's server answers (upstream polls GET /screenshot); fail early, with the
    container's log, when the container exits."""
    deadline = time.monotonic() + timeout
    with DesktopClient(url, timeout=10) as c:
        while True:
            try:
                c.screenshot()
                return
            except DesktopError as e:
                last = e
            container.reload()
            if container.status in ("exited", "dead"):
                tail = container.logs(tail=30)
                tail = tail.decode(errors="replace") if isinstance(tail, bytes) else str(tail)
                raise DesktopError(f"upstream's VM container exited while booting; its log:\n{tail}")
            if time.monotonic() > deadline:
                raise DesktopError(f"upstream's VM did not answer at {url} within {timeout:g} s: {last}")
            time.sleep(1)


def _remove(container) -> None:
    try:
        container.stop(timeout=10)
    except Exception:
        pass
    try:
        container.remove(force=True)
    except Exception:
        pass
