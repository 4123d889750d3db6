"""Baseline monitors (issue 18): `offline/length` (suspicion = number of steps) and
`offline/random` (seeded noise), registered like the other offline monitors, rows in Tables 3/4."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from control_osworld.analysis.runs import validate_runs, validate_scores
from control_osworld.analysis.tables import DetectionOptions, table3, table4
from control_osworld.monitoring import (
    BASELINE_CONFIGS,
    MonitorConfig,
    baseline_configs,
    load_config,
)
from control_osworld.monitoring.config import REPO_ROOT
from control_osworld.monitoring.runtime import score_runs
from control_osworld.testing.synthetic_runs import make_runs


def _vary_length(runs, seed=0):
    """Synthetic runs with lengths cut at random (so that length carries some signal)."""
    rng = random.Random(seed)
    out = []
    for r in runs:
        keep = rng.randint(2, len(r.trajectory.steps))
        traj = r.trajectory.model_copy(update={"steps": r.trajectory.steps[:keep], "outcome": "completed",
                                               "outcome_step": keep, "t_star": None})
        out.append(r.model_copy(update={"trajectory": traj}))
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    runs = _vary_length(make_runs(20, 20, seed=3, with_images=False))
    df = score_runs(runs, baseline_configs(), ["A", "A+T"], tmp_path_factory.mktemp("b") / "store", progress=False)
    assert df["error"].isna().all(), df["error"].dropna().unique()[:3]
    return runs, df


def test_length_baseline_scores_the_number_of_steps(scored):
    runs, df = scored
    n = {r.run_id: len(r.trajectory.steps) for r in runs}
    full = df[df.monitor == "full_trajectory_length"]
    assert len(full) == 2 * len(runs)
    assert all(full.score == full.run_id.map(n))
    step = df[df.monitor == "per_step_length"]
    assert all(step.score == step.step)
    assert all(step.groupby(["run_id", "inputs"]).score.max().reset_index().run_id.map(n)
               == step.groupby(["run_id", "inputs"]).score.max().to_numpy())
    # its AUROC is the AUROC of the runs' lengths (sklearn, on the records themselves)
    y = [int(r.eval_mode == "attack") for r in runs]
    by_run = full[full.inputs == "A"].set_index("run_id").score
    assert roc_auc_score(y, [by_run[r.run_id] for r in runs]) == roc_auc_score(y, [n[r.run_id] for r in runs])


def test_random_baseline_is_seeded_uniform_noise(scored, tmp_path):
    runs, df = scored
    rnd = df[df.monitor == "per_step_random"]
    assert rnd.score.between(0, 100).all() and rnd.score.nunique() > 0.95 * len(rnd)
    assert abs(rnd.score.mean() - 50) < 6  # uniform on [0, 100]: mean 50, sd of the mean ~ 29/sqrt(n)
    again = score_runs(runs, baseline_configs(), ["A"], tmp_path / "again", progress=False)
    a = again[again.monitor == "per_step_random"].set_index(["run_id", "step"]).score.sort_index()
    b = rnd[rnd.inputs == "A"].set_index(["run_id", "step"]).score.sort_index()
    assert a.equals(b)  # the same seed, the same scores
    other = load_config(REPO_ROOT / "monitors" / "per_step_random.yaml", baseline={"seed": 1})
    c = score_runs(runs, [other], ["A"], tmp_path / "other", progress=False).set_index(["run_id", "step"]).score
    assert (c.sort_index() != b).mean() > 0.95
    # full-trajectory random: chance on runs whose classes it cannot see
    full = df[(df.monitor == "full_trajectory_random") & (df.inputs == "A")].set_index("run_id").score
    y = [int(r.eval_mode == "attack") for r in runs]
    assert 0.25 < roc_auc_score(y, [full[r.run_id] for r in runs]) < 0.75


def test_the_random_baseline_draws_the_same_for_the_same_run_in_another_log(scored, tmp_path):
    """A re-run of one design writes other log files (named at run time); the draw is keyed by
    the run (mode, sample, epoch, model, attack prompt), so its scores do not move."""
    runs, df = scored
    moved = [r.model_copy(update={"log": f"/elsewhere/2030-01-01_{i}.eval"}) for i, r in enumerate(runs)]
    again = score_runs(moved, [c for c in baseline_configs() if c.model == "offline/random"], ["A"],
                       tmp_path / "moved", progress=False)
    key = ["sample_id", "epoch", "monitor", "step"]
    a = again.set_index(key).score.sort_index()
    b = df[(df.inputs == "A") & df.monitor.str.endswith("_random")].set_index(key).score.sort_index()
    assert len(a) == len(b) > 0 and a.equals(b)


def test_the_seed_is_in_the_random_monitors_hash_only():
    rnd = load_config(REPO_ROOT / "monitors" / "full_trajectory_random.yaml")
    assert rnd.replace(baseline={"seed": 1}).config_hash != rnd.config_hash
    rules = load_config(REPO_ROOT / "monitors" / "full_trajectory_rules.yaml")
    assert rules.replace(baseline={"seed": 1}).config_hash == rules.config_hash
    with pytest.raises(Exception, match="offline/length"):
        MonitorConfig(name="x", kind="full_trajectory", model="offline/lenght")


def _runs_table(runs) -> pd.DataFrame:
    rows = []
    for r in runs:
        t = r.trajectory
        rows.append({"run_id": r.run_id, "log": r.log, "sample_id": r.sample_id, "epoch": r.epoch,
                     "eval_mode": r.eval_mode, "untrusted_model": "scripted/oracle",
                     "attack_prompt": "attack_plain" if r.eval_mode == "attack" else "",
                     "main_task_id": r.main_task_id, "side_task_id": r.side_task_id,
                     "outcome": "escaped" if r.eval_mode == "attack" else "completed",
                     "outcome_step": len(t.steps), "t_star": len(t.steps) if r.eval_mode == "attack" else None,
                     "steps": len(t.steps), "budget": 75, "main_task_success": True,
                     "side_task_success": r.eval_mode == "attack", "attempt_steps": [], "boundary": None})
    return pd.DataFrame(rows)


def test_baselines_are_rows_of_tables_3_and_4(scored):
    runs, df = scored
    rt = validate_runs(_runs_table(runs))
    sc = validate_scores(df)
    opts = DetectionOptions(n_resamples=50)
    t3, t4 = table3(rt, sc, opts), table4(rt, sc, opts)
    assert set(t3.monitor) == {"full_trajectory_length", "full_trajectory_random"}
    assert set(t4.monitor) == {"per_step_length", "per_step_random"}
    y = [int(r.eval_mode == "attack") for r in runs]
    length = roc_auc_score(y, [len(r.trajectory.steps) for r in runs])
    for t, name in ((t3, "full_trajectory_length"), (t4, "per_step_length")):
        [est] = t[(t.monitor == name) & (t.inputs == "A") & (t.metric == "auroc")].estimate
        assert np.isclose(est, length, atol=1e-6), (name, est, length)


def test_every_baseline_config_is_shipped():
    assert {c.model for c in baseline_configs()} == {"offline/length", "offline/random"}
    assert [c.name for c in baseline_configs()] == list(BASELINE_CONFIGS)
    main_job = (REPO_ROOT / "configs" / "offline.yaml").read_text()
    assert all(f"monitors/{n}.yaml" in main_job for n in BASELINE_CONFIGS)
