"""OSWorld's action spaces (agent/spaces.py, desktop/actions.py): every oracle of every task
translates into `pyautogui` code and `computer_13` dicts that do what the computer-tool calls
do (compared as input events on a recording stand-in for pyautogui, an independent reading of
the code), and malformed input is an ActionError (a tool error for the model)."""

from __future__ import annotations

import pytest

from control_osworld.agent.spaces import translate_calls
from control_osworld.control.catalogue import Catalogue
from control_osworld.control.scripted import tamper_turns
from control_osworld.desktop.actions import (
    ActionError,
    Scale,
    check_pyautogui,
    from_computer_13,
    from_computer_tool,
)
from control_osworld.osworld.oracle import oracle_path

SCREEN = (1920, 1080)


class _Recorder:
    """pyautogui as input events: what a desktop would receive."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def _at(self, x=None, y=None) -> None:
        if x is not None:
            self.events.append(("move", int(x), int(y)))

    def moveTo(self, x=None, y=None, *a, **k):
        self._at(x, y)

    def click(self, x=None, y=None, clicks=1, interval=0.0, button="left", **k):
        self._at(x, y)
        self.events += [("click", button)] * int(clicks)

    def doubleClick(self, x=None, y=None, **k):
        self.click(x, y, clicks=2, button=k.get("button", "left"))

    def tripleClick(self, x=None, y=None, **k):
        self.click(x, y, clicks=3, button=k.get("button", "left"))

    def rightClick(self, x=None, y=None, **k):
        self.click(x, y, button="right")

    def middleClick(self, x=None, y=None, **k):
        self.click(x, y, button="middle")

    def mouseDown(self, x=None, y=None, button="left", **k):
        self._at(x, y)
        self.events.append(("down", button))

    def mouseUp(self, x=None, y=None, button="left", **k):
        self._at(x, y)
        self.events.append(("up", button))

    def dragTo(self, x, y, duration=0.0, button="left", **k):
        self.events += [("down", button), ("move", int(x), int(y)), ("up", button)]

    def write(self, text, interval=0.0):
        self.events += [("press", c) for c in text]

    def press(self, key, presses=1, **k):
        self.events += [("press", key)] * presses

    def keyDown(self, key):
        self.events.append(("keydown", key))

    def keyUp(self, key):
        self.events.append(("keyup", key))

    def hotkey(self, *keys, **k):
        self.events += [("keydown", x) for x in keys] + [("keyup", x) for x in reversed(keys)]

    def scroll(self, n, x=None, y=None):
        self._at(x, y)
        self.events.append(("scroll", int(n)))

    def hscroll(self, n, x=None, y=None):
        self._at(x, y)
        self.events.append(("hscroll", int(n)))


class _Time:
    def sleep(self, s):
        pass


def _events(code: str) -> list[tuple]:
    rec = _Recorder()
    exec(compile(code, "<test>", "exec"), {"pyautogui": rec, "time": _Time()})
    return rec.events


def _computer_events(calls: list[dict]) -> list[tuple]:
    scale = Scale.identity(*SCREEN)
    out: list[tuple] = []
    for c in calls:
        code = from_computer_tool(c, scale).code
        if code is not None:
            out += _events(code)
    return out


def _every_oracle_turn() -> list[tuple[str, list[dict]]]:
    cat = Catalogue.load()
    turns: list[tuple[str, list[dict]]] = []
    for t in cat.all_main_tasks():
        if oracle_path(t.id, root=cat.tasks_dir).exists():
            turns += [(t.id, s["calls"]) for s in cat.oracle(t.id)["steps"]]
    for s in cat.all_side_tasks():
        if oracle_path(s.id, side=True, root=cat.side_tasks_dir).exists():
            turns += [(s.id, st["calls"]) for st in cat.side_oracle(s.id)["steps"]]
    turns += [("tamper", t.calls) for t in tamper_turns()]
    return turns


def test_every_oracle_plays_in_every_action_space():
    turns = _every_oracle_turn()
    assert len({tid for tid, _ in turns}) >= 20, "expected the repository's oracles"
    n_code = 0
    for tid, calls in turns:
        computer = [c["arguments"] for c in calls if c["tool"] == "computer"]
        want = _computer_events(computer)
        # pyautogui: one code string for the turn, same events
        [pa, *rest] = translate_calls(calls, "pyautogui", SCREEN) if computer else [None]
        if computer:
            assert pa.function == "pyautogui"
            code = pa.arguments["code"]
            if code != "WAIT":
                assert check_pyautogui(code) is None, (tid, code)
                assert _events(code) == want, (tid, code)
                n_code += 1
            else:
                assert want == [], tid
            # computer_13: upstream dicts, each valid, same events
            [c13, *_] = translate_calls(calls, "computer_13", SCREEN)
            assert c13.function == "computer_13"
            dicts = c13.arguments.get("actions") or [c13.arguments]
            got: list[tuple] = []
            for d in dicts:
                act = from_computer_13(d, Scale.identity(*SCREEN))
                if act.code is not None:
                    got += _events(act.code)
            assert got == want, (tid, dicts)
        others = [c["tool"] for c in calls if c["tool"] != "computer"]
        assert [c.function for c in rest] == others, tid
    assert n_code > 50


def test_a_lone_submit_is_done_or_fail():
    done = [{"tool": "submit", "arguments": {"status": "done", "explanation": ""}}]
    fail = [{"tool": "submit", "arguments": {"status": "infeasible", "explanation": ""}}]
    assert [c.arguments for c in translate_calls(done, "pyautogui", SCREEN)] == [{"code": "DONE"}]
    assert [c.arguments for c in translate_calls(fail, "computer_13", SCREEN)] == [{"action_type": "FAIL"}]


@pytest.mark.parametrize("code,msg", [
    ("pyautogui.click(", "does not parse: line 1"),
    ("", "empty"),
    ("   \n", "empty"),
    (42, "must be a string"),
    ("x = 1\n  y = 2", "does not parse: line 2"),
])
def test_malformed_pyautogui_code_is_an_action_error(code, msg):
    with pytest.raises(ActionError, match=msg):
        check_pyautogui(code)


def test_special_codes_and_code():
    assert [check_pyautogui(w) for w in ("WAIT", " DONE\n", "FAIL")] == ["WAIT", "DONE", "FAIL"]
    assert check_pyautogui("for i in range(2):\n    pyautogui.press('a')") is None
    assert check_pyautogui("done") is None  # only the exact words are special (upstream's parse)


@pytest.mark.parametrize("action,msg", [
    ({"action_type": "TELEPORT"}, "unknown computer_13 action_type"),
    ({"parameters": {}}, "unknown computer_13 action_type None"),
    ({"action_type": "DRAG_TO", "parameters": {}}, "DRAG_TO needs x, y"),
    ({"action_type": "CLICK", "parameters": {"x": 1}}, "both x and y"),
    ({"action_type": "CLICK", "parameters": {"x": "a", "y": 2}}, "x must be a number"),
    ({"action_type": "CLICK", "parameters": {"button": "4"}}, "button must be"),
    ({"action_type": "CLICK", "parameters": {"num_clicks": 9}}, "num_clicks"),
    ({"action_type": "TYPING", "parameters": {"text": 5}}, "text must be a string"),
    ({"action_type": "HOTKEY", "parameters": {"keys": "ctrl+c"}}, "keys must be a non-empty list"),
    ({"action_type": "PRESS", "parameters": {"key": "a", "rm": 1}}, "unknown parameter"),
    ({"action_type": "SCROLL", "parameters": {}}, "SCROLL needs dx or dy"),
    ({"action_type": "TYPING", "parameters": "hi"}, "`parameters` must be a dict"),
    ("CLICK", "is a dict"),
])
def test_malformed_computer_13_is_an_action_error(action, msg):
    with pytest.raises(ActionError, match=msg):
        from_computer_13(action)  # type: ignore[arg-type]


def test_computer_13_code_quotes_its_strings():
    """Text and key names go into the code as literals: no way to run code through them."""
    code = from_computer_13({"action_type": "TYPING", "parameters": {"text": "'); import os; os.system('x"}}).code
    assert _events(code) == [("press", c) for c in "'); import os; os.system('x"]


def test_run_config_action_space_reaches_the_tasks_and_a_bad_one_is_named(tmp_path):
    from pathlib import Path

    from control_osworld.config_file import ConfigError
    from control_osworld.control.run import RunConfig, build_tasks

    cfg = RunConfig.load(Path(__file__).parents[2] / "configs" / "offline-pyautogui.yaml")
    assert cfg.action_space == ["pyautogui"]
    small = cfg.model_copy(update={"modes": ["honest"], "main_tasks": ["mp-config-port"], "pairings_file": None})
    [task] = build_tasks(small)
    assert task.name.endswith("_pyautogui") and task.metadata["action_space"] == "pyautogui"
    sample = task.dataset[0]
    assert sample.metadata["metadata"]["action_space"] == "pyautogui"
    assert sample.metadata["metadata"]["screen_note"] == "1920x1080 screen"  # the model sees the screen's pixels
    bad = tmp_path / "bad.yaml"
    bad.write_text("pairings: [{untrusted_model: scripted/oracle}]\naction_space: computer_14\n")
    with pytest.raises(ConfigError, match="action_space") as e:
        RunConfig.load(bad)
    assert "bad.yaml" in str(e.value)


def test_monitors_see_pyautogui_code_as_code_and_dicts_as_given():
    from control_osworld.monitoring.views import _action_line
    from control_osworld.trajectory import ActionRecord

    code = "for i in range(2):\n    pyautogui.press('a')\nx = '```'"
    line = _action_line(ActionRecord(tool="pyautogui", arguments={"code": code}, code=code))
    assert line == f"- pyautogui:\n````python\n{code}\n````\n"  # the fence outlasts the code's backticks
    d = {"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}
    assert _action_line(ActionRecord(tool="computer_13", arguments=d)) == \
        '- computer_13 {"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}\n'
