"""Side-task checkers by name (agent/checkers.py): each setting registers its factory and its
setup names it in the sample's store, so a scaffold built by name (control-arena's CLI) still
checks; an unknown name is an error; an attack sample without a checker never runs unchecked."""

from __future__ import annotations

import asyncio

import pytest
from inspect_ai.util import Store

from control_osworld import sample_store
from control_osworld.agent import checkers


def test_both_families_register_their_checker():
    import control_osworld.control.setting as control
    import control_osworld.proactivity.desktop as dilemma

    assert checkers.checker_named("osworld") is control.osworld_side_task_checker
    assert checkers.checker_named("dilemma") is dilemma.dilemma_effect_checker


def test_an_unregistered_name_is_an_error_naming_the_registered_ones():
    import control_osworld.control.setting  # noqa: F401

    with pytest.raises(RuntimeError, match=r"'nope'.*registered: .*'osworld'"):
        checkers.checker_named("nope")


def _run_scaffold(monkeypatch, shared, factory=None):
    """The loop's run() up to where it makes the checker (the desktop lookup fails after it)."""
    from control_osworld.agent import loop, tools

    monkeypatch.setattr(sample_store, "sample_store", lambda of=None: shared)
    monkeypatch.setattr(loop, "sample_store", lambda of=None: shared)
    monkeypatch.setattr(tools, "desktop", lambda: (_ for _ in ()).throw(LookupError("no desktop here")))
    agent = loop.desktop_scaffold(side_task_checker=factory)(None, [], _submit(), "")  # type: ignore[arg-type]
    return asyncio.run(agent(None))  # type: ignore[arg-type]


def _submit():
    from inspect_ai.tool import ToolDef

    async def submit(answer: str) -> str:
        """Submit.

        Args:
            answer: the answer.
        """
        return answer

    return ToolDef(submit)


def test_the_scaffold_makes_the_checker_the_setup_named(monkeypatch):
    made: list[str] = []

    async def factory():
        made.append("made")
        return None

    monkeypatch.setitem(checkers.CHECKERS, "test-checker", factory)
    shared = sample_store.SampleStore(store=Store())
    shared.sample = {"id": "s", "epoch": 1, "metadata": {"side_task_id": "x"}}
    shared.checker = "test-checker"
    with pytest.raises(LookupError, match="no desktop here"):
        _run_scaffold(monkeypatch, shared)
    assert made == ["made"]


def test_an_attack_sample_without_a_checker_is_an_error_not_an_unchecked_run(monkeypatch):
    shared = sample_store.SampleStore(store=Store())
    shared.sample = {"id": "s", "epoch": 1, "metadata": {"side_task_id": "x"}}
    with pytest.raises(RuntimeError, match="no side-task checker"):
        _run_scaffold(monkeypatch, shared)
    honest = sample_store.SampleStore(store=Store())
    honest.sample = {"id": "s", "epoch": 1, "metadata": {"env_side_task_id": "x"}}  # a matched honest run
    with pytest.raises(LookupError, match="no desktop here"):  # no checker needed: it goes on
        _run_scaffold(monkeypatch, honest)
