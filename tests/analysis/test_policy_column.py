"""The runs table's `policy` (tools | prompted) and `history` (the prompted policy's past steps
shown) columns: recorded in the task's metadata (task.py), read into each run's row
(logs.run_policy; logs from before policies read as tool-calling), checked by validate_runs
(optional columns: null when absent, an unknown policy an InputError naming the column). The
end-to-end rows are asserted in tests/agent/test_prompted_agent.py and
test_action_spaces_loop.py (desktop)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from control_osworld.analysis import runs as R
from control_osworld.control.task import osworld_control
from control_osworld.logs import run_policy


def _header(metadata):
    return SimpleNamespace(eval=SimpleNamespace(metadata=metadata))


def test_the_task_records_its_policy_and_the_row_reads_it():
    prompted = osworld_control(mode="honest", main_tasks="mp-fix-json", policy="prompted", history=5,
                               action_space="pyautogui")
    tools = osworld_control(mode="honest", main_tasks="mp-fix-json", action_space="pyautogui")
    assert (prompted.metadata["policy"], prompted.metadata["history"]) == ("prompted", 5)
    assert (tools.metadata["policy"], tools.metadata["history"]) == ("tools", None)
    assert run_policy(_header(prompted.metadata)) == {"policy": "prompted", "history": 5}
    assert run_policy(_header(tools.metadata)) == {"policy": "tools", "history": None}
    # a log from before policies: its runs were tool-calling
    assert run_policy(_header(None)) == {"policy": "tools", "history": None}
    assert run_policy(_header({"history": 3})) == {"policy": "tools", "history": None}


def _row(**extra):
    return {"run_id": "r1", "log": "l", "sample_id": "s1", "epoch": 1, "eval_mode": "honest", "untrusted_model": "m",
            "attack_prompt": "", "main_task_id": "t", "side_task_id": None, "outcome": "completed",
            "outcome_step": 2, "t_star": None, "steps": 2, "budget": 10, "main_task_success": True,
            "side_task_success": None, "attempt_steps": [], "boundary": None, **extra}


def test_validate_runs_keeps_checks_and_defaults_the_columns():
    assert {"policy", "history"} <= set(R.OPTIONAL_RUN_COLUMNS)
    got = R.validate_runs(pd.DataFrame([_row(policy="prompted", history=3),
                                        {**_row(policy="tools", history=None), "run_id": "r2"}]))
    assert list(got["policy"]) == ["prompted", "tools"]
    assert got["history"].iloc[0] == 3 and pd.isna(got["history"].iloc[1])
    old = R.validate_runs(pd.DataFrame([_row()]))  # a runs table from before the columns
    assert old["policy"].iloc[0] is None and pd.isna(old["history"].iloc[0])
    with pytest.raises(R.InputError, match="runs.csv.*'policy'"):
        R.validate_runs(pd.DataFrame([_row(policy="vibes")]), "runs.csv")
    with pytest.raises(R.InputError, match="runs.csv.*'history'"):
        R.validate_runs(pd.DataFrame([_row(policy="prompted", history=-1)]), "runs.csv")


def test_tables_split_by_policy_when_runs_of_both_are_read():
    """Prompted and tool-calling runs of one model are compared within their own policy."""
    import numpy as np

    from control_osworld.analysis import tables as T
    from control_osworld.analysis.conditions import condition_parts, varying_axes
    from control_osworld.analysis.report import by_action_space
    from control_osworld.testing.synthetic_tables import synthetic_dataset

    runs, scores = synthetic_dataset(200, seed=4)
    runs = runs.copy()
    runs["action_space"] = "pyautogui"
    runs["policy"] = np.random.default_rng(3).choice(["tools", "prompted"], len(runs))
    assert varying_axes(runs) == ["policy"]
    opts = T.DetectionOptions(n_resamples=20, attacks="all")
    df = by_action_space(T.table3, runs, scores, opts)
    assert [lab for lab, _ in condition_parts(df)] == ["policy prompted", "policy tools"]
    sub = runs[runs["policy"] == "prompted"].reset_index(drop=True)
    got = df[df["policy"] == "prompted"].drop(columns="policy").reset_index(drop=True)
    assert got.equals(T.table3(sub, scores, opts))
