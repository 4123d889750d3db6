"""OSWorld's action spaces as agent tools, beside inspect's `computer` tool (agent/tools.py).

- `pyautogui` (OSWorld's `pyautogui` space): one argument, `code`: the agent's own Python, run
  by the desktop's pyautogui executor as the agent's uid (the same `/step` path the computer
  tool uses), with `pyautogui` and `time` imported as upstream's server does; or exactly one of
  the special codes `WAIT`, `DONE`, `FAIL`.
- `computer_13` (OSWorld's `computer_13` space): upstream's action dicts
  (`{"action_type": "CLICK", "parameters": {"x": 10, "y": 20}}`), one or a list.

Both work in the screen's own pixels (upstream's agents see the full-resolution screenshot).
`DONE` ends the run as `submit(done)`, `FAIL` as `submit(infeasible)` (the store's `submitted`,
read by the loop). Malformed input (code that does not parse, an unknown action type, a missing
parameter) is a tool error back to the model, recorded on the action, never a sample error.
The trajectory records each action in its own space: `{"code": ...}` or the dict as given.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from inspect_ai.tool import ContentImage, ContentText, Tool, ToolError, tool

from control_osworld.agent.a11y import tag_variables
from control_osworld.agent.tools import (
    _agents_doing,
    _record,
    desktop,
    screenshot_content,
)
from control_osworld.desktop.actions import (
    SPECIAL_CODES,
    ActionError,
    Scale,
    check_pyautogui,
    from_computer_13,
)
from control_osworld.run_spec import RUN_DEFAULTS
from control_osworld.sample_store import sample_store

ActionSpace = Literal["computer", "pyautogui", "computer_13"]
ACTION_SPACES: tuple[str, ...] = ("computer", "pyautogui", "computer_13")
CODE_PREFIX = "import time\n"
"""Put before the agent's code: upstream's server runs `import pyautogui; import time; ...`; our
executor already has `pyautogui` in the namespace."""
SUBMIT_OF = {"DONE": "done", "FAIL": "infeasible"}


@dataclass(frozen=True)
class SpaceAction:
    """One action of an OSWorld action space as its tool carries it out: `code` runs in the
    desktop's pyautogui executor (None: nothing runs), after a `wait_s` pause; `end` is the
    special word that ends the run (DONE / FAIL)."""

    code: str | None
    wait_s: float = 0.0
    end: str | None = None


def pyautogui_action(code: object) -> SpaceAction:
    """A `pyautogui` tool call's code as the tool runs it (ActionError when malformed)."""
    special = check_pyautogui(code)
    if special == "WAIT":
        return SpaceAction(None, wait_s=1.0)
    if special is not None:
        return SpaceAction(None, end=special)
    assert isinstance(code, str)
    return SpaceAction(CODE_PREFIX + code)


def computer_13_list(action_type: str | None, parameters: dict[str, Any] | None,
                     actions: list[dict[str, Any]] | None) -> list[Any]:
    """A `computer_13` tool call's arguments -> the action dicts it runs, in order."""
    if actions is None:
        if action_type is None:
            raise ActionError("give an `action_type` (or a list of `actions`)")
        one: dict[str, Any] = {"action_type": action_type}
        if parameters is not None:
            one["parameters"] = parameters
        return [one]
    if not isinstance(actions, list) or not actions:
        raise ActionError("`actions` must be a non-empty list of action dicts")
    return actions


def computer_13_action(act_dict: object, scale: Scale) -> SpaceAction:
    """One computer_13 action dict as the tool runs it (ActionError when malformed)."""
    if not isinstance(act_dict, dict):
        raise ActionError(f"an action must be a dict with `action_type`, got {act_dict!r}")
    act = from_computer_13(act_dict, scale)
    kind = act_dict["action_type"]
    if kind in SUBMIT_OF:
        return SpaceAction(None, end=kind)
    return SpaceAction(act.code, wait_s=min(act.wait_s, 30))


class SpaceStepError(RuntimeError):
    """An action-space call whose code failed in the desktop's executor."""


async def run_space_call(client: Any, space: str, arguments: dict[str, Any], scale: Scale, *,
                         timeout: float = 60.0) -> str | None:
    """Carry out one call of an action space's tool on a desktop client, as the tool does but
    without its screenshot and trajectory record (the oracle runner plays oracles through this:
    osworld/oracle.py) -> the word that ends the run (DONE / FAIL), else None. ActionError for
    malformed input, SpaceStepError when the code fails in the executor."""
    if space == "pyautogui":
        todo = [pyautogui_action(arguments.get("code"))]
    elif space == "computer_13":
        dicts = computer_13_list(arguments.get("action_type"), arguments.get("parameters"), arguments.get("actions"))
        todo = [computer_13_action(d, scale) for d in dicts]
    else:
        raise ValueError(f"run_space_call plays pyautogui or computer_13, not {space!r}")
    for act in todo:
        if act.end is not None:
            return act.end
        if act.wait_s:
            await asyncio.sleep(act.wait_s)
        if act.code is not None:
            r = await client.step(act.code, screenshot=False, timeout=timeout)
            if r.returncode != 0:
                raise SpaceStepError(f"{space} {arguments} failed: {(r.error or str(r.returncode))[-500:]}")
    return None


def _end(word: str) -> list[ContentText | ContentImage]:
    sample_store().submitted = SUBMIT_OF[word]
    return [ContentText(text=f"{word}: the run ends.")]


