"""Translation of inspect's computer actions, computer_13 and pyautogui into executor code."""

from __future__ import annotations

import pytest

from control_osworld.desktop.actions import (
    ActionError,
    Scale,
    from_computer_13,
    from_computer_tool,
    from_pyautogui,
    key_combo,
)

S = Scale(1366, 768, 1920, 1080)
ID = Scale.identity(1920, 1080)


def test_scaling_maps_model_space_to_screen():
    assert S.to_screen([683, 384]) == (960, 540)
    assert S.to_screen([1366, 768]) == (1919, 1079)  # clamped onto the screen
    assert S.to_screen([0, 0]) == (0, 0)
    assert S.to_model(960, 540) == (683, 384)
    with pytest.raises(ActionError):
        S.to_screen("nope")


@pytest.mark.parametrize("text,keys", [
    ("ctrl+s", ["ctrl", "s"]), ("Return", ["enter"]), ("alt+Tab", ["alt", "tab"]),
    ("KP_0", ["num0"]), ("Prior", ["pageup"]), ("ctrl+shift+Escape", ["ctrl", "shift", "esc"]),
    ("+", ["+"]), ("F5", ["f5"]), ("A", ["a"]), ("super", ["win"]),
])
def test_xdotool_keys(text, keys):
    assert key_combo(text) == keys


def test_unknown_key_is_an_error():
    with pytest.raises(ActionError, match="unknown key"):
        key_combo("ctrl+Hyperdrive")


def test_computer_tool_actions():
    assert from_computer_tool({"action": "left_click", "coordinate": [683, 384]}, S).code == "pyautogui.click(960, 540)"
    assert from_computer_tool({"action": "key", "text": "ctrl+s"}, S).code == "pyautogui.hotkey('ctrl', 's')"
    assert from_computer_tool({"action": "key", "text": "Return", "repeat": 2}, S).code == \
        "pyautogui.press('enter'); pyautogui.press('enter')"
    assert from_computer_tool({"action": "type", "text": "a'b"}, S).code == "pyautogui.write(\"a'b\")"
    drag = from_computer_tool({"action": "left_click_drag", "start_coordinate": [0, 0], "coordinate": [683, 384]}, S)
    assert drag.code == "pyautogui.moveTo(0, 0); pyautogui.dragTo(960, 540, duration=0.2, button='left')"
    sc = from_computer_tool({"action": "scroll", "coordinate": [10, 10], "scroll_direction": "down",
                             "scroll_amount": 5}, ID)
    assert sc.code == "pyautogui.moveTo(10, 10); pyautogui.scroll(-5)"
    shift_click = from_computer_tool({"action": "left_click", "coordinate": [1, 1], "text": "shift"}, ID)
    assert shift_click.code == "pyautogui.keyDown('shift'); pyautogui.click(1, 1); pyautogui.keyUp('shift')"
    assert from_computer_tool({"action": "wait", "duration": 2}, S).wait_s == 2
    assert from_computer_tool({"action": "screenshot"}, S).code is None
    z = from_computer_tool({"action": "zoom", "region": [0, 0, 683, 384]}, S)
    assert z.code is None and z.zoom_region == (0, 0, 960, 540)
    assert from_computer_tool({"action": "cursor_position"}, S).returns_cursor


@pytest.mark.parametrize("args,msg", [
    ({"action": "fly"}, "unknown computer action"),
    ({"action": "type"}, "needs 'text'"),
    ({"action": "mouse_move"}, "needs 'coordinate'"),
    ({"action": "scroll", "scroll_direction": "sideways"}, "scroll_direction"),
    ({"action": "zoom", "region": [1, 2]}, "zoom region"),
])
def test_bad_computer_actions(args, msg):
    with pytest.raises(ActionError, match=msg):
        from_computer_tool(args, S)


def test_computer_13():
    assert from_computer_13({"action_type": "CLICK", "parameters": {"x": 5, "y": 6, "num_clicks": 2}}).code == \
        "pyautogui.click(5, 6, button='left', clicks=2)"
    assert from_computer_13({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "c"]}}).code == \
        "pyautogui.hotkey('ctrl', 'c')"
    assert from_computer_13({"action_type": "SCROLL", "parameters": {"dy": -3}}).code == "pyautogui.scroll(-3)"
    assert from_computer_13({"action_type": "TYPING", "parameters": {"text": "hi"}}).code == "pyautogui.write('hi')"
    assert from_computer_13({"action_type": "WAIT"}).wait_s == 1
    with pytest.raises(ActionError):
        from_computer_13({"action_type": "TELEPORT"})


def test_pyautogui_space():
    assert from_pyautogui("pyautogui.click(1, 2)").code == "pyautogui.click(1, 2)"
    assert from_pyautogui("WAIT").wait_s == 1 and from_pyautogui("DONE").code is None
