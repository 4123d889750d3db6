"""A person's input events (recorded by the trusted side: desktop/inputpipe.py) as actions in
the computer tool's vocabulary, so that a human step reads like a model's in the trajectory.

Pointer: a button-1 press and release at one place is `left_click` (two or three in quick
succession at one place: `double_click`, `triple_click`), at two places `left_click_drag`;
buttons 2 and 3 are `middle_click` and `right_click`; wheel buttons 4-7 are `scroll` (up, down,
left, right; consecutive notches at one place merged). Pointer motion alone is not an action.
Keys: printable characters typed without Control, Alt or Super run together into one `type`;
any other key (Return, BackSpace, arrows, ...) or a chord is a `key` with xdotool names
(`ctrl+s`, `Return`). Coordinates are in the model's space (`Scale.to_model`).
"""

from __future__ import annotations

import json
from pathlib import Path

from control_osworld.desktop.actions import Scale

MODIFIERS = {
    "Shift_L": "shift", "Shift_R": "shift", "Control_L": "ctrl", "Control_R": "ctrl", "Alt_L": "alt",
    "Alt_R": "alt", "Meta_L": "alt", "Meta_R": "alt", "Super_L": "super", "Super_R": "super",
    "ISO_Level3_Shift": "altgr",
}
MULTI_CLICK_S = 0.5
DRAG_PX = 5
WHEEL = {4: "up", 5: "down", 6: "left", 7: "right"}
CLICKS = {1: "left_click", 2: "middle_click", 3: "right_click"}


def read_events(path: Path, since: int = 0) -> list[dict]:
    """The events recorded in `path` from line `since` on (a torn last line is left for later)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except FileNotFoundError:
        return []
    out = []
    for ln in lines[since:]:
        if not ln.endswith("\n"):
            break
        out.append(json.loads(ln))
    return out


def _char(ev: dict) -> str | None:
    k = ev["keysym"]
    if 0x20 <= k <= 0x7E or 0xA0 <= k <= 0xFF:
        return chr(k)
    if 0x1000100 <= k <= 0x110FFFF:
        return chr(k - 0x1000000)
    return None


def to_actions(events: list[dict], scale: Scale) -> list[dict]:
    """`events` (inputpipe's records, in order) as computer-tool action dicts."""
    out: list[dict] = []
    typed: list[str] = []
    held: list[str] = []
    mask = 0
    press_at: dict[int, tuple[int, int]] = {}
    last_click: tuple[float, tuple[int, int], int] | None = None  # time, place, count

    def flush_typing() -> None:
        if typed:
            out.append({"action": "type", "text": "".join(typed)})
            typed.clear()

    def at(x: int, y: int) -> list[int]:
        return list(scale.to_model(x, y))

    for ev in events:
        if ev.get("dropped"):
            continue  # arrived while the gate was closed: never reached the desktop
        kind = ev.get("type")
        if kind == "pointer":
            x, y, new = int(ev["x"]), int(ev["y"]), int(ev["mask"])
            for b in range(1, 8):
                bit = 1 << (b - 1)
                if not (new ^ mask) & bit:
                    continue
                down = bool(new & bit)
                if b in WHEEL:
                    if down:
                        flush_typing()
                        prev = out[-1] if out else None
                        if (prev and prev["action"] == "scroll" and prev["scroll_direction"] == WHEEL[b]
                                and prev["coordinate"] == at(x, y)):
                            prev["scroll_amount"] += 1
                        else:
                            out.append({"action": "scroll", "coordinate": at(x, y), "scroll_direction": WHEEL[b],
                                        "scroll_amount": 1})
                    continue
                if down:
                    press_at[b] = (x, y)
                    continue
                flush_typing()
                x0, y0 = press_at.pop(b, (x, y))
                if b == 1 and max(abs(x - x0), abs(y - y0)) > DRAG_PX:
                    out.append({"action": "left_click_drag", "start_coordinate": at(x0, y0), "coordinate": at(x, y)})
                    last_click = None
                    continue
                if b not in CLICKS:
                    continue
                t = float(ev.get("t", 0.0))
                if (b == 1 and last_click and out and out[-1]["action"] in ("left_click", "double_click")
                        and t - last_click[0] <= MULTI_CLICK_S
                        and max(abs(x - last_click[1][0]), abs(y - last_click[1][1])) <= DRAG_PX
                        and last_click[2] < 3):
                    n = last_click[2] + 1
                    out[-1] = {"action": "double_click" if n == 2 else "triple_click", "coordinate": at(x0, y0)}
                    last_click = (t, (x0, y0), n)
                    continue
                out.append({"action": CLICKS[b], "coordinate": at(x0, y0)})
                last_click = (t, (x0, y0), 1) if b == 1 else None
            mask = new
        elif kind == "key":
            name = str(ev["name"])
            if name in MODIFIERS:
                mod = MODIFIERS[name]
                if ev["down"] and mod not in held:
                    held.append(mod)
                elif not ev["down"] and mod in held:
                    held.remove(mod)
                continue
            if not ev["down"]:
                continue
            ch = _char(ev)
            chord = [m for m in held if m not in ("shift", "altgr")]
            if ch is not None and not chord:
                typed.append(ch)
                continue
            flush_typing()
            key = name.lower() if ch is not None and len(name) == 1 else name
            mods = chord if ch is not None else held
            out.append({"action": "key", "text": "+".join([*mods, key])})
    flush_typing()
    return out
