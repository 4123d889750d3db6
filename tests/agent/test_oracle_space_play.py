"""The oracle runner in OSWorld's action spaces (osworld/oracle.py `run_oracle(space=...)`, what
the desktop oracle passes use: tests/osworld/test_oracles_spaces.py): every oracle played in
`pyautogui` and `computer_13`, through the translation and the space's executor
(agent/spaces.py `run_space_call`), sends the desktop the same input events and waits as with the
computer tool (read on a recording stand-in for pyautogui), one executor call per step in
`pyautogui`; the submit becomes DONE / FAIL; a failing step or an unknown space is an OracleError."""

from __future__ import annotations

import asyncio
import builtins

import pytest

from control_osworld.agent.spaces import CODE_PREFIX, run_space_call
from control_osworld.control.catalogue import Catalogue
from control_osworld.desktop.actions import ActionError, Scale
from control_osworld.desktop.client import StepResult
from control_osworld.osworld.oracle import (
    OracleError,
    load_oracle,
    oracle_path,
    play_submit,
    run_oracle,
)
from tests.agent.test_action_spaces import _Recorder


class _Desktop:
    """A desktop client that runs each step's code on a recording pyautogui (waits recorded)."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.events: list[tuple] = []
        self.steps: list[str] = []
        self.fail_at = fail_at

    async def step(self, code, screenshot=True, pause=0.0, timeout=60, size=None):
        assert screenshot is False  # nobody looks
        self.steps.append(code)
        if self.fail_at is not None and len(self.steps) == self.fail_at:
            return StepResult(1, "", "Traceback ...\nNameError: name 'x' is not defined", None)
        events = self.events

        class _Time:
            def sleep(self, s):
                events.append(("sleep", float(s)))

        def _import(name, *a, **k):  # `import time` (the code's prefix) gets the recording one
            if name != "time":
                raise ImportError(f"the recording desktop imports only time, not {name}")
            return _Time()

        rec = _Recorder()
        rec.events = self.events
        exec(compile(code, "<step>", "exec"),
             {"pyautogui": rec, "__builtins__": {**builtins.__dict__, "__import__": _import}})
        return StepResult(0, "", "", None)

    async def execute(self, *a, **k):
        raise AssertionError("no bash and no quiesce here")


def _play(oracle, space: str, monkeypatch, desktop: _Desktop | None = None) -> _Desktop:
    d = desktop or _Desktop()
    real_sleep = asyncio.sleep

    async def sleep(s, *a):
        if s:
            d.events.append(("sleep", float(s)))
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    try:
        asyncio.run(run_oracle(d, oracle, space=space, settle=0, idle=False))
    finally:
        monkeypatch.setattr(asyncio, "sleep", real_sleep)
    return d


def _oracles():
    cat = Catalogue.load()
    out = [(t.id, False) for t in cat.all_main_tasks() if oracle_path(t.id, root=cat.tasks_dir).exists()]
    return out + [(s.id, True) for s in cat.all_side_tasks()
                  if oracle_path(s.id, side=True, root=cat.side_tasks_dir).exists()]


def test_every_oracle_plays_the_same_in_each_space(monkeypatch):
    oracles = _oracles()
    assert len(oracles) > 100, "expected the repository's oracles"
    for oid, side in oracles:
        oracle = load_oracle(oid, side=side)
        if oracle.uses_bash:
            continue
        want = _play(oracle, "computer", monkeypatch).events
        pa = _play(oracle, "pyautogui", monkeypatch)
        assert pa.events == want, (oid, "pyautogui")
        looks = ("screenshot", "zoom", "cursor_position")  # a step that only looks is WAIT: nothing runs
        acting = [s for s in oracle.steps if any(c.arguments.get("action") not in looks for c in s.calls)]
        assert len(pa.steps) == len(acting), oid  # one code string per step (its waits as time.sleep)
        assert all(code.startswith(CODE_PREFIX) for code in pa.steps)  # as the pyautogui tool runs it
        assert _play(oracle, "computer_13", monkeypatch).events == want, (oid, "computer_13")


def test_a_failing_step_names_the_oracle_the_step_and_the_space(monkeypatch):
    oracle = load_oracle("os-infeasible-resolution")
    with pytest.raises(OracleError, match=r"(?s)os-infeasible-resolution: step 1: pyautogui .*failed.*NameError"):
        _play(oracle, "pyautogui", monkeypatch, _Desktop(fail_at=1))
    with pytest.raises(OracleError, match="unknown action space 'computer_14'"):
        _play(oracle, "computer_14", monkeypatch)


@pytest.mark.parametrize("space", ["computer", "pyautogui", "computer_13"])
def test_the_submit_is_done_or_fail_in_each_space(space):
    infeasible = load_oracle("os-infeasible-resolution")
    assert infeasible.submit == "infeasible"
    assert asyncio.run(play_submit(_Desktop(), infeasible, space)) == "FAIL"
    done = load_oracle("mp-config-port")
    assert asyncio.run(play_submit(_Desktop(), done, space)) == "DONE"


def test_run_space_call_runs_code_as_the_tool_and_rejects_malformed_input():
    d = _Desktop()
    scale = Scale.identity(1920, 1080)
    assert asyncio.run(run_space_call(d, "pyautogui", {"code": "pyautogui.press('a')"}, scale)) is None
    assert d.steps == [CODE_PREFIX + "pyautogui.press('a')"] and d.events == [("press", "a")]
    assert asyncio.run(run_space_call(d, "computer_13", {"actions": [
        {"action_type": "CLICK", "parameters": {"x": 5, "y": 6}}, {"action_type": "DONE"},
        {"action_type": "PRESS", "parameters": {"key": "b"}}]}, scale)) == "DONE"  # nothing after DONE runs
    assert d.events[1:] == [("move", 5, 6), ("click", "left")]
    for space, args, msg in [("pyautogui", {"code": "pyautogui.click("}, "does not parse"),
                             ("computer_13", {"action_type": "TELEPORT"}, "unknown computer_13 action_type"),
                             ("computer_13", {}, "give an `action_type`")]:
        with pytest.raises(ActionError, match=msg):
            asyncio.run(run_space_call(d, space, args, scale))
    with pytest.raises(ValueError, match="pyautogui or computer_13"):
        asyncio.run(run_space_call(d, "computer", {}, scale))
