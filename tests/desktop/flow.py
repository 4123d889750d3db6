"""The end-to-end flow every provider must pass: launch an app, type into it, save, read the
file back, take a screenshot of the right size, find the app's window in the
accessibility tree."""

from __future__ import annotations

import io
import time
import uuid

from PIL import Image

from control_osworld.desktop import DesktopClient
from tests.desktop.conftest import wait_for


def editor_flow(c: DesktopClient) -> None:
    path = f"/home/user/Documents/note-{uuid.uuid4().hex[:6]}.txt"
    text = "hello from the control loop"
    c.launch(["mousepad"])
    title = wait_for(lambda: "mousepad" in c.execute(["wmctrl", "-lx"])["output"].lower(), 30)
    assert title, "mousepad's window never appeared"
    time.sleep(0.5)  # the window exists before it takes keyboard focus
    c.activate_window("mousepad", by_class=True)
    r = c.run_python(f"pyautogui.write({text!r}); pyautogui.hotkey('ctrl', 's')")
    assert r["returncode"] == 0, r
    assert wait_for(lambda: "save as" in c.execute(["wmctrl", "-l"])["output"].lower(), 15), "no save dialog"
    c.run_python(f"pyautogui.hotkey('ctrl', 'a'); pyautogui.write({path!r}); pyautogui.press('enter')")
    # GTK's file chooser sometimes swallows the first Enter after a typed path.
    if not wait_for(lambda: c.read_file(path) is not None, 3):
        c.run_python("pyautogui.press('enter')")
    data = wait_for(lambda: c.read_file(path), 15)
    assert data is not None and data.decode().rstrip("\n") == text

    w, h = c.screen_size()
    png = c.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(png)).size == (w, h)

    tree = c.accessibility_tree()
    assert tree.startswith("<desktop-frame")
    assert 'name="mousepad"' in tree and "https://accessibility.ubuntu.example.org/ns/state" in tree
    c.close_window("mousepad", by_class=True)
