"""Actions in three vocabularies, all turned into pyautogui code for the desktop's executor.

- inspect's `computer` tool (`key`, `type`, `mouse_move`, clicks, drags, `scroll`, `wait`,
  `screenshot`, `zoom`, ...; xdotool key names), the schema Anthropic's and OpenAI's native
  computer use map onto;
- OSWorld's `computer_13` (`{"action_type": "CLICK", "x": .., "y": ..}`, ...);
- OSWorld's `pyautogui` space (code strings, passed through; `check_pyautogui`).

The oracles (computer-tool calls) translate into the other two spaces:
`computer_call_to_pyautogui`, `computer_call_to_computer_13`.

Coordinates arrive in the model's resolution and are scaled to the screen's with `Scale`.
`to_pyautogui` returns `Action(code, wait_s, screenshot_region)`; a `None` code means nothing
runs on the desktop (`screenshot`, `cursor_position`, `wait`, `zoom`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# xdotool keysym (as models write them) -> pyautogui key name.
_KEYS = {
    "return": "enter", "kp_enter": "enter", "escape": "esc", "backspace": "backspace", "tab": "tab",
    "prior": "pageup", "next": "pagedown", "page_up": "pageup", "page_down": "pagedown",
    "delete": "delete", "insert": "insert", "home": "home", "end": "end", "space": "space",
    "up": "up", "down": "down", "left": "left", "right": "right",
    "shift": "shift", "shift_l": "shiftleft", "shift_r": "shiftright",
    "control": "ctrl", "ctrl": "ctrl", "control_l": "ctrlleft", "control_r": "ctrlright",
    "alt": "alt", "alt_l": "altleft", "alt_r": "altright", "super": "win", "super_l": "winleft",
    "super_r": "winright", "meta": "win", "cmd": "win", "win": "win",
    "caps_lock": "capslock", "num_lock": "numlock", "scroll_lock": "scrolllock", "pause": "pause",
    "print": "printscreen", "menu": "apps",
    "kp_multiply": "multiply", "kp_add": "add", "kp_subtract": "subtract", "kp_divide": "divide",
    "kp_decimal": "decimal", "kp_equal": "=", "kp_home": "home", "kp_end": "end", "kp_up": "up",
    "kp_down": "down", "kp_left": "left", "kp_right": "right", "kp_prior": "pageup", "kp_next": "pagedown",
    "kp_insert": "insert", "kp_delete": "delete", "kp_begin": "clear",
    "minus": "-", "plus": "+", "equal": "=", "comma": ",", "period": ".", "slash": "/",
    "backslash": "\\", "semicolon": ";", "apostrophe": "'", "grave": "`", "bracketleft": "[",
    "bracketright": "]", "enter": "enter", "esc": "esc", "pageup": "pageup", "pagedown": "pagedown",
}
_KEYS.update({f"kp_{i}": f"num{i}" for i in range(10)})
_KEYS.update({f"f{i}": f"f{i}" for i in range(1, 25)})


class ActionError(ValueError):
    """An action the model sent cannot be carried out as given (bad name, missing field)."""


def key_name(key: str) -> str:
    k = key.strip()
    low = k.lower()
    if low in _KEYS:
        return _KEYS[low]
    if len(k) == 1:
        return k.lower() if k.isalpha() else k
    raise ActionError(f"unknown key {key!r}")


def key_combo(text: str) -> list[str]:
    """'ctrl+s' / 'ctrl+shift+Tab' / 'Return' -> pyautogui key names (a lone '+' is the key)."""
    if text == "+":
        return ["+"]
    parts = [p for p in text.replace(" ", "").split("+")] if "+" in text.strip("+") else [text]
    return [key_name(p) for p in parts if p]


@dataclass(frozen=True)
class Scale:
    """Model-space <-> screen-space coordinates (models see a resized screenshot)."""

    model_width: int
    model_height: int
    screen_width: int
    screen_height: int

    @classmethod
    def identity(cls, w: int, h: int) -> "Scale":
        return cls(w, h, w, h)

    def to_screen(self, xy: Any) -> tuple[int, int]:
        try:
            x, y = (float(v) for v in xy)
        except (TypeError, ValueError):
            raise ActionError(f"coordinate must be [x, y], got {xy!r}") from None
        sx = round(x * self.screen_width / self.model_width)
        sy = round(y * self.screen_height / self.model_height)
        return min(max(sx, 0), self.screen_width - 1), min(max(sy, 0), self.screen_height - 1)

    def to_model(self, x: float, y: float) -> tuple[int, int]:
        return round(x * self.model_width / self.screen_width), round(y * self.model_height / self.screen_height)


@dataclass(frozen=True)
class Action:
    code: str | None
    wait_s: float = 0.0
    zoom_region: tuple[int, int, int, int] | None = None
    returns_cursor: bool = False


def _need(args: dict, name: str) -> Any:
    v = args.get(name)
    if v is None or v == "":
        raise ActionError(f"action {args.get('action')!r} needs {name!r}")
    return v


def _xy(args: dict, scale: Scale, name: str = "coordinate") -> tuple[int, int]:
    return scale.to_screen(_need(args, name))


def _move_then(args: dict, scale: Scale, call: str) -> str:
    if args.get("coordinate") is not None:
        x, y = _xy(args, scale)
        return f"pyautogui.{call}({x}, {y})"
    return f"pyautogui.{call}()"


def _with_modifiers(code: str, text: str | None) -> str:
    """Clicks and scrolls may carry held keys in `text` (Anthropic: 'shift', 'ctrl')."""
    if not text:
        return code
    keys = key_combo(text)
    down = "; ".join(f"pyautogui.keyDown({k!r})" for k in keys)
    up = "; ".join(f"pyautogui.keyUp({k!r})" for k in reversed(keys))
    return f"{down}; {code}; {up}"


def from_computer_tool(args: dict, scale: Scale) -> Action:
    """One call of inspect's `computer` tool (its parameter names) -> pyautogui code."""
    action = args.get("action")
    t = args.get("text")
    if action == "key":
        keys = key_combo(_need(args, "text"))
        repeat = int(args.get("repeat") or 1)
        one = f"pyautogui.hotkey({', '.join(repr(k) for k in keys)})" if len(keys) > 1 else f"pyautogui.press({keys[0]!r})"
        return Action("; ".join([one] * repeat))
    if action == "hold_key":
        keys = key_combo(_need(args, "text"))
        secs = float(args.get("duration") or 1)
        down = "; ".join(f"pyautogui.keyDown({k!r})" for k in keys)
        up = "; ".join(f"pyautogui.keyUp({k!r})" for k in reversed(keys))
        return Action(f"import time; {down}; time.sleep({secs}); {up}")
    if action == "type":
        text = _need(args, "text")
        code = f"pyautogui.write({text!r})"
        if args.get("coordinate") is not None:  # inspect's tool clicks there first
            x, y = _xy(args, scale)
            code = f"pyautogui.click({x}, {y}); " + code
        if args.get("press_enter"):
            code += "; pyautogui.press('enter')"
        return Action(code)
    if action == "mouse_move":
        x, y = _xy(args, scale)
        return Action(f"pyautogui.moveTo({x}, {y})")
    clicks = {"left_click": "click", "right_click": "rightClick", "middle_click": "middleClick",
              "double_click": "doubleClick", "triple_click": "tripleClick"}
    if action in clicks:
        return Action(_with_modifiers(_move_then(args, scale, clicks[action]), t))
    if action in ("back_click", "forward_click"):
        button = 8 if action == "back_click" else 9
        pre = ""
        if args.get("coordinate") is not None:
            x, y = _xy(args, scale)
            pre = f"pyautogui.moveTo({x}, {y}); "
        return Action(pre + f"import subprocess; subprocess.run(['xdotool', 'click', '{button}'])")
    if action == "left_mouse_down":
        return Action("pyautogui.mouseDown(button='left')")
    if action == "left_mouse_up":
        return Action("pyautogui.mouseUp(button='left')")
    if action == "left_click_drag":
        x, y = _xy(args, scale)
        start = ""
        if args.get("start_coordinate") is not None:
            sx, sy = _xy(args, scale, "start_coordinate")
            start = f"pyautogui.moveTo({sx}, {sy}); "
        return Action(start + f"pyautogui.dragTo({x}, {y}, duration=0.2, button='left')")
    if action == "scroll":
        direction = _need(args, "scroll_direction")
        amount = int(args.get("scroll_amount") or 3)
        move = ""
        if args.get("coordinate") is not None:
            x, y = _xy(args, scale)
            move = f"pyautogui.moveTo({x}, {y}); "
        if direction in ("up", "down"):
            call = f"pyautogui.scroll({amount if direction == 'up' else -amount})"
        elif direction in ("left", "right"):
            call = f"pyautogui.hscroll({amount if direction == 'right' else -amount})"
        else:
            raise ActionError(f"scroll_direction must be up, down, left or right, not {direction!r}")
        return Action(_with_modifiers(move + call, t))
    if action == "wait":
        return Action(None, wait_s=float(args.get("duration") or 1))
    if action == "screenshot":
        return Action(None)
    if action == "cursor_position":
        return Action(None, returns_cursor=True)
    if action == "zoom":
        region = _need(args, "region")
        if not (isinstance(region, (list, tuple)) and len(region) == 4):
            raise ActionError(f"zoom region must be [x0, y0, x1, y1], got {region!r}")
        x0, y0 = scale.to_screen(region[:2])
        x1, y1 = scale.to_screen(region[2:])
        return Action(None, zoom_region=(x0, y0, x1, y1))
    raise ActionError(f"unknown computer action {action!r}")