async def _step(tool_name: str, args: dict, code: str, recorded_code: str, settle_s: float,
                last: bool) -> bytes | None:
    env = desktop()
    r = await _agents_doing(args, recorded_code, env.client.step(
        code, screenshot=last, pause=settle_s if last else 0.0, timeout=env.action_timeout), tool=tool_name)
    _record(args, recorded_code, (f"{r.agent_fault}: {r.error}" if r.agent_fault else r.error)
            if r.returncode else None, tool=tool_name)
    if r.returncode:
        raise ToolError(f"the action failed: {r.error.strip().splitlines()[-1] if r.error else r.returncode}")
    return r.screenshot


async def _screen() -> ContentImage:
    env = desktop()
    return screenshot_content(await _agents_doing(None, None, env.client.screenshot()), None)


@tool(name="pyautogui")
def pyautogui_tool(settle_s: float = RUN_DEFAULTS.settle_s) -> Tool:
    """OSWorld's `pyautogui` action space."""

    async def execute(code: str) -> list[ContentText | ContentImage]:
        """Run Python code on the desktop with pyautogui, then see the screen.

        `pyautogui` and `time` are already imported; coordinates are pixels of the screenshot.

        Args:
          code: Python code that uses pyautogui (e.g. `pyautogui.click(100, 200)`), or exactly one of the special codes: WAIT (wait a moment and look again), DONE (the task is complete; ends the run), FAIL (the task cannot be done; ends the run).
        """
        args = {"code": code}
        try:
            act = pyautogui_action(code)
        except ActionError as e:
            _record(args, code if isinstance(code, str) else None, str(e), tool="pyautogui")
            raise ToolError(str(e)) from None
        if act.code is None:
            _record(args, None, None, tool="pyautogui")
            if act.end is None:  # WAIT
                await asyncio.sleep(act.wait_s)
                return [await _screen()]
            return _end(act.end)
        # set-of-marks observations: `tag_<i>` is mark i's centre (upstream's parse_code_from_som_string)
        tags = tag_variables([tuple(c) for c in sample_store().som_marks or []])
        png = await _step("pyautogui", args, CODE_PREFIX + tags + code, code, settle_s, last=True)
        return [screenshot_content(png, None) if png is not None else await _screen()]

    return execute  # type: ignore[return-value]  # list[ContentText | ContentImage] is a ToolResult


@tool(name="computer_13")
def computer_13_tool(settle_s: float = RUN_DEFAULTS.settle_s) -> Tool:
    """OSWorld's `computer_13` action space."""

    async def execute(action_type: str | None = None, parameters: dict[str, Any] | None = None,
                      actions: list[dict[str, Any]] | None = None) -> list[ContentText | ContentImage]:
        """Act on the desktop with one of OSWorld's 13 actions (or several in order), then see the screen.

        Coordinates are pixels of the screenshot.

        Args:
          action_type: MOVE_TO (x, y), CLICK (x, y, button, num_clicks: all optional), MOUSE_DOWN (button), MOUSE_UP (button), RIGHT_CLICK (x, y), DOUBLE_CLICK (x, y), DRAG_TO (x, y), SCROLL (dx, dy), TYPING (text), PRESS (key), KEY_DOWN (key), KEY_UP (key), HOTKEY (keys: a list), WAIT, DONE (the task is complete; ends the run), FAIL (the task cannot be done; ends the run).
          parameters: The action's parameters, e.g. {"x": 100, "y": 200}.
          actions: Several actions to run in order, each {"action_type": ..., "parameters": {...}}.
        """
        env = desktop()
        h = env.handle
        scale = Scale.identity(h.screen_width, h.screen_height)
        try:
            actions = computer_13_list(action_type, parameters, actions)
        except ActionError as e:
            raise ToolError(str(e)) from None
        png: bytes | None = None
        for i, act_dict in enumerate(actions):
            last = i == len(actions) - 1
            try:
                act = computer_13_action(act_dict, scale)
            except ActionError as e:
                _record(act_dict if isinstance(act_dict, dict) else {"action": act_dict}, None, str(e),
                        tool="computer_13")
                raise ToolError(str(e)) from None
            if act.end is not None:
                _record(act_dict, None, None, tool="computer_13")
                return _end(act.end)
            if act.wait_s:
                await asyncio.sleep(act.wait_s)
            if act.code is not None:
                png = await _step("computer_13", act_dict, act.code, act.code, settle_s, last=last)
            else:
                _record(act_dict, None, None, tool="computer_13")
        return [screenshot_content(png, None) if png is not None else await _screen()]

    return execute  # type: ignore[return-value]  # list[ContentText | ContentImage] is a ToolResult


def space_tool(space: str, settle_s: float, model_size: tuple[int, int] | None) -> Tool:
    """The desktop tool of an action space."""
    from control_osworld.agent.tools import computer_tool

    if space == "computer":
        return computer_tool(model_size=model_size, settle_s=settle_s)
    if space == "pyautogui":
        return pyautogui_tool(settle_s=settle_s)
    if space == "computer_13":
        return computer_13_tool(settle_s=settle_s)
    raise ValueError(f"unknown action_space {space!r}; use one of {', '.join(ACTION_SPACES)}")


__all__ = ["ACTION_SPACES", "SPECIAL_CODES", "ActionSpace", "SpaceAction", "SpaceStepError", "computer_13_action",
           "computer_13_list", "computer_13_tool", "pyautogui_action", "pyautogui_tool", "run_space_call", "space_tool"]
