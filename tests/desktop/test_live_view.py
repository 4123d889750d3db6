"""Live view (issue 24 item 1): `control-osworld desktop view` in a real headless Chromium.

The page's canvas shows the desktop (pixels against the server's screenshot, and it follows a
change), view-only refuses input sent through the page, the websocket needs the token, and the
desktop's processes see nothing of the viewer (no X client, no port)."""

from __future__ import annotations

import io
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import websocket
from PIL import Image

from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider
from control_osworld.desktop.client import DesktopError
from control_osworld.desktop.liveview import NOVNC_DIR, XwdGeometry, start_view, xwd_geometry
from control_osworld.desktop.provider import DesktopHandle
from tests.conftest import require
from tests.desktop.cdp import Browser, chromium_binary
from tests.desktop.conftest import local_ready

W, H = 800, 600
CANVAS_PIXELS = """(() => { const c = document.querySelector('#noVNC_container canvas');
  if (!c || c.width < 2) return null;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  return [c.width, c.height, btoa(Array.from(d, x => String.fromCharCode(x)).join(''))]; })()"""
STATUS = "document.getElementById('noVNC_status')?.textContent || ''"


def test_xwd_geometry_and_rawfb_string(tmp_path):
    # the header Xvfb -fbdir writes for 800x600x24 (32 bpp, LSB first, 256 colour entries)
    head = struct.pack(">20I", 160, 7, 2, 24, 800, 600, 0, 0, 32, 0, 32, 32, 3200, 4, 0xFF0000, 0xFF00, 0xFF, 8, 256,
                       256)
    f = tmp_path / "Xvfb_screen0"
    f.write_bytes(head + b"\0" * 80)
    g = xwd_geometry(f)
    assert g == XwdGeometry(800, 600, 32, 160 + 256 * 12, 3200, (0xFF0000, 0xFF00, 0xFF))
    assert g.rawfb(f) == f"map:{f}@800x600x32:ff0000/ff00/ff+3232"
    f.write_bytes(b"not an xwd file" * 10)
    with pytest.raises(DesktopError, match="not an XWD"):
        xwd_geometry(f)


def test_view_refuses_providers_without_a_framebuffer_file():
    with pytest.raises(DesktopError, match="remote"):
        start_view(DesktopHandle(provider="remote", id="x", base_url="http://h:5000"))
    with pytest.raises(DesktopError, match="remote"):
        start_view(DesktopHandle(provider="remote", id="x", base_url="http://h:5000"), control=True)


