"""A person's recorded input events as computer-tool actions (desktop/human_input.py), and
x11vnc's pipeinput lines as events (desktop/inputpipe.py)."""

from __future__ import annotations

import json

from control_osworld.desktop.actions import Scale, from_computer_tool
from control_osworld.desktop.human_input import read_events, to_actions
from control_osworld.desktop.inputpipe import parse

IDENTITY = Scale.identity(800, 600)


def ptr(x, y, mask, t=0.0):
    return {"type": "pointer", "x": x, "y": y, "mask": mask, "t": t}


def key(name, keysym, down=True, t=0.0):
    return {"type": "key", "down": down, "keysym": keysym, "name": name, "t": t}


def tap(name, keysym):
    return [key(name, keysym), key(name, keysym, False)]


def test_pipeinput_lines():
    assert parse("Pointer 3 10 20 1 ButtonPress-1") == {"type": "pointer", "x": 10, "y": 20, "mask": 1}
    assert parse("Keysym 3 1 97 a KeyPress") == {"type": "key", "down": True, "keysym": 97, "name": "a"}
    assert parse("Keysym -3 1 97 a KeyPress") is None  # a view-only client's event: x11vnc marks it
    assert parse("# Format of the -pipeinput stream:") is None
    assert parse("Pointer x y") is None


def test_clicks_drags_scrolls_and_multi_clicks():
    ev = [ptr(5, 5, 0), ptr(100, 50, 0), ptr(100, 50, 1, 1.0), ptr(100, 50, 0, 1.05),
          ptr(300, 300, 4, 3.0), ptr(300, 300, 0, 3.1),
          ptr(10, 10, 1, 5.0), ptr(200, 220, 1, 5.2), ptr(200, 220, 0, 5.3),
          ptr(40, 40, 16, 6.0), ptr(40, 40, 0, 6.0), ptr(40, 40, 16, 6.1), ptr(40, 40, 0, 6.1),
          ptr(60, 60, 1, 8.0), ptr(60, 60, 0, 8.05), ptr(61, 60, 1, 8.2), ptr(61, 60, 0, 8.25),
          ptr(60, 60, 1, 8.4), ptr(60, 60, 0, 8.45)]
    assert to_actions(ev, IDENTITY) == [
        {"action": "left_click", "coordinate": [100, 50]},
        {"action": "right_click", "coordinate": [300, 300]},
        {"action": "left_click_drag", "start_coordinate": [10, 10], "coordinate": [200, 220]},
        {"action": "scroll", "coordinate": [40, 40], "scroll_direction": "down", "scroll_amount": 2},
        {"action": "triple_click", "coordinate": [60, 60]},
    ]
    # two clicks far apart in time are two clicks
    assert [a["action"] for a in to_actions([ptr(9, 9, 1, 0), ptr(9, 9, 0, 0), ptr(9, 9, 1, 2), ptr(9, 9, 0, 2)],
                                            IDENTITY)] == ["left_click", "left_click"]


def test_typing_keys_and_chords():
    ev = [*tap("h", 0x68), key("Shift_L", 0xFFE1), *tap("I", 0x49), key("Shift_L", 0xFFE1, False),
          *tap("space", 0x20), *tap("eacute", 0xE9), *tap("Return", 0xFF0D),
          key("Control_L", 0xFFE3), *tap("s", 0x73), key("Control_L", 0xFFE3, False),
          key("Control_L", 0xFFE3), key("Shift_L", 0xFFE1), *tap("Tab", 0xFF09),
          key("Shift_L", 0xFFE1, False), key("Control_L", 0xFFE3, False), *tap("x", 0x78)]
    assert to_actions(ev, IDENTITY) == [
        {"action": "type", "text": "hI é"}, {"action": "key", "text": "Return"},
        {"action": "key", "text": "ctrl+s"}, {"action": "key", "text": "ctrl+shift+Tab"},
        {"action": "type", "text": "x"},
    ]


def test_actions_are_in_the_models_space_and_valid_for_the_computer_tool():
    scale = Scale(1366, 768, 1920, 1080)
    acts = to_actions([ptr(1920 // 2, 1080 // 2, 1), ptr(1920 // 2, 1080 // 2, 0), *tap("a", 0x61)], scale)
    assert acts[0] == {"action": "left_click", "coordinate": [683, 384]}
    for a in acts:  # the computer tool's own parser takes every one
        assert from_computer_tool(a, scale).code


def test_read_events_leaves_a_torn_line(tmp_path):
    f = tmp_path / "events.jsonl"
    assert read_events(f) == []
    f.write_text(json.dumps(ptr(1, 2, 0)) + "\n" + json.dumps(ptr(3, 4, 0)) + "\n" + '{"type": "poi')
    assert [e["x"] for e in read_events(f)] == [1, 3]
    assert [e["x"] for e in read_events(f, since=1)] == [3]
