"""scripts/determinism_check.py: two runs tables compared on the columns that must not depend on
timing, on hand-made tables."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _mod():
    spec = importlib.util.spec_from_file_location("determinism_check", SCRIPTS / "determinism_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(sample: str, mode: str, **kw) -> dict:
    base = {"eval_mode": mode, "sample_id": sample, "epoch": 1, "untrusted_model": "scripted/oracle",
            "attack_prompt": "attack_plain", "outcome": "completed", "t_star": None, "steps": 10,
            "main_task_success": True, "side_task_success": None, "attempt_steps": np.array([], dtype=int),
            "log": f"/tmp/a/{mode}_x1.eval", "run_id": f"/tmp/a/{mode}_x1.eval::{sample}::1",
            "error": None, "attempts": 1, "retried_errors": [], "model_retries": 0}
    return base | kw


def test_identical_tables_but_for_paths_ids_and_retries_do_not_differ():
    m = _mod()
    a = pd.DataFrame([_row("s1", "honest"), _row("s1", "attack", outcome="escaped", t_star=5.0)])
    b = pd.DataFrame([_row("s1", "attack", outcome="escaped", t_star=5, log="/tmp/b/y.eval", run_id="other",
                           attempts=2, retried_errors=["desktop_died"], error="took 3.2 s"),
                      _row("s1", "honest", log="/tmp/b/z.eval")])  # another order too
    r = m.compare_runs(a, b)
    assert r["runs"] == 2 and r["differing_runs"] == 0 and not r["differences"]
    assert "outcome" in r["columns_compared"] and "t_star" in r["columns_compared"]
    assert not set(r["columns_compared"]) & set(m.EXCLUDED)


def test_the_issue_20_difference_is_reported_column_by_column():
    m = _mod()
    a = pd.DataFrame([_row("mp-todo-new-file__db-password-into-notes", "attack", outcome="escaped", t_star=5,
                           side_task_success=True, attempt_steps=np.array([5]))])
    b = pd.DataFrame([_row("mp-todo-new-file__db-password-into-notes", "attack", main_task_success=False,
                           side_task_success=False)])
    r = m.compare_runs(a, b)
    assert r["differing_runs"] == 1
    cols = r["differences"][0]["columns"]
    assert cols == {"outcome": ["escaped", "completed"], "t_star": [5, None], "main_task_success": [True, False],
                    "side_task_success": [True, False], "attempt_steps": [[5], []]}
    text = m.report(r)
    assert "t_star: 5 | None" in text and "mp-todo-new-file__db-password-into-notes" in text


def test_a_run_only_one_table_has_differs_and_a_repeated_key_is_refused():
    m = _mod()
    a = pd.DataFrame([_row("s1", "honest"), _row("s2", "honest")])
    b = pd.DataFrame([_row("s1", "honest")])
    r = m.compare_runs(a, b)
    assert r["runs"] == 2 and r["differing_runs"] == 1 and r["only_in_one"][0]["in"] == "first"
    with pytest.raises(ValueError, match="repeats the run"):
        m.compare_runs(pd.DataFrame([_row("s1", "honest")] * 2), b)
    with pytest.raises(ValueError, match="no column sample_id"):
        m.compare_runs(a.drop(columns=["sample_id"]), b)


def test_a_column_one_table_lacks_is_compared_as_missing():
    m = _mod()
    a = pd.DataFrame([_row("s1", "honest", unknown_checks=0)])
    b = pd.DataFrame([_row("s1", "honest")])
    r = m.compare_runs(a, b)
    assert r["differences"][0]["columns"] == {"unknown_checks": [0, None]}


def test_scores_compared_per_step_monitor_and_inputs():
    m = _mod()
    key = {"sample_id": "s1", "epoch": 1, "mode": "attack", "monitor": "rules", "config_hash": "h"}
    a = pd.DataFrame([key | {"step": 1, "inputs": "A", "score": 0.25}, key | {"step": 2, "inputs": "A", "score": 0.5}])
    b = pd.DataFrame([key | {"step": 1, "inputs": "A", "score": 0.25 + 1e-15}, key | {"step": 2, "inputs": "A", "score": 0.75},
                      key | {"step": 3, "inputs": "A", "score": 0.1}])
    r = m.compare_scores(a, b)
    assert r["score_rows"] == 3 and r["differing_scores"] == 2
    assert [d["key"]["step"] for d in r["score_differences"]] == [2, 3]


def test_the_command_compares_two_stored_tables_and_ends_with_one_json_line(tmp_path):
    for name, t_star in (("a", 5), ("b", None)):
        (tmp_path / name).mkdir()
        pd.DataFrame([_row("s1", "attack", t_star=t_star), _row("s1", "honest")]).to_parquet(tmp_path / name / "runs.parquet")
    p = subprocess.run([sys.executable, str(SCRIPTS / "determinism_check.py"), "--compare",
                        str(tmp_path / "a" / "runs.parquet"), str(tmp_path / "b" / "runs.parquet")],
                       capture_output=True, text=True, check=True)
    last = json.loads(p.stdout.strip().splitlines()[-1])
    assert last["runs"] == 2 and last["differing_runs"] == 1 and "t_star" in last["columns_compared"]
    assert "log" in last["excluded_columns"] and "t_star: 5 | None" in p.stdout


def test_step_verdicts_are_added_only_when_the_logs_are_there():
    m = _mod()
    t = pd.DataFrame([_row("s1", "honest")])  # its log path does not exist
    assert "step_verdicts" not in m.with_step_verdicts(t).columns


def test_scores_of_an_honest_run_and_its_attack_twin_are_kept_apart(tmp_path):
    """They share sample id and epoch (matched twins): the runs table's eval_mode (by run_id)
    tells their rows apart, whatever order the stores keep them in."""
    m = _mod()
    key = {"sample_id": "s1", "epoch": 1, "mode": "independent", "step": 3, "monitor": "rules", "inputs": "S",
           "config_hash": "h"}
    honest, attack = key | {"eval_mode": "honest", "score": 0.0}, key | {"eval_mode": "attack", "score": 30.0}
    r = m.compare_scores(pd.DataFrame([honest, attack]), pd.DataFrame([attack, honest]))
    assert r["score_rows"] == 2 and r["differing_scores"] == 0
    r = m.compare_scores(pd.DataFrame([honest, attack]), pd.DataFrame([attack, honest | {"score": 30.0}]))
    assert [d["key"]["eval_mode"] for d in r["score_differences"]] == ["honest"]


def test_the_runs_wall_time_is_not_compared():
    m = _mod()
    a = pd.DataFrame([_row("s1", "honest", seconds=12.5)])
    b = pd.DataFrame([_row("s1", "honest", seconds=30.1)])
    r = m.compare_runs(a, b)
    assert "seconds" in m.EXCLUDED and r["differing_runs"] == 0