def _require_view_tools() -> None:
    ok, why = local_ready()
    require(ok, why)
    require(os.geteuid() == 0, "the live view reads the trusted side's framebuffer file: needs root")
    for tool in ("x11vnc", "websockify"):
        require(shutil.which(tool) is not None, f"{tool} is not installed (apt-get install novnc websockify x11vnc)")
    require((NOVNC_DIR / "vnc.html").exists(), f"noVNC is not installed at {NOVNC_DIR} (apt-get install novnc)")
    require(chromium_binary() is not None, "chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def viewed():
    """A local desktop, `desktop view` on it (the CLI, as a user runs it), and its URL."""
    _require_view_tools()
    from control_osworld.cli import STATE_DIR

    provider = get_provider("local")
    handle = provider.start(DesktopSpec(screen_width=W, screen_height=H))
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    (STATE_DIR / "liveview-test.json").write_text(handle.model_dump_json())
    cli = subprocess.Popen([sys.executable, "-m", "control_osworld.cli", "desktop", "view", "liveview-test"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = cli.stdout.readline().strip() if cli.stdout else ""
        assert url.startswith("http://127.0.0.1:"), (url, cli.stderr.read() if cli.poll() is not None else "")
        with DesktopClient.for_handle(handle) as c:
            yield handle, c, url, cli
    finally:
        cli.terminate()
        cli.wait(15)
        provider.stop(handle)
        (STATE_DIR / "liveview-test.json").unlink(missing_ok=True)


def _canvas(b: Browser, timeout: float = 20.0, want=None) -> Image.Image:
    deadline = time.monotonic() + timeout
    img = None
    while time.monotonic() < deadline:
        r = b.eval(CANVAS_PIXELS)
        if r:
            import base64

            img = Image.frombytes("RGBA", (r[0], r[1]), base64.b64decode(r[2])).convert("RGB")
            if want is None or want(img):
                return img
        time.sleep(0.2)
    raise AssertionError(f"the canvas never showed what was expected (status {b.eval(STATUS)!r}, last {img})")


def _mean_diff(a: Image.Image, b: Image.Image) -> float:
    a, b = a.resize((80, 60)), b.resize((80, 60))
    pa, pb = a.tobytes(), b.tobytes()
    return sum(abs(x - y) for x, y in zip(pa, pb)) / len(pa)


def _shell(c: DesktopClient, cmd: str) -> str:
    r = c.execute(cmd, shell=True)
    return r["output"]


def _open(url: str) -> Browser:
    b = Browser(width=1024, height=768)
    b.call("Page.enable")
    b.call("Page.navigate", url=url)
    return b


@pytest.mark.slow
@pytest.mark.desktop
def test_page_canvas_shows_the_desktop_and_follows_it(viewed, tmp_path):
    handle, c, url, _cli = viewed
    _shell(c, "xsetroot -solid '#d02020'")
    b = _open(url)
    try:
        red = _canvas(b, want=lambda im: im.getpixel((W // 2, H // 3))[0] > 180)
        assert red.size == (W, H)
        shot = Image.open(io.BytesIO(c.screenshot())).convert("RGB")
        assert _mean_diff(red, shot) < 8, "the canvas differs from the desktop's screenshot"
        # a large coloured window on the desktop shows up in the page, where the desktop has it
        _shell(c, "xterm -bg '#2040e0' -geometry 60x20+0+0 -e sleep 60 >/dev/null 2>&1 &")
        blue = _canvas(b, want=lambda im: im.getpixel((60, 60))[2] > 180 and im.getpixel((60, 60))[0] < 90)
        assert blue.getpixel((W - 20, H - 20))[0] > 180  # outside the window: still the red root
        shot = Image.open(io.BytesIO(c.screenshot())).convert("RGB")
        assert _mean_diff(blue, shot) < 8
        page = Image.open(io.BytesIO(b.screenshot())).convert("RGB")  # the page itself, as a person sees it
        keep = Path(os.environ.get("CONTROL_OSWORLD_TEST_ARTEFACTS", tmp_path))
        keep.mkdir(parents=True, exist_ok=True)
        page.save(keep / "live_view_page.png")
        assert "Connected" in b.eval(STATUS)
        px = page.resize((64, 48)).tobytes()
        reds = sum(1 for i in range(0, len(px), 3) if px[i] > 180 and px[i + 1] < 80)
        assert reds > 64 * 48 // 4, "the page screenshot does not show the desktop's red root"
    finally:
        b.close()
        _shell(c, "pkill -x xterm; true")


@pytest.mark.slow
@pytest.mark.desktop
def test_view_only_refuses_input_through_the_page(viewed):
    handle, c, url, _cli = viewed
    _shell(c, "xsetroot -solid '#20a020'; xdotool mousemove 7 9")
    before = _shell(c, "xdotool getmouselocation")
    b = _open(url.replace("view_only=1", "view_only=0"))  # a page that sends input: the server must drop it
    try:
        _canvas(b, want=lambda im: im.getpixel((W // 2, H // 2))[1] > 140)
        for x, y in ((500, 400), (300, 200)):
            b.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
            for t in ("mousePressed", "mouseReleased"):
                b.call("Input.dispatchMouseEvent", type=t, x=x, y=y, button="right", clickCount=1)
        for ch in "xterm\r":
            b.call("Input.dispatchKeyEvent", type="keyDown", text=ch, key=ch)
            b.call("Input.dispatchKeyEvent", type="keyUp", key=ch)
        time.sleep(1.5)
        assert _shell(c, "xdotool getmouselocation") == before
        assert "xterm" not in _shell(c, "pgrep -a xterm; true")
        assert "Connected" in b.eval(STATUS)
    finally:
        b.close()


@pytest.mark.slow
@pytest.mark.desktop
def test_the_websocket_needs_the_token(viewed):
    _handle, _c, url, _cli = viewed
    port = url.split(":")[2].split("/")[0]
    token = url.split("token%3D")[1].split("&")[0]

    def greeting(path: str) -> bytes:
        ws = websocket.create_connection(f"ws://127.0.0.1:{port}/{path}", subprotocols=["binary"], timeout=10)
        try:
            return ws.recv()
        finally:
            ws.close()

    assert greeting(f"websockify?token={token}").startswith(b"RFB 003.")
    for bad in ("websockify", "websockify?token=wrong", f"websockify?token={token[:-1]}", "websockify?token=.."):
        with pytest.raises((websocket.WebSocketException, ConnectionError)):
            greeting(bad)


@pytest.mark.slow
@pytest.mark.desktop
def test_the_desktop_cannot_see_the_viewer(viewed):
    handle, c, url, _cli = viewed
    port = url.split(":")[2].split("/")[0]
    clients = _shell(c, "xlsclients -a | wc -l")
    b = _open(url)
    try:
        _canvas(b)
        # no X client more than without a viewer, no viewer process, no way to the page's port
        assert _shell(c, "xlsclients -a | wc -l") == clients
        assert not [ln for ln in _shell(c, "ps -eo comm").split() if ln in ("x11vnc", "websockify")]
        r = c.execute(f"curl -s -m 3 http://127.0.0.1:{port}/vnc.html", shell=True)
        assert r["returncode"] != 0
    finally:
        b.close()


@pytest.mark.slow
@pytest.mark.desktop
def test_stopping_the_view_ends_its_servers(viewed):
    handle, c, url, cli = viewed
    from control_osworld.desktop.liveview import VIEW_BASE

    folders = [p for p in VIEW_BASE.glob(f"{handle.id}-*")]
    assert len(folders) == 1 and (folders[0] / "sockets").stat().st_mode & 0o077 == 0
    pids = subprocess.run(["pgrep", "-P", str(cli.pid)], capture_output=True, text=True).stdout.split()
    assert len(pids) == 2
    token = url.split("token%3D")[1].split("&")[0]
    for p in pids:  # other users of the host see argv: the token is not in it
        assert token not in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
    cli.terminate()
    cli.wait(15)
    time.sleep(0.5)
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    assert not folders[0].exists()


@pytest.mark.slow
@pytest.mark.desktop
def test_live_view_true_gives_each_running_sample_a_view_url(tmp_path):
    """`live_view=True` in a real `inspect_ai.eval`: the URL is in the progress log and the
    sample's store while it runs (the solver reaches the page and the VNC server through it),
    and the view is gone after the sample's cleanup."""
    _require_view_tools()
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import Score, accuracy, scorer
    from inspect_ai.solver import solver
    from inspect_ai.util import store

    from control_osworld.desktop.liveview import VIEW_BASE
    from control_osworld.desktop.sandbox import DesktopSandboxConfig
    from control_osworld.progress import progress_log

    @solver
    def look():
        async def solve(state, generate):
            import httpx

            url = store().get("live_view_url")
            state.metadata["page"] = httpx.get(url, timeout=10).status_code
            port = url.split(":")[2].split("/")[0]
            token = url.split("token%3D")[1].split("&")[0]
            ws = websocket.create_connection(f"ws://127.0.0.1:{port}/websockify?token={token}",
                                             subprotocols=["binary"], timeout=10)
            state.metadata["greeting"] = ws.recv().decode()
            ws.close()
            state.metadata["views"] = len(list(VIEW_BASE.glob("*")))
            return state

        return solve

    @scorer(metrics=[accuracy()])
    def nothing():
        async def score(state, target):
            return Score(value=1)

        return score

    before = set(VIEW_BASE.glob("*")) if VIEW_BASE.exists() else set()
    task = Task(dataset=[Sample(input="x", id="s1", metadata={"main_task_name": "watched-task"})], solver=look(),
                scorer=nothing(), sandbox=("desktop", DesktopSandboxConfig(
                    live_view=True, desktop=DesktopSpec(screen_width=W, screen_height=H))))
    with progress_log(tmp_path / "progress.log"):
        [log] = eval(task, model="mockllm/model", log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    s = log.samples[0]
    assert s.metadata["page"] == 200 and s.metadata["greeting"].startswith("RFB 003.")
    assert s.metadata["views"] >= 1
    url = s.store["live_view_url"]
    assert "view_only=1" in url and "token%3D" in url
    lines = (tmp_path / "progress.log").read_text()
    assert "live view of sample watched-task (desktop " in lines and url in lines
    assert set(VIEW_BASE.glob("*")) == before  # stopped at the sample's cleanup


@pytest.mark.slow
@pytest.mark.docker
def test_a_docker_desktop_is_viewed_from_the_host(tmp_path):
    """Docker: the host reads the container's framebuffer file through /proc/<its pid>/root; the
    page is on the host's 127.0.0.1 only (nothing published), which the container cannot reach."""
    _require_view_tools()
    import docker

    from control_osworld.desktop.docker import IMAGE_REPO, vm_hash

    try:
        engine = docker.from_env()
        engine.images.get(f"{IMAGE_REPO}:{vm_hash()}")
    except Exception as e:
        require(False, f"no Docker engine or no desktop image for the current vm/ (bash vm/build-image.sh): {e}")
    provider = get_provider("docker")
    handle = provider.start(DesktopSpec(screen_width=W, screen_height=H))
    view = None
    try:
        with DesktopClient.for_handle(handle) as c:
            _shell(c, "xsetroot -solid '#c03030'")
            clients = _shell(c, "xlsclients -a | wc -l")
            view = start_view(handle)
            b = _open(view.url)
            try:
                img = _canvas(b, want=lambda im: im.getpixel((W // 2, H // 2))[0] > 170)
                shot = Image.open(io.BytesIO(c.screenshot())).convert("RGB")
                assert _mean_diff(img, shot) < 8
            finally:
                b.close()
            assert _shell(c, "xlsclients -a | wc -l") == clients
            assert c.execute(f"curl -s -m 3 http://127.0.0.1:{view.port}/vnc.html", shell=True)["returncode"] != 0
            ports = engine.containers.get(handle.info["container"]).attrs["NetworkSettings"]["Ports"] or {}
            assert not any(ports.values()), ports
    finally:
        if view is not None:
            view.stop()
        provider.stop(handle)


WS_FROM_INSIDE = ("curl -s -o /tmp/ws.out -w '%{{http_code}}' -H 'Connection: Upgrade' -H 'Upgrade: websocket' "
                  "-H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "
                  "-H 'Sec-WebSocket-Protocol: binary' --max-time 3 'http://127.0.0.1:{port}/websockify?token={token}';"
                  " echo; cat /tmp/ws.out 2>/dev/null | head -c 40 | tr -dc 'A-Z0-9.'")


@pytest.mark.slow
@pytest.mark.desktop
def test_a_host_network_desktop_reaches_the_port_but_not_the_screen():
    """`network="host"`: the agent shares the host's loopback, so it reaches the page's port; the
    screen needs the token (shown here: with it, the same command gets the VNC greeting)."""
    _require_view_tools()
    from control_osworld.desktop.liveview import free_port

    provider = get_provider("local")
    handle = provider.start(DesktopSpec(screen_width=W, screen_height=H, network="host", port=free_port()))
    view = start_view(handle)
    try:
        with DesktopClient.for_handle(handle) as c:
            assert _shell(c, f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{view.port}/vnc.html") == "200"
            for bad in ("", "wrong", view.token[:-1]):
                out = _shell(c, WS_FROM_INSIDE.format(port=view.port, token=bad))
                assert not out.startswith("101") and "RFB" not in out, (bad, out)
            assert "RFB003" in _shell(c, WS_FROM_INSIDE.format(port=view.port, token=view.token))
    finally:
        view.stop()
        provider.stop(handle)