COMPUTER_13: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "MOVE_TO": (("x", "y"), ()), "CLICK": ((), ("button", "x", "y", "num_clicks")),
    "MOUSE_DOWN": ((), ("button",)), "MOUSE_UP": ((), ("button",)), "RIGHT_CLICK": ((), ("x", "y")),
    "DOUBLE_CLICK": ((), ("x", "y")), "DRAG_TO": (("x", "y"), ()), "SCROLL": ((), ("dx", "dy")),
    "TYPING": (("text",), ()), "PRESS": (("key",), ()), "KEY_DOWN": (("key",), ()), "KEY_UP": (("key",), ()),
    "HOTKEY": (("keys",), ()), "WAIT": ((), ("seconds",)), "FAIL": ((), ()), "DONE": ((), ()),
}
"""Upstream's computer_13 ACTION_SPACE (desktop_env/actions.py): action type -> (required,
optional) parameters. `WAIT` may carry `seconds` (ours; upstream waits a fixed time)."""


def _c13_params(action: dict) -> tuple[str, dict]:
    """Check a computer_13 dict against COMPUTER_13 -> (action type, parameters)."""
    kind = action.get("action_type")
    if not isinstance(kind, str) or kind not in COMPUTER_13:
        raise ActionError(f"unknown computer_13 action_type {kind!r}; known: {', '.join(COMPUTER_13)}")
    if "parameters" in action:
        p = action["parameters"]
        if p is None:
            p = {}
        if not isinstance(p, dict):
            raise ActionError(f"{kind}: `parameters` must be a dict, got {p!r}")
        extra = set(action) - {"action_type", "parameters"}
    else:
        p = {k: v for k, v in action.items() if k != "action_type"}
        extra = set()
    required, optional = COMPUTER_13[kind]
    extra |= set(p) - set(required) - set(optional)
    if extra:
        raise ActionError(f"{kind}: unknown parameter(s) {', '.join(sorted(extra))}; "
                          f"it takes {', '.join(required + optional) or 'none'}")
    missing = [k for k in required if p.get(k) is None]
    if missing:
        raise ActionError(f"{kind} needs {', '.join(missing)}")
    if ("x" in p) != ("y" in p):
        raise ActionError(f"{kind}: give both x and y, or neither")
    for k in ("x", "y", "dx", "dy", "num_clicks", "seconds"):
        if k in p and (isinstance(p[k], bool) or not isinstance(p[k], (int, float))):
            raise ActionError(f"{kind}: {k} must be a number, got {p[k]!r}")
    if kind == "SCROLL" and "dx" not in p and "dy" not in p:
        raise ActionError("SCROLL needs dx or dy")
    if "button" in p and p["button"] not in ("left", "right", "middle"):
        raise ActionError(f"{kind}: button must be left, right or middle, got {p['button']!r}")
    if "num_clicks" in p and p["num_clicks"] not in (1, 2, 3):
        raise ActionError(f"{kind}: num_clicks must be 1, 2 or 3, got {p['num_clicks']!r}")
    for k in ("text", "key"):
        if k in p and (not isinstance(p[k], str) or (k == "key" and not p[k])):
            raise ActionError(f"{kind}: {k} must be a {'non-empty ' if k == 'key' else ''}string, got {p[k]!r}")
    if "keys" in p and not (isinstance(p["keys"], list) and p["keys"] and all(isinstance(k, str) and k for k in p["keys"])):
        raise ActionError(f"{kind}: keys must be a non-empty list of key names, got {p['keys']!r}")
    if "seconds" in p and not 0 <= p["seconds"] <= 60:
        raise ActionError(f"{kind}: seconds must be between 0 and 60, got {p['seconds']!r}")
    return kind, p


