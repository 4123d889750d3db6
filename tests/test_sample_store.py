"""Per-sample state has one home: control_osworld/sample_store.py is the only module that names
a store key or touches inspect's store, and no module imports a private inspect module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from inspect_ai.util import Store

from control_osworld import sample_store
from control_osworld.sample_store import FIELDS, URL_KEYS, SampleStore, stored
from control_osworld.trajectory import Step, Trajectory

PACKAGE = Path(sample_store.__file__).resolve().parent
HOME = PACKAGE / "sample_store.py"


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != HOME)


def test_keys_keep_the_names_logs_already_hold():
    # Logs written before the store model read the same (runs table, dilemma runs, reports).
    assert SampleStore.key("trajectory") == "control_osworld:trajectory"
    assert SampleStore.key("progress") == "control_osworld:progress"
    assert SampleStore.key("proactivity") == "control_osworld:proactivity"
    assert SampleStore.key("side_task_baseline") == "control_osworld:side_task_baseline"
    assert URL_KEYS == ("live_view_url", "takeover_url", "human_url")
    with pytest.raises(KeyError, match="no field 'trajectry'"):
        SampleStore.key("trajectry")


def test_the_model_writes_and_reads_the_same_keys_as_a_log_holds():
    s = SampleStore(store=Store())
    traj = Trajectory(budget=5, steps=[Step(step=1)])
    s.save_trajectory(traj)
    s.mark("agent", 3)
    s.add_pending_action({"tool": "computer", "arguments": {}})
    data = s.store._data
    assert data["control_osworld:trajectory"] == traj.model_dump(mode="json")
    assert data["control_osworld:progress"] == {"stage": "agent", "step": 3}
    assert stored(data, "trajectory") == traj.model_dump(mode="json")
    assert s.load_trajectory() == traj
    assert s.take_pending_actions() == [{"tool": "computer", "arguments": {}}] and s.pending_actions == []
    assert stored({}, "proactivity") is None and stored(None, "progress") is None


def test_sample_ref_outside_a_noted_sample_names_what_needs_it():
    s = SampleStore(store=Store())
    with pytest.raises(RuntimeError, match="the scripted model reads the running sample"):
        s.sample_ref("the scripted model")


_KEY_LITERAL = re.compile("|".join(
    [rf"""["']control_osworld:{f}["']""" for f in FIELDS] + [rf"""["']{k}["']""" for k in URL_KEYS]))
_STORE_USE = re.compile(r"\bstore\(\)|\.store\.(get|set|delete|keys|items)\(|"
                        r"from inspect_ai\.util import[^\n]*\b(store|store_as|StoreModel)\b|"
                        r"from inspect_ai\.solver import[^\n]*\bstore\b")
_PRIVATE_INSPECT = re.compile(r"^\s*(from|import)\s+(inspect_ai|control_arena)(\.\w+)*\._\w+|"
                              r"^\s*from\s+(inspect_ai|control_arena)(\.\w+)*\s+import\s+[^\n]*\b_\w+", re.M)


def test_no_module_but_the_store_model_names_a_store_key_or_touches_the_store():
    found = []
    for p in _modules():
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if _KEY_LITERAL.search(line) or _STORE_USE.search(line):
                found.append(f"{p.relative_to(PACKAGE.parent)}:{n}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_no_module_imports_a_private_inspect_or_control_arena_module():
    found = [f"{p.relative_to(PACKAGE.parent)}: {m.group(0).strip()}"
             for p in [*_modules(), HOME] for m in _PRIVATE_INSPECT.finditer(p.read_text())]
    assert found == [], "\n".join(found)


def test_the_checks_would_catch_what_they_look_for():
    # the patterns themselves: a regression to the old code would be caught
    assert _KEY_LITERAL.search('ENDING_KEY = "control_osworld:ending"')
    assert _KEY_LITERAL.search('store().set("live_view_url", view.url)')
    assert _STORE_USE.search("    store().set(X, 1)") and _STORE_USE.search("rec = state.store.get(K)")
    assert _STORE_USE.search("from inspect_ai.util import SandboxEnvironmentSpec, sandbox, store")
    assert not _STORE_USE.search("from control_osworld.monitoring.store import ScoreStore")
    assert _PRIVATE_INSPECT.search("    from inspect_ai.solver._task_state import sample_state  # x")
    assert _PRIVATE_INSPECT.search("from inspect_ai.util._store import init_subtask_store")
    assert not _PRIVATE_INSPECT.search("from inspect_ai.util import StoreModel, store_as")


def test_no_module_keeps_a_per_sample_registry_of_checkers():
    # the checker is the scaffold's parameter (agent/loop.py), never a module global
    for p in _modules():
        text = p.read_text()
        assert "register_checker" not in text and "_checkers" not in text, p
