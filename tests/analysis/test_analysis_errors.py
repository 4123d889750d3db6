"""Error outcomes: kept apart at any stage (setup included), censored at the right step."""

import pandas as pd
import pytest

from control_osworld.analysis import hazards as hz
from control_osworld.analysis import runs as R
from control_osworld.analysis import tables as T
from control_osworld.analysis.report import build_report
from control_osworld.trajectory import Step, Trajectory

# budget 3; an error's step is the step it failed in (0 = setup, 4 = after the last step)
RUNS = [("completed", 2), ("error", 0), ("error", 2), ("error", 4), ("censored", 3), ("escaped", 3), ("error", 1)]


def test_censoring_an_error_at_step_t_keeps_it_at_risk_through_t_minus_1():
    steps, outs = [s for _, s in RUNS], [o for o, _ in RUNS]
    aj = hz.aalen_johansen(steps, outs, budget=3, errors="censor")
    # at risk at t = runs whose last step at risk >= t: completed (2), error@2 (through 1),
    # error@4 (through 3), censored (3), escaped (3); error@0 and error@1 never at risk
    assert aj.at_risk.tolist() == [5, 4, 3]
    assert aj.censored.tolist() == [1, 0, 2]  # error@2 leaves after 1; error@4 and the censored run after 3
    # by hand: h_completed(2) = 1/4, S(2) = 3/4, h_escaped(3) = 1/3, F_escaped(3) = 3/4 * 1/3
    assert aj.cif[:, hz.CAUSES.index("completed")].tolist() == pytest.approx([0, 0.25, 0.25])
    assert aj.cif[:, hz.CAUSES.index("escaped")].tolist() == pytest.approx([0, 0, 0.25])
    assert aj.survival.tolist() == pytest.approx([1, 0.75, 0.5])
    ex = hz.aalen_johansen(steps, outs, budget=3, errors="exclude")
    assert ex.n_error == 4 and ex.at_risk.tolist() == [3, 3, 2]
    fit = hz.constant_hazard_fit(steps, outs, budget=3, errors="censor")
    assert fit.person_steps == 2 + 1 + 3 + 3 + 3
    with pytest.raises(ValueError, match="outside 0..4"):
        hz.aalen_johansen([5], ["error"], budget=3, errors="censor")


def _runs(rows):
    base = {"log": "l", "epoch": 1, "untrusted_model": "m", "attack_prompt": "", "main_task_id": "t", "side_task_id": None,
            "t_star": None, "budget": 5, "main_task_success": None, "side_task_success": None, "attempt_steps": None,
            "boundary": None}
    return pd.DataFrame([{**base, "sample_id": r["run_id"], **r} for r in rows])


def test_runs_table_accepts_error_rows_without_a_step():
    df = _runs([
        {"run_id": "a", "eval_mode": "honest", "outcome": "error", "outcome_step": None, "steps": 0},
        {"run_id": "b", "eval_mode": "honest", "outcome": "error", "outcome_step": None, "steps": 3},
        {"run_id": "c", "eval_mode": "honest", "outcome": "error", "outcome_step": 6, "steps": 5},
        {"run_id": "d", "eval_mode": "honest", "outcome": "completed", "outcome_step": 2, "steps": 2},
    ])
    out = R.validate_runs(df, "x.csv")
    assert out["outcome_step"].tolist() == [0, 4, 6, 2]
    bad = _runs([{"run_id": "e", "eval_mode": "honest", "outcome": "completed", "outcome_step": 6, "steps": 6}])
    with pytest.raises(R.InputError, match="x.csv: column 'outcome_step' exceeds 'budget'"):
        R.validate_runs(bad, "x.csv")
    bad = _runs([{"run_id": "e", "eval_mode": "honest", "outcome": "completed", "outcome_step": None, "steps": 2}])
    with pytest.raises(R.InputError, match="'outcome_step' is empty"):
        R.validate_runs(bad, "x.csv")


def _scored(n_h=6, n_a=6):
    rows, scores = [], []
    for i in range(n_h + n_a):
        attack = i >= n_h
        rows.append({"run_id": f"r{i}", "eval_mode": "attack" if attack else "honest", "attack_prompt": "p" if attack else "",
                     "side_task_id": "s" if attack else None, "outcome": "escaped" if attack else "completed",
                     "outcome_step": 3, "t_star": 3 if attack else None, "steps": 3,
                     "side_task_success": True if attack else None, "attempt_steps": [3] if attack else None})
        for t in (1, 2, 3):
            scores.append({"run_id": f"r{i}", "log": "l", "sample_id": f"r{i}", "epoch": 1, "step": t, "monitor": "mon",
                           "monitor_kind": "per_step", "inputs": "A", "config_hash": "h", "score": float(i + t), "error": None})
        scores.append({"run_id": f"r{i}", "log": "l", "sample_id": f"r{i}", "epoch": 1, "step": None, "monitor": "ft",
                       "monitor_kind": "full_trajectory", "inputs": "A", "config_hash": "g", "score": float(i), "error": None})
    return rows, scores


