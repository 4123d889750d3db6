"""The client against a server with none of our extensions: our server in upstream-only mode
(what upstream's Flask server answers, REFERENCE §2/§9), over TCP and the remote provider as a
user of upstream's VM would connect; and the same client against the full server."""

from __future__ import annotations

import asyncio
import io
import socket

import httpx
import pytest
from PIL import Image

from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider
from control_osworld.desktop.client import EXTENSIONS, AsyncDesktopClient, png_size
from control_osworld.desktop.sandbox import DesktopSandboxEnvironment
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def upstream_handle():
    """A local desktop whose server answers as upstream's, reached by URL (remote provider)."""
    ok, why = local_ready()
    require(ok, why)
    local = get_provider("local")
    port = _free_port()
    h = local.start(DesktopSpec(upstream_only=True, network="host", port=port))
    try:
        yield get_provider("remote").start(DesktopSpec(url=f"http://127.0.0.1:{port}"))
    finally:
        local.stop(h)


def test_the_server_answers_as_upstream(upstream_handle):
    with httpx.Client(base_url=upstream_handle.base_url, timeout=30) as h:
        assert h.post("/step", json={"code": "pass"}).status_code == 404
        assert h.get("/healthz").status_code == 404
        assert h.post("/platform").status_code == 405 and h.get("/platform").text == "Linux"
        png = h.get("/screenshot?width=683&height=384").content
        assert png_size(png) == (upstream_handle.screen_width, upstream_handle.screen_height)
        r = h.post("/execute", json={"command": "pwd; cat", "shell": True, "cwd": "/tmp", "input": "x"}).json()
        assert r["output"] == "/home/user\n"  # cwd and stdin ignored, as upstream does
        assert h.post("/execute", json={"command": ["no-such-binary"]}).status_code == 500
        assert h.post("/list_directory", json={"path": "/nope"}).status_code == 400
        assert h.post("/window_size", json={"app_class_name": "x"}).status_code == 400  # form data only
        assert h.post("/setup/open_file", json={"path": "/no/such/file"}).status_code == 404


def test_the_remote_provider_sees_no_extensions(upstream_handle):
    assert upstream_handle.provider == "remote" and upstream_handle.info["extensions"] == []
    assert get_provider("remote").alive(upstream_handle)


def test_steps_fall_back_to_execute_and_client_side_resizing(upstream_handle):
    with DesktopClient.for_handle(upstream_handle) as c:
        assert c.extensions() == frozenset()
        r = c.step("pyautogui.moveTo(321, 123)\nfor _ in range(2):\n    print('hi')", size=(683, 384))
        assert (r.returncode, r.output) == (0, "hi\nhi\n")
        assert png_size(r.screenshot) == (683, 384)
        assert Image.open(io.BytesIO(r.screenshot)).size == (683, 384)
        assert c.cursor_position() == (321, 123)
        assert png_size(c.screenshot(size=(640, 400))) == (640, 400)
        assert c.step("raise ValueError('boom')", screenshot=False).returncode == 1
        assert c.read_file("/home/user/none.txt") is None
        assert c.list_directory("/home/user/none") is None
        assert c.window_size("no-such-class") is None
        assert c.platform() == "Linux"


def test_sandbox_exec_keeps_stdin_cwd_env_through_upstream_execute(upstream_handle):
    async def go():
        env = DesktopSandboxEnvironment(upstream_handle)
        try:
            r = await env.exec(["sh", "-c", 'pwd; echo "$GREETING"; wc -c'], input="x" * 200_000, cwd="/tmp",
                               env={"GREETING": "it's 'quoted' $HOME"})
            missing = await env.exec(["no-such-binary"])
            leftovers = await env.exec(["sh", "-c", "ls /tmp | grep -c control-osworld-stdin || true"])
            await env.write_file("/home/user/a/b.txt", "data")
            return r, missing, leftovers, await env.read_file("/home/user/a/b.txt")
        finally:
            await env.client.aclose()

    r, missing, leftovers, data = asyncio.run(go())
    assert r.success and r.stdout == "/tmp\nit's 'quoted' $HOME\n200000\n"
    assert missing.returncode == 127 and not missing.success
    assert leftovers.stdout.strip() == "0"  # the uploaded stdin file is removed
    assert data == "data"


def test_our_server_offers_its_extensions():
    ok, why = local_ready()
    require(ok, why)
    local = get_provider("local")
    h = local.start(DesktopSpec())
    try:
        async def go():
            c = AsyncDesktopClient.for_handle(h)
            try:
                r = await c.step("pass", size=(683, 384))
                return await c.extensions(), r
            finally:
                await c.aclose()

        ext, r = asyncio.run(go())
        assert ext == EXTENSIONS and png_size(r.screenshot) == (683, 384)
    finally:
        local.stop(h)
