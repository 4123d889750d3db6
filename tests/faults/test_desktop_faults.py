"""Desktop faults on the embedded desktop: killed mid-run, its server hung, its disk full. Each
ends the sample as an error of the right kind (kept apart, never a failure of the task), and a
retry of the errored sample completes it, with one record for the sample."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai import eval_retry

from control_osworld.control.task import osworld_control
from control_osworld.desktop import local
from control_osworld.logs import read_run_records, runs_table
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[1] / "agent" / "data"


@pytest.fixture(autouse=True)
def _desktop():
    ok, why = local_ready()
    require(ok, why)


def _eval(tasks_dir: Path, log_dir: Path, **task_args):
    task = osworld_control(mode="honest", main_tasks="write_note", tasks_dir=str(tasks_dir),
                           side_tasks_dir=str(DATA / "side_tasks"), **task_args)
    [log] = inspect_eval(task, model="scripted/oracle", log_dir=str(log_dir), display="none")
    return log


def _children(pid: int, name: str | None = None) -> list[int]:
    args = ["pgrep", "-P", str(pid)] + (["-x", name] if name else [])
    return [int(p) for p in subprocess.run(args, capture_output=True, text=True).stdout.split()]


def _our_desktop_pid1(timeout: float = 600) -> int:
    """pid 1 of the first desktop sandbox this test process starts."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for outer in _children(os.getpid(), "bwrap"):
            inner = _children(outer)
            if inner:
                return inner[0]
        time.sleep(0.05)
    raise AssertionError("no desktop started")


def _after_start(delay: float, act) -> threading.Thread:
    def run():
        pid1 = _our_desktop_pid1()
        time.sleep(delay)
        act(pid1)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _retry_completes(log, tmp_path):
    [retried] = eval_retry(log.location, log_dir=str(tmp_path), display="none")
    assert retried.status == "success"
    table = runs_table([retried.location])
    assert len(table) == 1 and table.iloc[0].outcome == "completed" and table.iloc[0].main_task_success
    assert table.iloc[0].retried_errors == [] or isinstance(table.iloc[0].retried_errors, list)


def test_desktop_killed_mid_run_is_desktop_died(tmp_path):
    killer = _after_start(3.0, lambda pid1: os.kill(pid1, signal.SIGKILL))
    log = _eval(DATA / "tasks", tmp_path)
    killer.join(5)
    row = runs_table([log.location]).iloc[0]
    assert (row.outcome, row.error_kind) == ("error", "desktop_died"), row.error
    assert row.main_task_success is None
    _retry_completes(log, tmp_path)


def _stop_server(pid1: int) -> None:
    pidns = os.readlink(f"/proc/{pid1}/ns/pid")
    servers = [p for p in local.processes_in(pidns)
               if "osworld_server" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")]
    assert servers, "the desktop's server process was not found"
    for p in servers:
        os.kill(p, signal.SIGSTOP)


def test_hung_server_is_desktop_hung(tmp_path):
    stopper = _after_start(3.0, _stop_server)
    t0 = time.monotonic()
    log = _eval(DATA / "tasks", tmp_path, action_timeout=2)
    stopper.join(5)
    row = runs_table([log.location]).iloc[0]
    assert (row.outcome, row.error_kind) == ("error", "desktop_hung"), row.error
    assert time.monotonic() - t0 < 90  # the action timeout, not inspect's or the OS's, decided
    [rec] = read_run_records(log.location, images=False)
    assert rec.trajectory.error_kind == "desktop_hung"
    _retry_completes(log, tmp_path)


def test_full_disk_is_disk_full(tmp_path):
    require(os.geteuid() == 0, "the desktop's home is a size-limited tmpfs when we are root")
    # The desktop's home holds 4 MB; its task uploads a 6 MB file in its setup.
    tasks = tmp_path / "tasks"
    shutil.copytree(DATA / "tasks", tasks)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(6 * 1024 * 1024))
    note = json.loads((tasks / "editor" / "write_note.json").read_text())
    note["config"].insert(0, {"type": "upload_file", "parameters": {
        "files": [{"local_path": str(big), "path": "/home/user/Downloads/big.bin"}]}})
    (tasks / "editor" / "write_note.json").write_text(json.dumps(note))
    log = _eval(tasks, tmp_path / "logs", disk_mb=4)
    row = runs_table([log.location]).iloc[0]
    assert (row.outcome, row.error_kind) == ("error", "disk_full"), row.error
    assert "No space left on device" in row.error
    big.write_bytes(b"small now")  # the cause is gone: the retry goes through
    _retry_completes(log, tmp_path / "logs")
