"""What the agent can provoke is not an infrastructure error (issue 17; docs/integrity.md, the
table "failure | who can cause it | what it becomes"): each row, for real, on local and docker.

Each fault is caused as the agent (the default uid of `/execute` and of the pyautogui executor);
the server must answer it (never a 500), the inspect sandbox must return or raise what inspect's
tools turn into a tool error, and the desktop must go on working. On f69b389 the server answered
500 to `printf '\\377'` and to a killed executor, held every byte of `yes` in memory, and the
sandbox re-raised both as `DesktopError`, a sample error.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import time

import pytest
from inspect_ai.tool import ToolError
from inspect_ai.util import OutputLimitExceededError

from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider
from control_osworld.desktop.errors import DesktopError, agent_fault
from control_osworld.desktop.sandbox import DesktopSandboxEnvironment
from tests.desktop.conftest import PROVIDERS, running_desktop

pytestmark = [pytest.mark.slow]

SPEC = DesktopSpec(memory_mb=1024, disk_mb=64)


@pytest.fixture(scope="module", params=PROVIDERS)
def desk(request):
    with running_desktop(request.param, SPEC) as (p, h, c):
        yield request.param, p, h, c


def _sandbox_exec(h, cmd: list[str], **kw):
    async def go():
        env = DesktopSandboxEnvironment(h)
        try:
            return await env.exec(cmd, **kw)
        finally:
            await env.client.aclose()

    return asyncio.run(go())


def _executor_alive(c: DesktopClient) -> None:
    r = c.run_python("pyautogui.moveTo(5, 5)")
    assert r["returncode"] == 0, r


def test_any_bytes_round_trip(desk):
    """`printf '\\377'` (issue 17, finding 1): the server answers 200 with the exact bytes."""
    provider, p, h, c = desk
    r = c.execute(["bash", "-c", "printf '\\377ok\\376'; printf '\\200' >&2"])
    assert r["returncode"] == 0 and r["output"] == "\ufffdok\ufffd" and r["error"] == "\ufffd", r
    assert base64.b64decode(r["output_b64"]) == b"\xffok\xfe" and base64.b64decode(r["error_b64"]) == b"\x80"
    valid = c.execute(["bash", "-c", "printf 'caf\\303\\251'"])
    assert valid["output"] == "café" and "output_b64" not in valid  # upstream's answer, unchanged
    res = _sandbox_exec(h, ["bash", "-c", "printf '\\377'"])  # what inspect's bash tool calls
    assert res.success and res.stdout == "\ufffd"


def test_huge_output_is_bounded_and_marked(desk):
    provider, p, h, c = desk
    t = time.monotonic()
    r = c.execute(["bash", "-c", "yes | head -c 200000000"], max_output=1 << 20)
    assert r["truncated"] and r["output_truncated"] and r["output_bytes"] == 200_000_000, \
        {k: v for k, v in r.items() if k != "output"}
    assert len(r["output"]) == 1 << 20
    assert time.monotonic() - t < 60
    with pytest.raises(OutputLimitExceededError) as e:  # inspect's tools: a tool error "limit"
        _sandbox_exec(h, ["bash", "-c", "yes | head -c 30000000"])
    assert e.value.truncated_output and e.value.truncated_output.startswith("y\ny\n")


def test_killed_executor_is_restarted_as_the_agent_and_counted(desk):
    provider, p, h, c = desk
    _executor_alive(c)
    before = c.integrity()["executor_restarts"]
    killed = c.execute(["bash", "-c", "pkill -9 -f '[e]xecutor[.]py'; echo $?"])
    assert killed["output"].strip() == "0", killed  # the agent's own process: it can kill it
    time.sleep(0.3)
    r = c.step("pyautogui.moveTo(7, 7)", screenshot=False)
    assert r.returncode == 0 and r.agent_fault is None, r
    uid = c.execute(["bash", "-c", "ps -o uid= -p $(pgrep -f '[e]xecutor[.]py' | head -1)"])["output"].strip()
    assert uid == "1000", uid  # restarted as the agent's uid, not the server's
    got = p.integrity(h)  # what the sample's `integrity` record holds
    assert got["executor_restarts"] == before + 1, got
    assert any("signal 9" in d["reason"] for d in got["executor_deaths"]), got


def test_executor_kill_loop_is_a_tool_error_and_the_desktop_goes_on(desk):
    provider, p, h, c = desk
    _executor_alive(c)
    c.execute(["bash", "-c", "nohup sh -c 'while :; do pkill -9 -f [e]xecutor[.]py; sleep 0.05; done' "
                             ">/dev/null 2>&1 &"])
    try:
        time.sleep(0.5)
        t = time.monotonic()
        r = c.step("pyautogui.moveTo(9, 9)", screenshot=True)  # 500 on f69b389
        assert r.returncode == 1 and r.agent_fault in ("executor_unavailable", "executor_killed"), r
        assert r.screenshot and r.screenshot[:4] == b"\x89PNG"  # the screen is still seen
        assert time.monotonic() - t < 30  # the retries are bounded
        got = p.integrity(h)
        assert got["executor_unavailable"] >= 1 and got["executor_start_failures"] >= 1, got
    finally:
        c.execute(["bash", "-c", "pkill -9 -f '[w]hile :; do pkill'; true"])
    time.sleep(0.3)
    _executor_alive(c)  # the killer gone, the next action restarts it


def test_hung_action_is_a_timeout_tool_error(desk):
    """The agent holds the X server: its executor's next action stalls; the server times it
    out (504) and replaces the executor: a tool error, not a sample error."""
    provider, p, h, c = desk
    _executor_alive(c)
    grab = ("from Xlib import display; import time; d = display.Display(); d.grab_server(); d.sync(); "
            "open('/tmp/grabbed', 'w').close(); time.sleep(20)")
    c.execute(["bash", "-c", f"rm -f /tmp/grabbed; (nohup /opt/control-osworld/venv/bin/python -c \"{grab}\" "
                             ">/dev/null 2>&1 &); for i in $(seq 100); do test -e /tmp/grabbed && break; "
                             "sleep 0.1; done"])
    try:
        with pytest.raises(DesktopError) as e:
            c.step("pyautogui.moveTo(11, 11); pyautogui.position()", screenshot=False, timeout=3)
        assert e.value.status == 504 and agent_fault(e.value) == "timeout", e.value
        with pytest.raises(DesktopError) as e2:  # xdotool (the server's, as root) stalls too: 504, not 500
            c.cursor_position()
        assert agent_fault(e2.value) == "timeout", e2.value
    finally:
        c.execute(["bash", "-c", "pkill -9 -f '[g]rab_server'; true"])
    time.sleep(0.3)
    _executor_alive(c)


def test_full_home_is_the_agents_problem(desk):
    provider, p, h, c = desk
    try:
        r = c.execute(["bash", "-c", "head -c 100000000 /dev/zero > ~/fill; echo rc=$?"])
        assert "rc=1" in r["output"] and "No space left" in r["error"], r
        assert p.integrity(h).get("home_full") is True
        res = _sandbox_exec(h, ["bash", "-c", "echo still here; echo more >> ~/fill"])
        assert res.stdout == "still here\n" and not res.success  # the command's own ENOSPC
        with pytest.raises(ToolError, match="cannot write"):  # inspect's text_editor: a tool error

            async def write():
                env = DesktopSandboxEnvironment(h)
                try:
                    await env.write_file("/home/user/notes.txt", "x" * 100_000)
                finally:
                    await env.client.aclose()

            asyncio.run(write())
        _executor_alive(c)
        assert c.screenshot()[:4] == b"\x89PNG"
    finally:
        c.execute(["bash", "-c", "rm -f ~/fill ~/notes.txt"])


def test_oom_of_an_agent_process_is_its_exit_status(desk):
    provider, p, h, c = desk
    hog = "a = []\nwhile True: a.append(b'x' * (64 << 20))"
    res = _sandbox_exec(h, ["python3", "-c", hog], timeout=120)
    assert not res.success and res.returncode in (-9, 137), res  # killed by the OOM killer, as itself
    _executor_alive(c)
    assert c.screenshot()[:4] == b"\x89PNG"
    got = p.integrity(h)
    assert got.get("oom_kills", 0) >= 1 or got.get("oom_killed") is not None, got


def _kill_xvfb(provider: str, h) -> None:
    if provider == "local":
        from control_osworld.desktop import local

        pidns = os.readlink(f"/proc/{h.info['child_pid']}/ns/pid")
        for pid in local.processes_in(pidns):
            try:
                if open(f"/proc/{pid}/comm").read().strip() == "Xvfb":
                    os.kill(pid, 9)
            except OSError:
                pass
    else:
        subprocess.run(["docker", "exec", "-u", "root", h.info["container"], "pkill", "-9", "-x", "Xvfb"], check=True)


def test_xvfb_dead_stays_a_sample_error(desk):
    """What the agent cannot reach: with Xvfb gone the executor cannot start, and the server
    says so with a 500 that the classifier leaves a sample error. Last: it breaks the desktop."""
    provider, p, h, c = desk
    _kill_xvfb(provider, h)
    c.execute(["bash", "-c", "pkill -9 -f '[e]xecutor[.]py'; true"])
    time.sleep(0.5)
    with pytest.raises(DesktopError) as e:
        c.step("pyautogui.moveTo(3, 3)", screenshot=False)
    assert e.value.status == 500 and agent_fault(e.value) is None, e.value


@pytest.mark.desktop
def test_the_agents_process_limit_is_its_own():
    """A fork bomb: the agent at its RLIMIT_NPROC. The server still starts its commands (it forks
    as root), or, where the kernel refuses, answers returncode 126 (`agent_fault: cannot_start`,
    never a 500); its executor and the harness's commands go on. Local only: docker desktops share uid 1000's limit on the host kernel
    (docs/integrity.md), so a fork bomb there would reach the other desktops of the machine."""
    from tests.desktop.conftest import local_ready

    ok, why = local_ready()
    from tests.conftest import require

    require(ok, why)
    require(os.geteuid() == 0, "the agent's RLIMIT_NPROC is set by the trusted side (local as root)")
    p = get_provider("local")
    h = p.start(DesktopSpec(memory_mb=2048))
    bomb = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            "            time.sleep(20)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    print(n, flush=True)\n")
    try:
        with DesktopClient.for_handle(h, timeout=120) as c:
            _executor_alive(c)
            c.write_file("/tmp/bomb.py", bomb)
            c.execute(["bash", "-c", "nohup python3 /tmp/bomb.py > /tmp/bomb.out 2>&1 &"])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not c.read_file("/tmp/bomb.out"):
                time.sleep(0.2)
            assert int((c.read_file("/tmp/bomb.out") or b"0").split()[0]) > 1000
            # the server (root in the desktop) still starts the agent's commands, or answers 126
            r = c.execute(["echo", "hi"])
            assert (r["returncode"], r["output"]) == (0, "hi\n") or \
                (r["returncode"] == 126 and r["agent_fault"] == "cannot_start"), r
            res = _sandbox_exec(h, ["echo", "hi"])
            assert res.returncode in (0, 126), res
            _executor_alive(c)  # already running: actions go on
            trusted = c.execute(["id", "-u"], trusted=True)
            assert trusted["returncode"] == 0 and trusted["output"].strip() == "999", trusted
    finally:
        p.stop(h)
