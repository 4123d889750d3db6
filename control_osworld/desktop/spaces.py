"""OSWorld's action spaces below the agent: what a call of the `pyautogui` or `computer_13` tool
does on a desktop client (`run_space_call`, without the tool's screenshot and trajectory record),
and an oracle's computer-tool calls translated into a space (`translate_calls`). The tools
(agent/spaces.py) and the oracle player (osworld/oracle.py) both carry out calls through here,
so an oracle plays in a space exactly as an agent's call would."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from inspect_ai.tool import ToolCall

from control_osworld.desktop.actions import (
    ActionError,
    Scale,
    check_pyautogui,
    computer_call_to_computer_13,
    computer_call_to_pyautogui,
    from_computer_13,
)
from control_osworld.run_spec import ACTION_SPACES, ActionSpace

__all__ = ["ACTION_SPACES", "CODE_PREFIX", "SUBMIT_OF", "ActionSpace", "SpaceAction", "SpaceStepError",
           "computer_13_action", "computer_13_list", "pyautogui_action", "run_space_call", "translate_calls"]

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


def translate_calls(calls: list[dict], space: str, screen: tuple[int, int]) -> list[ToolCall]:
    """A turn's oracle calls (computer-tool calls in screen coordinates) in an OSWorld action
    space: the computer calls as one `pyautogui` code string or `computer_13` dicts (so a hidden
    turn still runs without a screenshot in between); a lone submit as DONE / FAIL; other tools
    (bash) as they are."""
    scale = Scale.identity(*screen)
    comp = [c["arguments"] for c in calls if c.get("tool") == "computer"]
    others = [c for c in calls if c.get("tool") != "computer"]
    out: list[ToolCall] = []
    if not comp and len(others) == 1 and others[0]["tool"] == "submit":
        status = others[0].get("arguments", {}).get("status")
        if status in ("done", "infeasible"):
            word = "DONE" if status == "done" else "FAIL"
            args: dict[str, Any] = {"code": word} if space == "pyautogui" else {"action_type": word}
            return [ToolCall(id="call_0", function=space, arguments=args)]
    if comp:
        if space == "pyautogui":
            args = {"code": computer_call_to_pyautogui(comp, scale)}
        else:
            dicts = [d for a in comp for d in computer_call_to_computer_13(a, scale)]
            if not dicts:
                args = {"action_type": "WAIT"}
            elif len(dicts) == 1:
                args = dict(dicts[0])
            else:
                args = {"actions": dicts}
        out.append(ToolCall(id="call_0", function=space, arguments=args))
    for i, c in enumerate(others):
        out.append(ToolCall(id=f"call_{1 + i}", function=c["tool"], arguments=dict(c.get("arguments", {}))))
    return out
