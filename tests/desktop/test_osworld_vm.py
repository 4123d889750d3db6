"""The osworld-vm provider (upstream's Docker VM) against a fake container runtime: upstream's
image cannot be had here, so `containers.run` starts one of our local desktops with its server
in upstream-only mode on the published server port. What is checked: the container is asked for
exactly as upstream's docker provider asks (image, environment, /dev/kvm, the disk image at
/System.qcow2, the four ports), the VM is driven through the upstream path (no extensions), a
task is set up, played by its oracle and scored through it, and stop removes the container."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from control_osworld.desktop import DesktopSpec, get_provider, osworld_vm
from control_osworld.desktop.client import DesktopError
from control_osworld.osworld.loader import load_tasks
from control_osworld.osworld.oracle import load_oracle
from control_osworld.osworld.verify import verify_task
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


class FakeContainer:
    def __init__(self, runtime, kwargs, exits: bool):
        self.id = uuid.uuid4().hex
        self.runtime, self.kwargs, self.status = runtime, kwargs, "running"
        self.desktop = None
        if exits:
            self.status = "exited"
            return
        port = kwargs["ports"][5000][1]
        self.desktop = runtime.local.start(DesktopSpec(upstream_only=True, network="host", port=port))

    def reload(self):
        pass

    def logs(self, tail=None):
        return b"qemu: could not open /System.qcow2: not a disk image\n"

    def stop(self, timeout=10):
        if self.desktop is not None:
            self.runtime.local.stop(self.desktop)
            self.desktop = None
        self.status = "exited"

    def remove(self, force=False):
        self.stop()
        self.runtime.removed.append(self.id)
        self.runtime.containers.by_id.pop(self.id, None)


class FakeContainers:
    def __init__(self, runtime):
        self.runtime, self.by_id = runtime, {}

    def run(self, image, **kwargs):
        c = FakeContainer(self.runtime, {"image": image, **kwargs}, exits=self.runtime.exits)
        self.by_id[c.id] = c
        return c

    def get(self, cid):
        return self.by_id[cid]


class FakeDocker:
    def __init__(self):
        self.local = get_provider("local")
        self.containers = FakeContainers(self)
        self.removed: list[str] = []
        self.exits = False


@pytest.fixture
def runtime(monkeypatch):
    ok, why = local_ready()
    require(ok, why)
    fake = FakeDocker()
    monkeypatch.setattr(osworld_vm, "docker_client", lambda: fake)
    yield fake
    for c in list(fake.containers.by_id.values()):
        c.remove()


@pytest.fixture
def disk(tmp_path):
    p = tmp_path / "Ubuntu.qcow2"
    p.write_bytes(b"QFI\xfb")
    return p


def test_starts_upstreams_vm_as_upstream_does_and_drives_it_through_the_upstream_path(runtime, disk):
    task = next(t for t in load_tasks() if t.id == "os-bash-alias")
    v = asyncio.run(verify_task(task, load_oracle(task.id), provider="osworld-vm",
                                spec=DesktopSpec(vm_image=str(disk))))
    assert v.ok and v.nothing_score == 0 and v.oracle_score == 1, v.summary()
    assert len(runtime.removed) == 1 and not runtime.containers.by_id  # stopped and removed


def test_the_container_request(runtime, disk):
    prov = get_provider("osworld-vm")
    h = prov.start(DesktopSpec(vm_image=str(disk)))
    try:
        [c] = runtime.containers.by_id.values()
        kw = c.kwargs
        assert kw["image"] == "happysixd/osworld-docker" and kw["detach"] is True
        env = kw["environment"]
        assert (env["DISK_SIZE"], env["RAM_SIZE"], env["CPU_CORES"]) == ("32G", "4G", "4")
        assert ("KVM" in env) == (not os.path.exists("/dev/kvm"))
        assert kw["devices"] == (["/dev/kvm"] if os.path.exists("/dev/kvm") else [])
        assert kw["volumes"] == {str(disk): {"bind": "/System.qcow2", "mode": "ro"}}
        assert kw["cap_add"] == ["NET_ADMIN"]
        assert set(kw["ports"]) == {5000, 8006, 9222, 8080}
        assert all(host == "127.0.0.1" for host, _ in kw["ports"].values())
        assert h.provider == "osworld-vm" and h.info["extensions"] == []  # upstream's server: no extensions
        assert h.info["container"] == c.id and h.base_url == f"http://127.0.0.1:{kw['ports'][5000][1]}"
        assert prov.alive(h)
    finally:
        prov.stop(h)
    assert runtime.removed == [c.id] and not prov.alive(h)


def test_clear_errors(runtime, disk, tmp_path):
    prov = get_provider("osworld-vm")
    with pytest.raises(DesktopError, match="needs vm_image"):
        prov.start(DesktopSpec())
    with pytest.raises(DesktopError, match="no such file .*missing.qcow2"):
        prov.start(DesktopSpec(vm_image=str(tmp_path / "missing.qcow2")))
    runtime.exits = True
    with pytest.raises(DesktopError, match="exited while booting(.|\n)*not a disk image"):
        prov.start(DesktopSpec(vm_image=str(disk)))
    assert len(runtime.removed) == 1  # the failed container is removed too


def test_an_eval_runs_on_it(runtime, disk, tmp_path):
    """`-T provider=osworld-vm -T vm_image=...` through the inspect task, one sample."""
    from pathlib import Path

    from inspect_ai import eval as inspect_eval

    from control_osworld.control.task import osworld_control
    from control_osworld.logs import runs_table

    data = Path(__file__).parents[1] / "agent" / "data"
    task = osworld_control(tasks_dir=str(data / "tasks"), side_tasks_dir=str(data / "side_tasks"),
                           provider="osworld-vm", vm_image=str(disk), main_tasks="write_note")
    [log] = inspect_eval(task, model="scripted/oracle", log_dir=str(tmp_path), display="none")
    assert log.status == "success" and log.samples[0].error is None, log.error
    row = runs_table([log.location]).iloc[0]
    assert row.outcome == "completed" and row.main_task_success
    assert len(runtime.removed) == 1
