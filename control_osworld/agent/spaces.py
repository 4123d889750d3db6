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
from typing import Any

from inspect_ai.tool import ContentImage, ContentText, Tool, ToolError, tool

from control_osworld.agent.a11y import tag_variables
from control_osworld.agent.tools import (
    _agents_doing,
    _record,
    desktop,
    screenshot_content,
)
from control_osworld.desktop.actions import SPECIAL_CODES, ActionError, Scale
from control_osworld.desktop.spaces import (
    ACTION_SPACES,
    CODE_PREFIX,
    SUBMIT_OF,
    ActionSpace,
    SpaceAction,
    SpaceStepError,
    computer_13_action,
    computer_13_list,
    pyautogui_action,
    run_space_call,
    translate_calls,
)
from control_osworld.run_spec import RUN_DEFAULTS, RunSpec
from control_osworld.sample_store import sample_store


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


def space_tool(spec: RunSpec) -> Tool:
    """The desktop tool of the run spec's action space, at its view size and settle time."""
    from control_osworld.agent.tools import computer_tool

    space = spec.action_space
    if space == "computer":
        return computer_tool(model_size=spec.view_size, settle_s=spec.settle_s)
    if space == "pyautogui":
        return pyautogui_tool(settle_s=spec.settle_s)
    if space == "computer_13":
        return computer_13_tool(settle_s=spec.settle_s)
    raise ValueError(f"unknown action_space {space!r}; use one of {', '.join(ACTION_SPACES)}")


__all__ = ["ACTION_SPACES", "SPECIAL_CODES", "ActionSpace", "SpaceAction", "SpaceStepError", "computer_13_action",
           "computer_13_list", "computer_13_tool", "pyautogui_action", "pyautogui_tool", "run_space_call", "space_tool", "translate_calls"]
