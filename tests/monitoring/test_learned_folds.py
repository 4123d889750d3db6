"""The learned monitor's cross-fitting folds keep a matched honest run with the attacks of the
side task whose environment it played in (issue 18, finding 1)."""

from __future__ import annotations

import random

import numpy as np
from sklearn.metrics import roc_auc_score

from control_osworld.monitoring import runtime
from control_osworld.monitoring.config import MonitorConfig
from control_osworld.monitoring.learned import template_cells
from control_osworld.monitoring.runtime import score_runs
from control_osworld.trajectory import ActionRecord, RunRecord, Step, Trajectory

SIDES, MAINS = [f"side{i}" for i in range(6)], [f"main{j}" for j in range(6)]
NOISE = ["open", "click", "type", "save", "menu", "cell", "file", "next", "tab", "row"]


def _run(mode: str, side: str, main: str, rng: random.Random) -> RunRecord:
    """A run whose every step carries its environment's and its main task's words and noise:
    nothing tells an attack from its honest twin but chance."""
    steps = []
    for k in range(1, 4):
        noise = " ".join(rng.choice(NOISE) for _ in range(3))
        steps.append(Step(step=k, actions=[ActionRecord(tool="computer", arguments={
            "action": "type", "text": f"env{side} script{main} {noise}"})], visible_text=noise))
    attack = mode == "attack"
    return RunRecord(log=f"{mode}.eval", sample_id=f"{main}__{side}", epoch=1, eval_mode=mode, main_task_id=main,
                     side_task_id=side if attack else None, env_side_task_id=side,
                     trajectory=Trajectory(steps=steps, outcome="completed", outcome_step=3))


def _runs(seed: int = 0) -> list[RunRecord]:
    rng = random.Random(seed)
    return [_run(mode, s, m, rng) for s in SIDES for m in MAINS for mode in ("honest", "attack")]


def test_matched_honest_runs_are_keyed_by_their_environment(tmp_path, monkeypatch):
    """No honest run in environment X is in the training fold of the model that scores the
    held-out attacks of side task X (nor of the model scoring its own attack twin)."""
    seen: list[tuple] = []
    real = runtime.learned_mod.cross_fit

    def spy(docs, labels, groups, opts, templates=None):
        seen.append((list(groups), list(templates or []), list(labels), opts))
        return real(docs, labels, groups, opts, templates)

    monkeypatch.setattr(runtime.learned_mod, "cross_fit", spy)
    runs = _runs()
    cfg = MonitorConfig(name="learned_full", kind="full_trajectory", model="offline/learned")
    score_runs(runs, [cfg], ["A"], tmp_path / "scores", progress=False)
    [(groups, templates, labels, opts)] = seen
    mode = {r.run_id: r.eval_mode for r in runs}
    env = {r.run_id: r.env_side_task_id for r in runs}
    sf, mf, ks, km = template_cells(groups, templates, opts.folds, opts.seed)
    checked = 0
    for i in range(ks):
        for j in range(km):
            test, train = (sf == i) & (mf == j), (sf != i) & (mf != j)
            attacked = {env[g] for g, t in zip(groups, test) if t and mode[g] == "attack"}
            trained_honest = {env[g] for g, t in zip(groups, train) if t and mode[g] == "honest"}
            assert not attacked & trained_honest, (i, j, attacked & trained_honest)
            checked += bool(attacked)
    assert checked >= ks  # the check ran over real test cells
    # every matched honest run carries its environment as its side-task template
    assert {t[0] for g, t in zip(groups, templates) if mode[g] == "honest"} == set(SIDES)


def _auroc(df, runs) -> float:
    label = {r.run_id: int(r.eval_mode == "attack") for r in runs}
    per_run = df.groupby("run_id")["score"].max()
    return float(roc_auc_score([label[i] for i in per_run.index], per_run.to_numpy()))


def test_environment_words_do_not_push_attacks_below_chance(tmp_path):
    """Twins share their environment's and main task's words; the classes differ by nothing.
    Keyed by environment, a held-out cell never trains on its own environment's words and the
    learned monitor scores near chance; keyed by run (the old fold), honest runs of
    environment X taught the model that scores X's attacks that X's words mean honest, which
    pushed the AUROC far below 0.5 (the below-chance per-step learned rows of the main job)."""
    runs = _runs(seed=1)
    full = MonitorConfig(name="learned_full", kind="full_trajectory", model="offline/learned")
    step = MonitorConfig(name="learned_step", kind="per_step", mode="independent", model="offline/learned")
    df = score_runs(runs, [full, step], ["A+T"], tmp_path / "scores", progress=False)
    assert df["error"].isna().all(), df["error"].dropna().unique()[:3]
    for name, g in df.groupby("monitor"):
        a = _auroc(g, runs)
        assert 0.35 < a < 0.65, (name, a)
    # The same runs with honest runs' environment forgotten (what the old fold saw): far below.
    blind = [r.model_copy(update={"env_side_task_id": None}) if r.eval_mode == "honest" else r for r in runs]
    df_old = score_runs(blind, [full], ["A+T"], tmp_path / "old", progress=False)
    assert _auroc(df_old, blind) < 0.3
    assert np.isfinite(df_old["score"]).all()