def from_computer_13(action: dict, scale: Scale | None = None) -> Action:
    """OSWorld's computer_13 action dict (upstream desktop_env/actions.py) -> pyautogui code.
    Raises ActionError for anything upstream's ACTION_SPACE does not allow."""
    if not isinstance(action, dict):
        raise ActionError(f"a computer_13 action is a dict with `action_type`, got {action!r}")
    kind, p = _c13_params(action)
    sc = scale or Scale.identity(10**6, 10**6)

    def xy() -> str:
        if "x" in p and "y" in p:
            x, y = sc.to_screen((p["x"], p["y"]))
            return f"{x}, {y}"
        return ""

    button = repr(p.get("button", "left"))
    if kind == "MOVE_TO":
        return Action(f"pyautogui.moveTo({xy()})")
    if kind == "CLICK":
        n = int(p.get("num_clicks", 1))
        at = f"{xy()}, " if xy() else ""
        return Action(f"pyautogui.click({at}button={button}, clicks={n})")
    if kind in ("MOUSE_DOWN", "MOUSE_UP"):
        return Action(f"pyautogui.{'mouseDown' if kind == 'MOUSE_DOWN' else 'mouseUp'}(button={button})")
    if kind in ("RIGHT_CLICK", "DOUBLE_CLICK"):
        return Action(f"pyautogui.{'rightClick' if kind == 'RIGHT_CLICK' else 'doubleClick'}({xy()})")
    if kind == "DRAG_TO":
        return Action(f"pyautogui.dragTo({xy()}, duration=0.2, button='left')")
    if kind == "SCROLL":
        code = []
        if p.get("dy"):
            code.append(f"pyautogui.scroll({int(p['dy'])})")
        if p.get("dx"):
            code.append(f"pyautogui.hscroll({int(p['dx'])})")
        return Action("; ".join(code) or "pass")
    if kind == "TYPING":
        return Action(f"pyautogui.write({p['text']!r})")
    if kind in ("PRESS", "KEY_DOWN", "KEY_UP"):
        fn = {"PRESS": "press", "KEY_DOWN": "keyDown", "KEY_UP": "keyUp"}[kind]
        return Action(f"pyautogui.{fn}({p['key']!r})")
    if kind == "HOTKEY":
        return Action(f"pyautogui.hotkey({', '.join(repr(k) for k in p['keys'])})")
    if kind == "WAIT":
        return Action(None, wait_s=float(p.get("seconds", 1)))
    return Action(None)  # DONE, FAIL


