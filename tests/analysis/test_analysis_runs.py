"""Loading and validating runs and scores tables: clear errors naming file and column."""

import json

import pandas as pd
import pytest

from control_osworld.analysis import runs as R
from control_osworld.testing.synthetic_tables import synthetic_dataset


@pytest.fixture(scope="module")
def data():
    return synthetic_dataset(80, seed=3)


def test_round_trip_parquet_and_csv(tmp_path, data):
    runs, scores = data
    runs.to_parquet(tmp_path / "runs.parquet")
    scores.to_parquet(tmp_path / "scores.parquet")
    csv = runs.copy()
    csv["attempt_steps"] = [None if v is None else json.dumps(v) for v in runs["attempt_steps"]]
    csv.to_csv(tmp_path / "runs.csv", index=False)
    a = R.load_runs(tmp_path / "runs.parquet")
    b = R.load_runs([tmp_path / "runs.csv"])
    assert a["run_id"].tolist() == b["run_id"].tolist()
    assert a["attempt_steps"].tolist() == b["attempt_steps"].tolist()
    assert a["side_task_success"].tolist() == b["side_task_success"].tolist()
    assert (a["t_star"].isna() == b["t_star"].isna()).all()
    s = R.load_scores(tmp_path / "scores.parquet")
    assert len(s) == len(scores) and set(s["inputs"]) <= set(R.INPUT_SUBSETS)


def test_missing_column_names_file_and_column(tmp_path, data):
    runs, _ = data
    p = tmp_path / "bad.csv"
    runs.drop(columns=["outcome_step"]).to_csv(p, index=False)
    with pytest.raises(R.InputError, match=r"bad\.csv.*'outcome_step'"):
        R.load_runs(p)


@pytest.mark.parametrize("col,value,pattern", [
    ("outcome", "done", r"'outcome' has 'done'.*allowed"),
    ("eval_mode", "red", r"'eval_mode' has 'red'"),
    ("outcome_step", "x", r"'outcome_step' is not a whole number"),
    ("budget", -3, r"'budget' below 1"),
    ("attempt_steps", "[0]", r"'attempt_steps'.*steps >= 1"),
    ("side_task_success", "maybe", r"'side_task_success' is not a boolean"),
])
def test_bad_values_name_file_column_and_row(tmp_path, data, col, value, pattern):
    runs = data[0].copy()
    runs["attempt_steps"] = [None if v is None else json.dumps(v) for v in runs["attempt_steps"]]
    runs[col] = runs[col].astype(object)
    runs.loc[4, col] = value
    p = tmp_path / "runs.csv"
    runs.to_csv(p, index=False)
    with pytest.raises(R.InputError, match=r"runs\.csv: column " + pattern):
        R.load_runs(p)


def test_duplicates_and_contract_checks(tmp_path, data):
    runs = data[0].copy()
    runs.loc[1, "run_id"] = runs.loc[0, "run_id"]
    with pytest.raises(R.InputError, match="'run_id' repeats"):
        R.validate_runs(runs, "x.parquet")
    runs = data[0].copy()
    esc = runs.index[runs["outcome"] == "escaped"][0]
    runs.loc[esc, "t_star"] = runs.loc[esc, "outcome_step"] + 1 if runs.loc[esc, "outcome_step"] < 75 else 1
    with pytest.raises(R.InputError, match="t_star"):
        R.validate_runs(runs, "x.parquet")


def test_scores_validation(data):
    _, scores = data
    s = scores.head(50).copy()
    s.loc[3, "inputs"] = "S+A"  # canonicalised
    assert R.validate_scores(s)["inputs"].iloc[3] == "A+S"
    s.loc[3, "inputs"] = "X"
    with pytest.raises(R.InputError, match="'inputs' has 'X'"):
        R.validate_scores(s, "scores.parquet")
    s = scores[scores["monitor_kind"] == "per_step"].head(5).copy()
    s["step"] = pd.array([pd.NA] * 5, dtype="Int64")
    with pytest.raises(R.InputError, match="'step' is empty for a per_step"):
        R.validate_scores(s, "scores.parquet")
    s = scores.head(5)
    with pytest.raises(R.InputError, match="more than one score"):
        R.validate_scores(pd.concat([s, s.head(1)]), "scores.parquet")


def test_unreadable_eval_log_names_the_file(tmp_path):
    p = tmp_path / "run.eval"
    p.write_bytes(b"PK")
    with pytest.raises(R.InputError, match=r"run\.eval: not a readable control-osworld \.eval log"):
        R.load_runs(p)
    with pytest.raises(R.InputError, match="unsupported file type"):
        (tmp_path / "x.txt").write_text("a")
        R.load_runs(tmp_path / "x.txt")
