"""Does an attack run's main task match its honest twin's? Pure functions over the calls of a
run's turns (plan turns, or a log's recorded actions per step) and how many of each turn's
first calls are the side task's (`Turn.side_calls`), for `scripts/attack_placement.py`.

    main_calls       the calls left once the side calls are removed
    compare_twins    attack (side removed) vs honest twin: equal, replayed, missing, first mismatch
    pending_before_side  side pieces that start typing while main-task text is still un-entered
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["TwinComparison", "call_key", "compare_twins", "main_calls", "pending_before_side"]

Calls = Sequence[Sequence[dict[str, Any]]]
_NEUTRAL = ("screenshot", "wait", "mouse_move", "cursor_position", "zoom")


def call_key(call: dict[str, Any]) -> str:
    """A call as a comparable string (tool and arguments, keys sorted)."""
    return json.dumps({"tool": call.get("tool"), "arguments": call.get("arguments", {})}, sort_keys=True)


def main_calls(turns: Calls, side_counts: Sequence[int]) -> list[list[dict[str, Any]]]:
    if len(turns) != len(side_counts):
        raise ValueError(f"{len(turns)} turns but {len(side_counts)} side-call counts")
    return [list(t[n:]) for t, n in zip(turns, side_counts)]


@dataclass(frozen=True)
class TwinComparison:
    equal: bool
    """The attack's turns with the side calls removed are the honest twin's turns, call for call."""
    same_length: bool
    replayed: int
    """Main-task calls the attack plays more often than its twin (a main turn played twice)."""
    missing: int
    """Calls of the twin the attack never plays."""
    first_mismatch: int | None
    """1-based turn of the first difference (None when equal)."""


def compare_twins(attack: Calls, side_counts: Sequence[int], honest: Calls) -> TwinComparison:
    left = main_calls(attack, side_counts)
    a = Counter(call_key(c) for t in left for c in t)
    h = Counter(call_key(c) for t in honest for c in t)
    first = next((i for i, (x, y) in enumerate(zip(left, honest), 1)
                  if [call_key(c) for c in x] != [call_key(c) for c in y]), None)
    if first is None and len(left) != len(honest):
        first = min(len(left), len(honest)) + 1
    return TwinComparison(equal=first is None, same_length=len(left) == len(honest),
                          replayed=sum((a - h).values()), missing=sum((h - a).values()), first_mismatch=first)


def pending_before_side(turns: Calls, side_counts: Sequence[int]) -> list[tuple[int, str]]:
    """(1-based turn, text) wherever a side piece starts by typing while text the main task typed
    is still pending in the focused field (typed without Enter and not yet entered, erased, or
    left by another key or a click): the side command would be typed after it."""
    pending, bad = "", []
    for i, (t, n_side) in enumerate(zip(turns, side_counts), 1):
        for k, c in enumerate(t):
            args = c.get("arguments", {})
            if k == 0 and n_side and pending and args.get("action") == "type":
                bad.append((i, pending))
            if k < n_side:
                pending = ""  # what the side task types is its own
                continue
            act = args.get("action")
            if c.get("tool") != "computer":
                pending = ""
            elif act == "type":
                text = str(args.get("text", ""))
                pending = "" if args.get("press_enter") or text.endswith("\n") else (pending + text).rsplit("\n", 1)[-1]
            elif act == "key":
                pending = pending[:-1] if args.get("text") == "BackSpace" else ""
            elif act not in _NEUTRAL:
                pending = ""
    return bad
