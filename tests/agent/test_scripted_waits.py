"""Issue 20: the scripted model plays an oracle's `wait` as a turn boundary on an idle desktop,
never as a fixed sleep between two actions of one turn (which a loaded machine outruns)."""

from __future__ import annotations

import json

import pytest
from inspect_ai.util import Store

from control_osworld import sample_store
from control_osworld.agent import loop
from control_osworld.control.scripted import PASSIVE, _oracle_turns, build_plan, split_at_waits
from control_osworld.osworld.loader import REPO


def _c(action: str, **kw) -> dict:
    return {"tool": "computer", "arguments": {"action": action, **kw}}


def test_a_step_is_cut_after_each_wait_that_an_action_follows():
    o, w, a, t, r = _c("key", text="ctrl+o"), _c("wait", duration=1), _c("key", text="ctrl+a"), _c("type", text="/x"), \
        _c("key", text="Return")
    shot = _c("screenshot")
    assert split_at_waits([o, w, a, t, w, r, w, w]) == [[o, w], [a, t, w], [r, w, w]]
    assert split_at_waits([o, w, w, a]) == [[o, w, w], [a]]  # consecutive waits stay together
    assert split_at_waits([o, w, shot]) == [[o, w, shot]]  # nothing acts after: one turn
    assert split_at_waits([w]) == [[w]] and split_at_waits([]) == []
    assert split_at_waits([w, t, w, r]) == [[w, t, w], [r]]  # a leading wait stays with the first action
    bash = {"tool": "bash", "arguments": {"cmd": "true"}}
    assert split_at_waits([o, w, bash]) == [[o, w], [bash]]


def _oracle_files():
    return sorted([*(REPO / "tasks" / "oracles").glob("*.json"), *(REPO / "side_tasks" / "oracles").glob("*.json")])


@pytest.mark.parametrize("path", _oracle_files(), ids=lambda p: p.name)
def test_no_turn_acts_after_a_wait_and_effect_and_checkpoint_stay_on_their_step(path):
    """Every oracle's turns: the step's calls in order, no acting call after a wait inside a
    turn, the effect on the last turn of the effect step, a checkpoint on the last of its step."""
    o = json.loads(path.read_text())
    turns = _oracle_turns(o, side=o.get("effect_step") is not None)
    for i, step in enumerate(o["steps"], 1):
        mine = [t for t in turns if t.origin == i]
        assert [c for t in mine for c in t.calls] == step.get("calls", [])
        for t in mine:
            args = [c["arguments"] for c in t.calls if c["tool"] == "computer"]
            def acts(c: dict) -> bool:
                return c["tool"] != "computer" or c["arguments"].get("action") not in PASSIVE

            first = next((k for k, c in enumerate(t.calls) if acts(c)), len(t.calls))
            acting_after_wait = [b for k, b in enumerate(t.calls) if k > first and acts(b) and any(
                c["tool"] == "computer" and c["arguments"].get("action") == "wait" for c in t.calls[first:k])]
            assert not acting_after_wait, (path.name, i, args)
        assert [t.checkpoint for t in mine] == [False] * (len(mine) - 1) + [bool(step.get("checkpoint"))]
        assert [t.effect for t in mine] == [False] * (len(mine) - 1) + [o.get("effect_step") == i]


def test_the_plans_effect_step_is_the_turn_that_ends_the_side_oracles_effect_step():
    main = json.loads((REPO / "tasks" / "oracles" / "mp-todo-new-file.json").read_text())
    side = json.loads((REPO / "side_tasks" / "oracles" / "db-password-into-notes.json").read_text())
    for strategy in ("blatant", "burst", "spread"):
        plan = build_plan(main, side, sample_id="s", epoch=1, seed=0, strategy=strategy, vary=False)
        t = plan.turns[plan.effect_step - 1]
        # the effect step saves the notes: its last piece presses the Return of the save dialog
        assert t.side and [c["arguments"].get("text") for c in t.calls][0] == "Return", strategy


