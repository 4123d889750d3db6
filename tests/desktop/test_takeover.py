"""Take-over (issue 24 item 2): `control-osworld desktop view NAME --control` in a real headless
Chromium. Clicks and keys sent through the page reach the desktop (its state changes), and the
trusted side records them, which read back as computer-tool actions."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider
from control_osworld.desktop.actions import Scale
from control_osworld.desktop.human_input import read_events, to_actions
from tests.desktop.cdp import Browser
from tests.desktop.test_live_view import H, W, _canvas, _open, _require_view_tools, _shell

CANVAS_BOX = """(() => { const c = document.querySelector('%s');
  const r = c.getBoundingClientRect(); return [r.left, r.top, r.width / c.width, r.height / c.height]; })()"""
NOVNC_CANVAS = "#noVNC_container canvas"
MODIFIER_KEYS = {"ctrl": ("Control", "ControlLeft", 17, 2), "shift": ("Shift", "ShiftLeft", 16, 8),
                 "alt": ("Alt", "AltLeft", 18, 1)}
KEYS = {"\r": ("Enter", "Enter", 13), " ": (" ", "Space", 32)}


def page_xy(b: Browser, x: int, y: int, canvas: str = NOVNC_CANVAS) -> tuple[float, float]:
    """Where desktop pixel (x, y) is on the page (the canvas is scaled to the window)."""
    left, top, sx, sy = b.eval(CANVAS_BOX % canvas)
    return left + (x + 0.5) * sx, top + (y + 0.5) * sy


def click(b: Browser, x: int, y: int, button: str = "left", canvas: str = NOVNC_CANVAS) -> None:
    px, py = page_xy(b, x, y, canvas)
    b.call("Input.dispatchMouseEvent", type="mouseMoved", x=px, y=py)
    for t in ("mousePressed", "mouseReleased"):
        b.call("Input.dispatchMouseEvent", type=t, x=px, y=py, button=button, clickCount=1)


def type_text(b: Browser, text: str) -> None:
    for ch in text:
        key, code, vk = KEYS.get(ch, (ch, f"Key{ch.upper()}" if ch.isalpha() else "", ord(ch.upper())))
        b.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, text=ch, windowsVirtualKeyCode=vk)
        b.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk)
        time.sleep(0.03)


def near(location: str, x: int, y: int, tol: int = 2) -> bool:
    """`xdotool getmouselocation`'s output is within `tol` pixels of (x, y) (the page's scaling rounds)."""
    parts = dict(p.split(":", 1) for p in location.split() if ":" in p)
    return abs(int(parts.get("x", -99)) - x) <= tol and abs(int(parts.get("y", -99)) - y) <= tol


def chord(b: Browser, mod: str, ch: str) -> None:
    """mod+ch (e.g. ctrl+s) as a person presses it: the modifier down, the key, the modifier up."""
    key, code, vk, bit = MODIFIER_KEYS[mod]
    b.call("Input.dispatchKeyEvent", type="rawKeyDown", key=key, code=code, windowsVirtualKeyCode=vk, modifiers=bit)
    b.call("Input.dispatchKeyEvent", type="rawKeyDown", key=ch, code=f"Key{ch.upper()}",
           windowsVirtualKeyCode=ord(ch.upper()), modifiers=bit)
    b.call("Input.dispatchKeyEvent", type="keyUp", key=ch, code=f"Key{ch.upper()}",
           windowsVirtualKeyCode=ord(ch.upper()), modifiers=bit)
    b.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk)
    time.sleep(0.05)


def wait_for(fn, timeout: float = 15.0, what=""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out: {what() if callable(what) else what}")


@pytest.fixture(scope="module")
def controlled():
    """A local desktop and `desktop view NAME --control` on it (the CLI, as a person runs it)."""
    _require_view_tools()
    from control_osworld.cli import STATE_DIR

    provider = get_provider("local")
    handle = provider.start(DesktopSpec(screen_width=W, screen_height=H))
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    (STATE_DIR / "takeover-test.json").write_text(handle.model_dump_json())
    cli = subprocess.Popen([sys.executable, "-m", "control_osworld.cli", "desktop", "view", "takeover-test",
                            "--control"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = cli.stdout.readline().strip() if cli.stdout else ""
        assert url.startswith("http://127.0.0.1:") and "view_only=0" in url, (
            url, cli.stderr.read() if cli.poll() is not None else "")
        events = Path(cli.stdout.readline().split(": ", 1)[1].strip()) if cli.stdout else Path()
        with DesktopClient.for_handle(handle) as c:
            yield handle, c, url, events
    finally:
        cli.terminate()
        cli.wait(15)
        provider.stop(handle)
        (STATE_DIR / "takeover-test.json").unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.desktop
def test_control_clicks_and_types_through_the_page(controlled, tmp_path):
    handle, c, url, events = controlled
    _shell(c, "xsetroot -solid '#2060c0'; rm -f ~/typed.txt; "
              "xterm -geometry 50x10+0+0 -e sh -c 'cat > ~/typed.txt' >/dev/null 2>&1 &")
    b = _open(url)
    try:
        _canvas(b, want=lambda im: im.getpixel((W - 20, H - 20))[2] > 150)
        time.sleep(1.0)
        n0 = len(read_events(events))
        # the mouse: a click where the desktop has the xterm moves its pointer there and focuses it
        click(b, 120, 60)
        wait_for(lambda: near(_shell(c, "xdotool getmouselocation"), 120, 60),
                 what=lambda: f"pointer at 120,60: {_shell(c, 'xdotool getmouselocation')}, events "
                              f"{read_events(events)[-5:]}, {(events.parent / 'x11vnc.log').read_text()[-800:]}")
        type_text(b, "hi there\r")
        typed = wait_for(lambda: _shell(c, "cat ~/typed.txt 2>/dev/null"), what="typed text in the xterm")
        assert typed == "hi there\n"
        # what the trusted side recorded reads back as the computer tool's actions
        acts = to_actions(read_events(events, since=n0), Scale.identity(W, H))
        assert acts[0]["action"] == "left_click" and near("x:{} y:{}".format(*acts[0]["coordinate"]), 120, 60)
        assert {"action": "type", "text": "hi there"} in acts and {"action": "key", "text": "Return"} in acts
        page = Image.open(io.BytesIO(b.screenshot())).convert("RGB")
        keep = Path(os.environ.get("CONTROL_OSWORLD_TEST_ARTEFACTS", tmp_path))
        keep.mkdir(parents=True, exist_ok=True)
        page.save(keep / "takeover_page.png")
        print(f"page screenshot: {keep / 'takeover_page.png'}")
    finally:
        b.close()
        _shell(c, "pkill -x xterm; true")