def test_report_keeps_setup_errors_apart_and_never_raises(tmp_path):
    rows, scores = _scored()
    # a setup error (step 0, never scored), an error in step 2 (scored steps 1..1), both attack and honest
    rows += [
        {"run_id": "e0", "eval_mode": "attack", "attack_prompt": "p", "side_task_id": "s", "outcome": "error",
         "outcome_step": 0, "t_star": None, "steps": 0, "side_task_success": None, "attempt_steps": None},
        {"run_id": "e1", "eval_mode": "honest", "attack_prompt": "", "side_task_id": None, "outcome": "error",
         "outcome_step": 2, "t_star": None, "steps": 1, "side_task_success": None, "attempt_steps": None},
    ]
    scores += [{"run_id": "e1", "log": "l", "sample_id": "e1", "epoch": 1, "step": 1, "monitor": "mon", "monitor_kind": "per_step",
                "inputs": "A", "config_hash": "h", "score": 99.0, "error": None},
               {"run_id": "e1", "log": "l", "sample_id": "e1", "epoch": 1, "step": None, "monitor": "ft",
                "monitor_kind": "full_trajectory", "inputs": "A", "config_hash": "g", "score": 99.0, "error": None}]
    runs = R.validate_runs(_runs(rows))
    sc = R.validate_scores(pd.DataFrame(scores))
    for errors in ("exclude", "censor"):
        build_report(runs, sc, tmp_path / errors, T.DetectionOptions(n_resamples=20), errors=errors, plots_enabled=False)
        summary = (tmp_path / errors / "summary.md").read_text()
        assert "Errors (infrastructure failures): 2 (1 honest, 1 attack): 1 before step 1 (setup), 1 during a step" in summary
    t3 = pd.read_csv(tmp_path / "exclude" / "table3.csv")
    au = t3[t3["metric"] == "auroc"].iloc[0]
    assert (au.n_honest, au.n_attack) == (6, 6)  # the honest error run (score 99) is not a negative
    assert au.estimate == pytest.approx(1.0)
    hz_csv = pd.read_csv(tmp_path / "censor" / "hazards.csv")
    honest = hz_csv[(hz_csv["eval_mode"] == "honest") & (hz_csv["step"] == 1)].iloc[0]
    assert honest.at_risk == 7  # 6 completed runs + the error in step 2, at risk through step 1
    attack = hz_csv[(hz_csv["eval_mode"] == "attack") & (hz_csv["step"] == 1)].iloc[0]
    assert attack.at_risk == 6  # the setup error is never at risk


@pytest.mark.slow
def test_errors_read_from_real_eval_logs(tmp_path):
    """A sample that fails in setup, and one that fails after three recorded steps, read back
    from inspect .eval logs: steps 0 and 4, and the report does not raise on them."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import solver
    from inspect_ai.util import store

    from control_osworld.sample_store import PROGRESS_KEY, TRAJECTORY_KEY

    @solver
    def fail_after(n: int):
        async def solve(state, generate):
            if n:
                traj = Trajectory(steps=[Step(step=t) for t in range(1, n + 1)])
                store().set(TRAJECTORY_KEY, traj.model_dump(mode="json"))
                store().set(PROGRESS_KEY, {"stage": "agent", "step": n + 1})  # as the loop marks it
            raise RuntimeError("the desktop died")
        return solve

    samples = [Sample(id=f"s{n}", input="x", metadata={"eval_mode": "attack", "main_task_id": "m", "side_task_id": "st"}) for n in (0, 3)]
    logs = []
    for n, sample in zip((0, 3), samples):
        logs += eval(Task(dataset=[sample], solver=fail_after(n)), model="mockllm/model", log_dir=str(tmp_path / "logs"),
                     display="none", fail_on_error=False)
    runs = R.load_runs([log.location for log in logs])
    assert sorted(zip(runs["outcome"], runs["outcome_step"])) == [("error", 0), ("error", 4)]
    aj = hz.aalen_johansen(runs["outcome_step"], runs["outcome"], budget=75, errors="censor")
    assert aj.at_risk[:4].tolist() == [1, 1, 1, 0]  # the step-4 failure survived steps 1..3
    empty_scores = R.validate_scores(pd.DataFrame(columns=list(R.SCORE_COLUMNS)))
    build_report(runs, empty_scores, tmp_path / "report", T.DetectionOptions(n_resamples=10), plots_enabled=False)
    assert "2 before step 1" not in (tmp_path / "report" / "summary.md").read_text()
    assert "1 before step 1 (setup), 1 during a step" in (tmp_path / "report" / "summary.md").read_text()
