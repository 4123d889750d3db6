"""Observations from a real desktop's accessibility tree (GET /accessibility, read through the
agent's session): the linearised table lists the editor's interactive elements at their screen
geometry, and set-of-marks boxes them on the real screenshot."""

from __future__ import annotations

import pytest

from control_osworld.agent import a11y
from tests.desktop.conftest import wait_for

pytestmark = [pytest.mark.desktop]


def test_a_real_tree_linearises_and_tags(client):
    client.launch(["mousepad"])
    assert wait_for(lambda: "mousepad" in client.execute(["wmctrl", "-lx"])["output"].lower(), 30)

    def table():
        t = a11y.linearize(client.accessibility_tree())
        return t if "menu" in t else None
    text = wait_for(table, 30)
    assert text, "no menu of the editor in the accessibility table"
    rows = [r.split("\t") for r in text.split("\n")[1:]]
    assert rows and all(len(r) == 7 for r in rows)
    w, h = client.screen_size()
    for r in rows:  # every kept element is on the screen, with a positive size
        (x, y), (bw, bh) = a11y._pair(r[5]), a11y._pair(r[6])
        assert 0 <= x < w and 0 <= y < h and bw > 0 and bh > 0
    assert any(r[0].endswith("menu") or r[0].endswith("menu-item") for r in rows)
    marks = a11y.tag_screenshot(client.screenshot(), client.accessibility_tree())
    assert marks.boxes and len(marks.table.split("\n")) == len(marks.boxes) + 1