def test_the_scripted_model_waits_for_an_idle_desktop_unless_the_loop_just_did(monkeypatch):
    """generate: one settle per turn, skipped when the loop settled after the last step."""
    import asyncio

    from inspect_ai.model import ChatMessageUser, GenerateConfig

    from control_osworld.control import scripted

    calls: list[int] = []

    async def settle(max_s: float = loop.SETTLE_MAX_S) -> bool:
        calls.append(1)
        return True

    shared = sample_store.SampleStore(store=Store())
    shared.sample = {"id": "s", "epoch": 1, "metadata": {}}

    model = scripted.ScriptedModel("oracle")
    plan = scripted.Plan([scripted.Turn(text="x", calls=[_c("screenshot")])] * 3)
    monkeypatch.setattr(loop, "settle_desktop", settle)
    monkeypatch.setattr(model, "plan_for", lambda *a: plan)
    monkeypatch.setattr(sample_store, "sample_store", lambda of=None: shared)
    history: list = [ChatMessageUser(content="go")]
    asyncio.run(model.generate(history, [], "auto", GenerateConfig()))  # the first turn: settle
    assert len(calls) == 1
    history.append(_turn("a", "left_click"))
    shared.settled_step = 1  # the loop settled after step 1 (before its check)
    asyncio.run(model.generate(history, [], "auto", GenerateConfig()))
    assert len(calls) == 1
    history.append(_turn("b", "key"))  # no check after step 2 (an honest run)
    asyncio.run(model.generate(history, [], "auto", GenerateConfig()))
    assert len(calls) == 2


def _turn(text: str, *actions: str, human: bool = False):
    from inspect_ai.model import ChatMessageAssistant
    from inspect_ai.tool import ToolCall

    args = ({"action": actions[0]} if len(actions) == 1 else
            {"actions": [{"action": a} for a in actions]})
    return ChatMessageAssistant(content=text, tool_calls=[ToolCall(id="c", function="computer", arguments=args)],
                                metadata={"actor": "human"} if human else None)


def test_a_turn_after_one_that_only_looked_or_waited_on_an_idle_desktop_needs_no_settle(monkeypatch):
    """Nothing acted on the desktop since it was last idle: the next turn starts at once. Any
    acting call (in a batch too), a person's turn, or a settle that found the desktop busy
    brings the settle back."""
    import asyncio

    from inspect_ai.model import ChatMessageUser, GenerateConfig

    from control_osworld.control import scripted

    busy = {"now": False}
    calls: list[int] = []

    async def settle(max_s: float = loop.SETTLE_MAX_S) -> bool:
        calls.append(1)
        return not busy["now"]

    shared = sample_store.SampleStore(store=Store())
    shared.sample = {"id": "s", "epoch": 1, "metadata": {}}

    model = scripted.ScriptedModel("oracle")
    monkeypatch.setattr(loop, "settle_desktop", settle)
    monkeypatch.setattr(model, "plan_for", lambda *a: scripted.Plan([scripted.Turn(calls=[_c("screenshot")])]))
    monkeypatch.setattr(sample_store, "sample_store", lambda of=None: shared)
    history: list = [ChatMessageUser(content="go")]

    def play(turn) -> int:
        if turn is not None:
            history.append(turn)
        before = len(calls)
        asyncio.run(model.generate(history, [], "auto", GenerateConfig()))
        return len(calls) - before

    assert play(None) == 1  # the first turn settles
    assert play(_turn("look", "screenshot")) == 0
    assert play(_turn("wait", "wait", "zoom", "cursor_position")) == 0  # a passive batch
    assert play(_turn("click", "left_click")) == 1
    assert play(_turn("mixed", "screenshot", "key")) == 1  # one acting call in a batch
    assert play(_turn("look", "screenshot", human=True)) == 1  # a person's turn: not the model's plan
    busy["now"] = True
    assert play(_turn("look", "screenshot")) == 0  # the last settle found it idle
    assert play(_turn("click", "left_click")) == 1  # ... this one finds it busy
    assert play(_turn("look", "screenshot")) == 1  # so the desktop is not known idle: settle again
    busy["now"] = False
    assert play(_turn("look", "screenshot")) == 1  # the last settle was busy: settle
    assert play(_turn("look", "screenshot")) == 0
    from inspect_ai.model import ChatMessageAssistant
    from inspect_ai.tool import ToolCall

    bash = ChatMessageAssistant(content="", tool_calls=[ToolCall(id="b", function="bash", arguments={"cmd": "ls"})])
    assert play(bash) == 1  # any other tool may act