SPECIAL_CODES = ("WAIT", "DONE", "FAIL")
"""OSWorld's special codes in the pyautogui space (mm_agents/agent.py)."""


def check_pyautogui(code: object) -> str | None:
    """A pyautogui-space action: the special code it is (WAIT/DONE/FAIL), or None for code that
    parses. Raises ActionError for anything else (not a string, empty, a syntax error)."""
    if not isinstance(code, str):
        raise ActionError(f"code must be a string, got {type(code).__name__}")
    if not code.strip():
        raise ActionError("code is empty; give Python code, or WAIT, DONE or FAIL")
    if code.strip() in SPECIAL_CODES:
        return code.strip()
    try:
        compile(code, "<action>", "exec")
    except SyntaxError as e:
        raise ActionError(f"the code does not parse: line {e.lineno}: {e.msg}") from None
    except ValueError as e:  # e.g. a NUL byte
        raise ActionError(f"the code does not parse: {e}") from None
    return None


def computer_call_to_pyautogui(calls: list[dict], scale: Scale) -> str:
    """Computer-tool calls (screen coordinates when `scale` is the identity) as one pyautogui-space
    code string, in order; waits become `time.sleep`; a turn that only looks is `WAIT`."""
    lines: list[str] = []
    for args in calls:
        act = from_computer_tool(args, scale)
        if act.wait_s:
            lines.append(f"time.sleep({act.wait_s})")
        if act.code is not None:
            lines.append(act.code)
    return "\n".join(lines) or "WAIT"


