"""The embedded (bubblewrap) desktop and its server: the flow, bad input, isolation, teardown,
and the remote provider against a desktop's server over TCP."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import time

import pytest
from PIL import Image

from control_osworld.desktop import DesktopClient, DesktopError, DesktopSpec, get_provider
from control_osworld.desktop.local import exited, processes_in
from tests.conftest import console_script, require
from tests.desktop.conftest import local_ready
from tests.desktop.flow import editor_flow

pytestmark = [pytest.mark.desktop]


def test_editor_flow_local(client):
    editor_flow(client)


def test_ready_fast_and_screen_size_follows_spec():
    ok, why = local_ready()
    require(ok, why)
    p = get_provider("local")
    t = time.monotonic()
    h = p.start(DesktopSpec(screen_width=1280, screen_height=800))
    try:
        assert time.monotonic() - t < 5
        with DesktopClient.for_handle(h) as c:
            assert c.screen_size() == (1280, 800)
            assert Image.open(io.BytesIO(c.screenshot())).size == (1280, 800)
    finally:
        p.stop(h)


def test_upstream_style_action_and_step(client):
    # Exactly what upstream's client sends for every pyautogui action.
    r = client.execute(["python", "-c", "import pyautogui; import time; pyautogui.FAILSAFE = False; "
                        "pyautogui.moveTo(321, 123); print(pyautogui.position())"])
    assert r["status"] == "success" and r["returncode"] == 0
    assert r["output"].strip() == "Point(x=321, y=123)"
    s = client.step("pyautogui.moveTo(10, 20)")
    assert s.returncode == 0 and s.screenshot[:4] == b"\x89PNG"
    assert client.cursor_position() == (10, 20)


def test_screenshot_resized_in_the_desktop(client):
    assert Image.open(io.BytesIO(client.screenshot(size=(1366, 768)))).size == (1366, 768)
    assert Image.open(io.BytesIO(client.step("pass", size=(683, 384)).screenshot)).size == (683, 384)
    r = client._http.post("/step", json={"code": None, "size": [0, "x"]})
    assert r.status_code == 400 and "size" in r.json()["message"]


def test_nonzero_returncode_is_success_like_upstream(client):
    r = client.execute("echo out; echo err >&2; exit 3", shell=True)
    assert r == {"status": "success", "output": "out\n", "error": "err\n", "returncode": 3}


def test_files_upload_list_and_missing(client):
    client.write_file("/home/user/Desktop/deep/er/file.bin", b"\x00\x01data")
    assert client.read_file("/home/user/Desktop/deep/er/file.bin") == b"\x00\x01data"
    assert client.read_file("/home/user/nope.txt") is None
    tree = client.list_directory("/home/user/Desktop")
    assert tree["type"] == "directory" and "deep" in [ch["name"] for ch in tree["children"]]
    assert client.desktop_path() == "/home/user/Desktop"
    assert client.platform() == "Linux"
    assert client.terminal() is None  # no terminal open: null output, not an error


# ------------------------------------------------------------------ bad input


def test_malformed_json_gets_400_and_server_goes_on(client):
    r = client._http.post("/execute", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "malformed JSON" in r.json()["message"]
    r = client._http.post("/execute", json={"shell": True})
    assert r.status_code == 400 and "'command'" in r.json()["message"]
    assert client.platform() == "Linux"


def test_unknown_endpoint_gets_404(client):
    r = client._http.get("/no/such/thing")
    assert r.status_code == 404 and "unknown endpoint" in r.json()["message"]
    r = client._http.get("/execute")
    assert r.status_code == 405
    assert client.screen_size()


def test_action_that_raises_reports_the_error(client):
    r = client.run_python("import pyautogui; raise ValueError('boom')")
    assert r["returncode"] == 1 and "ValueError: boom" in r["error"]
    assert client.run_python("import pyautogui; print(1 + 1)")["output"] == "2\n"


def test_action_that_hangs_times_out_and_next_is_served(client):
    with pytest.raises(DesktopError) as e:
        client.run_python("import pyautogui, time; time.sleep(60)", timeout=1)
    assert e.value.status == 504 and "timed out" in str(e.value)
    t = time.monotonic()
    assert client.run_python("import pyautogui; print('alive')")["output"] == "alive\n"
    assert time.monotonic() - t < 5
    with pytest.raises(DesktopError) as e:
        client.execute("sleep 30", shell=True, timeout=1)
    assert e.value.status == 504


def test_executor_crash_is_replaced(client):
    r = client._http.post("/execute", json={"command": ["python", "-c", "import pyautogui, os; os._exit(9)"]})
    # the agent's code killed its executor: a failed action (docs/integrity.md), not a server error
    assert r.status_code == 200 and r.json()["returncode"] == 1, r.text
    assert r.json()["agent_fault"] == "executor_killed" and "died" in r.json()["error"]
    assert client.run_python("import pyautogui; print('back')")["output"] == "back\n"


# ------------------------------------------------------------------ isolation


def test_isolation_local(local_desktop, client, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host only")
    r = client.execute(["cat", str(secret)])
    assert r["returncode"] != 0 and "host only" not in r["output"]
    assert client.execute(["ls", "/root"])["returncode"] != 0

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        code = (f"import socket; s = socket.socket(); s.settimeout(2); "
                f"print(s.connect_ex(('127.0.0.1', {port})))")
        r = client.execute(["python3", "-c", code])
        assert r["returncode"] == 0 and r["output"].strip() != "0"
    finally:
        srv.close()

    me = os.getpid()
    r = client.execute(["ps", "-eo", "pid,comm"])
    assert str(me) not in r["output"].split()
    assert "pytest" not in r["output"] and "dockerd" not in r["output"]
    r = client.execute(["id", "-un"])
    assert r["output"].strip() == "user"
    assert client.execute(["touch", "/usr/x"])["returncode"] != 0  # read-only system


def test_teardown_leaves_no_process():
    ok, why = local_ready()
    require(ok, why)
    p = get_provider("local")
    h = p.start(DesktopSpec())
    with DesktopClient.for_handle(h) as c:
        c.launch(["mousepad"])
        c.launch(["sleep", "1000"])
    assert len(processes_in(h.info["pidns"])) >= 5
    p.stop(h)
    assert processes_in(h.info["pidns"]) == []
    assert not os.path.exists(h.info["state_dir"])
    p.stop(h)  # idempotent


def test_memory_limit_applies():
    ok, why = local_ready()
    require(ok, why)
    require(os.geteuid() == 0, "memory cgroups need root")
    p = get_provider("local")
    h = p.start(DesktopSpec(memory_mb=300))
    try:
        with DesktopClient.for_handle(h) as c:
            r = c.execute(["python3", "-c", "b = bytearray(600 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"],
                          timeout=60)
            assert r["returncode"] != 0  # killed by the limit
            assert c.platform() == "Linux"  # the OOM killer took the hog, not the server
    finally:
        p.stop(h)


# ------------------------------------------------------------------ remote provider


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.slow
def test_remote_provider_over_tcp():
    """A desktop serving TCP on host loopback (as upstream's VM does on :5000), driven through
    the remote provider, which assumes nothing but the protocol."""
    ok, why = local_ready()
    require(ok, why)
    local = get_provider("local")
    port = _free_port()
    served = local.start(DesktopSpec(network="host", port=port))
    try:
        remote = get_provider("remote")
        h = remote.start(DesktopSpec(url=f"http://127.0.0.1:{port}"))
        assert (h.screen_width, h.screen_height) == (1920, 1080)
        with DesktopClient.for_handle(h) as c:
            editor_flow(c)
        remote.stop(h)
    finally:
        local.stop(served)


def test_remote_provider_unreachable_is_a_clear_error():
    with pytest.raises(DesktopError, match="unreachable"):
        get_provider("remote").start(DesktopSpec(url=f"http://127.0.0.1:{_free_port()}", ready_timeout=0.5))
    with pytest.raises(DesktopError, match="needs a url"):
        get_provider("remote").start(DesktopSpec())


def test_typing_reaches_the_app_verbatim(client):
    """Every printable ASCII character typed through pyautogui arrives as itself."""
    import string

    text = "".join(c for c in string.printable if c.isprintable())
    client.launch(["xterm", "-e", "sh", "-c", "cat > /tmp/typed.txt"])
    from tests.desktop.conftest import wait_for

    assert wait_for(lambda: "xterm" in client.execute(["wmctrl", "-lx"])["output"].lower(), 15)
    client.activate_window("xterm", by_class=True)
    time.sleep(0.3)
    client.run_python(f"pyautogui.write({text!r}); pyautogui.press('enter'); pyautogui.hotkey('ctrl', 'd')")
    got = wait_for(lambda: client.read_file("/tmp/typed.txt"), 10)
    assert got is not None and got.decode().rstrip("\n") == text


def test_desktop_dies_with_the_process_that_started_it(tmp_path):
    ok, why = local_ready()
    require(ok, why)
    import sys

    code = ("from control_osworld.desktop import get_provider, DesktopSpec; import time; "
            "h = get_provider('local').start(DesktopSpec()); print(h.info['pidns'], flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pidns = proc.stdout.readline().strip()
    assert processes_in(pidns)
    proc.kill()
    proc.wait()
    # Dead = gone, or a zombie: when the starter is killed, the desktop's pid 1 goes to the
    # host's init to be reaped, which a container's pid 1 may never do (without `docker --init`).
    def alive():
        return [p for p in processes_in(pidns) if not exited(p)]

    deadline = time.monotonic() + 10
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive() == []


def test_cli_desktop_up_shot_do_down(tmp_path):
    ok, why = local_ready()
    require(ok, why)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}

    def cli(*args):
        return subprocess.run([console_script("control-osworld"), "desktop", *args, "--name", "t"],
                              capture_output=True, text=True,
                              env=env, timeout=120, cwd=tmp_path)

    up = cli("up", "--width", "1280", "--height", "800")
    assert up.returncode == 0, up.stderr
    try:
        shot = cli("shot", str(tmp_path / "a.png"))
        assert shot.returncode == 0 and Image.open(tmp_path / "a.png").size == (1280, 800)
        do = cli("do", '{"action": "mouse_move", "coordinate": [40, 50]}', "--shot", str(tmp_path / "b.png"))
        assert do.returncode == 0 and '"returncode": 0' in do.stdout and (tmp_path / "b.png").exists()
        bad = cli("do", '{"action": "fly"}')
        assert bad.returncode != 0 and "unknown computer action" in bad.stderr
        sh = cli("do", "--space", "shell", "echo hi")
        assert sh.returncode == 0 and sh.stdout == "hi\n"
    finally:
        down = cli("down")
    assert down.returncode == 0 and "down" in down.stdout
    assert cli("shot").returncode != 0  # gone
