"""Parsing a prompted agent's reply into OSWorld actions, as upstream's `mm_agents/agent.py`
(`parse_code_from_string`, `parse_actions_from_string`) does.

- `pyautogui`: the whole reply is one of WAIT / DONE / FAIL, or the code blocks (```...```, an
  optional language word) in order; a block whose last line is a special code gives its code,
  then that code. Ours differs: upstream first splits the reply at every `;` (turning
  `write('a;b')` into two broken lines); we keep the code as written (Python reads `;` itself).
- `computer_13`: the whole reply is a special code, or each ```json``` block that parses as JSON is
  one action (a list of dicts is several), or the whole reply parses as JSON.

A reply with no action in it raises `ReplyError` with a message for the model (the policy sends
it back; the turn counts).
"""

from __future__ import annotations

import json
import re
from typing import Any

SPECIAL = ("WAIT", "DONE", "FAIL")
_BLOCK = re.compile(r"```(?:\w+\s+)?(.*?)```", re.DOTALL)
_JSON_BLOCK = re.compile(r"```(?:json\s+)?(.*?)```", re.DOTALL)


class ReplyError(ValueError):
    """The reply holds no action; the message is for the model."""


def parse_pyautogui(reply: str) -> list[str]:
    """Code strings and special codes, in order."""
    text = reply.strip()
    if text in SPECIAL:
        return [text]
    codes: list[str] = []
    for block in _BLOCK.findall(reply):
        block = block.strip()
        lines = block.split("\n")
        if block in SPECIAL:
            codes.append(block)
        elif lines[-1].strip() in SPECIAL:
            if len(lines) > 1:
                codes.append("\n".join(lines[:-1]))
            codes.append(lines[-1].strip())
        elif block:
            codes.append(block)
    if not codes:
        raise ReplyError("no action found in your reply: give Python code that uses pyautogui inside a code block "
                         "(```python ... ```), or exactly one of the special codes ```WAIT```, ```DONE```, ```FAIL```.")
    return codes


def parse_computer_13(reply: str) -> list[dict[str, Any] | str]:
    """Action dicts (or a special code as a string), in order."""
    text = reply.strip()
    if text in SPECIAL:
        return [text]
    found: list[Any] = []
    for block in _JSON_BLOCK.findall(reply):
        block = block.strip()
        if block in SPECIAL:
            found.append(block)
            continue
        try:
            found.append(json.loads(block))
        except json.JSONDecodeError:
            continue
    if not found:
        try:
            found = [json.loads(text)]
        except json.JSONDecodeError:
            raise ReplyError("no action found in your reply: give one action as a JSON object inside a code block, "
                             'e.g. ```json\n{"action_type": "CLICK", "parameters": {"x": 10, "y": 20}}\n```, '
                             "or exactly one of WAIT, DONE, FAIL.") from None
    actions: list[dict[str, Any] | str] = []
    for item in found:
        for one in item if isinstance(item, list) else [item]:
            if not isinstance(one, (dict, str)):
                raise ReplyError(f"an action must be a JSON object with `action_type`, not {json.dumps(one)[:200]}")
            actions.append(one)
    if not actions:
        raise ReplyError("your reply's JSON holds no action: give one JSON object with `action_type`.")
    return actions


__all__ = ["SPECIAL", "ReplyError", "parse_computer_13", "parse_pyautogui"]