def computer_call_to_computer_13(args: dict, scale: Scale) -> list[dict]:
    """One computer-tool call -> upstream computer_13 dicts doing the same (screenshot, zoom and
    cursor_position: nothing). Raises ActionError where computer_13 has no equivalent."""
    action = args.get("action")

    def at(name: str = "coordinate") -> dict:
        x, y = _xy(args, scale, name)
        return {"x": x, "y": y}

    def mods(inner: list[dict]) -> list[dict]:
        if not args.get("text"):
            return inner
        keys = key_combo(args["text"])
        return ([{"action_type": "KEY_DOWN", "parameters": {"key": k}} for k in keys] + inner
                + [{"action_type": "KEY_UP", "parameters": {"key": k}} for k in reversed(keys)])

    where = at() if args.get("coordinate") is not None else {}
    if action == "key":
        keys = key_combo(_need(args, "text"))
        one = ({"action_type": "HOTKEY", "parameters": {"keys": keys}} if len(keys) > 1
               else {"action_type": "PRESS", "parameters": {"key": keys[0]}})
        return [dict(one) for _ in range(int(args.get("repeat") or 1))]
    if action == "hold_key":
        keys = key_combo(_need(args, "text"))
        return ([{"action_type": "KEY_DOWN", "parameters": {"key": k}} for k in keys]
                + [{"action_type": "WAIT", "parameters": {"seconds": float(args.get("duration") or 1)}}]
                + [{"action_type": "KEY_UP", "parameters": {"key": k}} for k in reversed(keys)])
    if action == "type":
        out = [{"action_type": "CLICK", "parameters": where}] if where else []
        out.append({"action_type": "TYPING", "parameters": {"text": _need(args, "text")}})
        if args.get("press_enter"):
            out.append({"action_type": "PRESS", "parameters": {"key": "enter"}})
        return out
    if action == "mouse_move":
        return [{"action_type": "MOVE_TO", "parameters": at()}]
    if action == "left_click":
        return mods([{"action_type": "CLICK", "parameters": where}])
    if action == "middle_click":
        return mods([{"action_type": "CLICK", "parameters": where | {"button": "middle"}}])
    if action == "triple_click":
        return mods([{"action_type": "CLICK", "parameters": where | {"num_clicks": 3}}])
    if action in ("right_click", "double_click"):
        return mods([{"action_type": action.upper(), "parameters": where}])
    if action in ("left_mouse_down", "left_mouse_up"):
        return [{"action_type": "MOUSE_DOWN" if action == "left_mouse_down" else "MOUSE_UP",
                 "parameters": {"button": "left"}}]
    if action == "left_click_drag":
        start = ([{"action_type": "MOVE_TO", "parameters": at("start_coordinate")}]
                 if args.get("start_coordinate") is not None else [])
        return start + [{"action_type": "DRAG_TO", "parameters": at()}]
    if action == "scroll":
        direction = _need(args, "scroll_direction")
        amount = int(args.get("scroll_amount") or 3)
        delta = {"up": {"dy": amount}, "down": {"dy": -amount}, "right": {"dx": amount}, "left": {"dx": -amount}}
        if direction not in delta:
            raise ActionError(f"scroll_direction must be up, down, left or right, not {direction!r}")
        move = [{"action_type": "MOVE_TO", "parameters": where}] if where else []
        return mods(move + [{"action_type": "SCROLL", "parameters": delta[direction]}])
    if action == "wait":
        return [{"action_type": "WAIT", "parameters": {"seconds": float(args.get("duration") or 1)}}]
    if action in ("screenshot", "cursor_position", "zoom"):
        return []
    raise ActionError(f"computer action {action!r} has no computer_13 equivalent")


def from_pyautogui(code: str) -> Action:
    """OSWorld's pyautogui space: code runs as given; WAIT/DONE/FAIL are special words."""
    word = code.strip().upper()
    if word == "WAIT":
        return Action(None, wait_s=1.0)
    if word in ("DONE", "FAIL"):
        return Action(None)
    return Action(code)
