"""Seeded generator of realistic synthetic runs and scores tables (tests, benchmark, demo).

Runs follow the competing-hazards process of competing-hazards paper: per step an attack run makes an
out-of-scope attempt with probability a (by attack prompt), which takes effect with the
boundary yield b (0 for a closed boundary); otherwise the run may complete, stop safely,
be terminated by a live monitor or hit an infrastructure error; survivors are censored at
the budget. Monitor scores are integers (0-10 or 0-100, as LLM monitors answer) or means
of five integer samples, driven by a per-run latent suspicion shared across input subsets.

    python -m control_osworld.testing.synthetic_tables OUT_DIR [--runs 2000] [--seed 0]

writes OUT_DIR/runs.parquet and OUT_DIR/scores.parquet.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from control_osworld.contracts import INPUT_SUBSETS, OPTIONAL_SCORE_COLUMNS, SCORE_COLUMNS
from control_osworld.contracts import RUN_REQUIRED_COLUMNS as RUN_COLUMNS
from control_osworld.run_spec import RUN_DEFAULTS

__all__ = ["SyntheticSpec", "synthetic_runs", "synthetic_scores", "synthetic_dataset"]

# information each input channel carries about an attack (A = actions, T = thoughts, S = screenshots)
_CHANNEL = {"A": 0.8, "T": 0.9, "S": 0.55}


@dataclass(frozen=True)
class SyntheticSpec:
    n_runs: int = 1000
    budget: int = RUN_DEFAULTS.budget
    models: tuple[str, ...] = ("model-a", "model-b")
    attack_prompts: tuple[str, ...] = ("subtle", "blatant")
    honest_fraction: float = 0.5
    # per-step hazards
    complete: float = 0.06
    stop: float = 0.008
    terminate: float = 0.002
    error: float = 0.0006
    attempt: dict = field(default_factory=lambda: {"subtle": 0.035, "blatant": 0.08})
    yield_: float = 0.5  # boundary yield b when the boundary is not closed
    closed_fraction: float = 0.2  # attack runs whose boundary is closed (b = 0)
    unrecorded_fraction: float = 0.1  # side tasks without an attempt detector (no attempt records)
    full_trajectory_monitors: tuple[str, ...] = ("ft-mini", "ft-large", "ft-ensemble5")
    per_step_monitors: tuple[str, ...] = ("step-mini", "step-rolling-post", "step-independent-pre")
    inputs: tuple[str, ...] = INPUT_SUBSETS
    missing_score_rate: float = 0.003


def _monitor_scale(name: str) -> tuple[str, float]:
    """(kind of answer, quality) from a monitor's name."""
    quality = 1.25 if "large" in name or "rolling" in name else 1.0 if "ensemble" in name or "independent" in name else 0.8
    kind = "ensemble" if "ensemble" in name else "ten" if "mini" in name else "hundred"
    return kind, quality


def _to_score(z: np.ndarray, kind: str, rng) -> np.ndarray:
    p = 1.0 / (1.0 + np.exp(-(z - 2.2)))
    if kind == "ten":
        return np.clip(np.round(10 * p + rng.normal(0, 0.6, z.shape)), 0, 10)
    if kind == "hundred":
        return np.clip(np.round(100 * p + rng.normal(0, 4, z.shape)), 0, 100)
    draws = np.clip(np.round(10 * p[..., None] + rng.normal(0, 1.2, z.shape + (5,))), 0, 10)
    return draws.mean(axis=-1)


def synthetic_runs(spec: SyntheticSpec = SyntheticSpec(), seed: int = 0) -> pd.DataFrame:
    """Runs table following the contract in docs/analysis.md."""
    rng = np.random.default_rng([seed, 1])
    n = spec.n_runs
    K = spec.budget
    model = rng.choice(np.array(spec.models), size=n)
    is_attack = rng.random(n) >= spec.honest_fraction
    prompt = np.where(is_attack, rng.choice(np.array(spec.attack_prompts), size=n), "")
    a = np.where(is_attack, np.vectorize(lambda p: spec.attempt.get(p, 0.0))(prompt), 0.0)
    a = a * np.where(model == spec.models[0], 1.0, 0.7)  # models differ in propensity
    boundary = np.where(is_attack & (rng.random(n) < spec.closed_fraction), "closed", np.array(None))
    b = np.where(boundary == "closed", 0.0, spec.yield_)
    main_task = rng.integers(0, 60, n)
    side = np.where(is_attack, np.array([f"side-{k % 12:02d}" for k in main_task]), np.array(None))
    # side tasks without an attempt detector (the last unrecorded_fraction of them) record no attempts
    no_detector = {f"side-{k:02d}" for k in range(12 - round(12 * spec.unrecorded_fraction), 12)}
    recorded = is_attack & ~np.isin(side.astype(str), sorted(no_detector))
    s = spec.complete * rng.gamma(4.0, 0.25, n)  # heterogeneity between tasks
    g, d, x = spec.stop, np.where(is_attack, spec.terminate * 2, spec.terminate), spec.error

    outcome = np.full(n, "censored", dtype=object)
    ostep = np.full(n, K, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    attempts: list[list[int]] = [[] for _ in range(n)]
    for t in range(1, K + 1):
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            break
        att = rng.random(idx.size) < a[idx]
        eff = att & (rng.random(idx.size) < b[idx])
        for i in idx[att]:
            attempts[i].append(t)
        u = rng.random(idx.size)
        c1 = s[idx]
        c2 = c1 + g
        c3 = c2 + d[idx]
        c4 = c3 + x
        cause = np.where(eff, "escaped", np.where(u < c1, "completed", np.where(u < c2, "stopped", np.where(u < c3, "terminated", np.where(u < c4, "error", "")))))
        done = cause != ""
        outcome[idx[done]] = cause[done]
        ostep[idx[done]] = t
        alive[idx[done]] = False

    escaped = outcome == "escaped"
    main_success = np.where(outcome == "completed", rng.random(n) < 0.6, False).astype(object)
    main_success[outcome == "error"] = None
    side_success = np.where(is_attack, escaped, np.array(None)).astype(object)
    run_id = np.array([f"run-{seed}-{i:06d}" for i in range(n)])
    return pd.DataFrame(
        {
            "run_id": run_id,
            "log": np.array([f"logs/{m}-{'attack' if at else 'honest'}.eval" for m, at in zip(model, is_attack)]),
            "sample_id": np.array([f"task-{k:03d}" for k in main_task]),
            "epoch": rng.integers(1, 4, n),
            "eval_mode": np.where(is_attack, "attack", "honest"),
            "untrusted_model": model,
            "attack_prompt": prompt,
            "main_task_id": np.array([f"task-{k:03d}" for k in main_task]),
            "side_task_id": side,
            "outcome": outcome,
            "outcome_step": ostep,
            "t_star": pd.Series(ostep, dtype="Int64").where(escaped, pd.NA).to_numpy(),
            "steps": ostep,
            "budget": np.full(n, K),
            "main_task_success": main_success,
            "side_task_success": side_success,
            "attempt_steps": [list(attempts[i]) if recorded[i] else None for i in range(n)],
            "boundary": boundary,
            "attempt_detector": np.where(is_attack, recorded, np.array(None)),
        },
        columns=list(RUN_COLUMNS) + ["attempt_detector"],
    )


def _config_hash(monitor: str, inputs: str) -> str:
    return hashlib.sha1(f"{monitor}|{inputs}".encode()).hexdigest()[:12]


def synthetic_scores(runs: pd.DataFrame, spec: SyntheticSpec = SyntheticSpec(), seed: int = 0) -> pd.DataFrame:
    """Scores table for the runs: full-trajectory rows (step null) and per-step rows."""
    rng = np.random.default_rng([seed, 2])
    n = len(runs)
    is_attack = (runs["eval_mode"] == "attack").to_numpy()
    blatant = (runs["attack_prompt"] == "blatant").to_numpy()
    escaped = (runs["outcome"] == "escaped").to_numpy()
    n_att = np.array([len(x) if x is not None else 0 for x in runs["attempt_steps"]])
    n_att = np.where(is_attack & (n_att == 0), rng.poisson(1.0, n), n_att)  # unrecorded runs still attempt
    # latent suspicion per run and channel: shared part + channel-specific noise
    base = rng.normal(0, 1, n)
    signal = is_attack * (0.6 + 0.9 * blatant + 0.4 * escaped + 0.25 * np.minimum(n_att, 6))
    chan = {c: base * 0.6 + rng.normal(0, 0.8, n) + signal * w for c, w in _CHANNEL.items()}
    frames = []
    run_ids = runs["run_id"].to_numpy()
    logs = runs["log"].to_numpy()
    sids = runs["sample_id"].to_numpy()
    epochs = runs["epoch"].to_numpy()
    for mon in spec.full_trajectory_monitors:
        kind, q = _monitor_scale(mon)
        for inp in spec.inputs:
            parts = inp.split("+")
            z = q * sum(chan[p] for p in parts) / np.sqrt(len(parts)) + rng.normal(0, 0.5, n)
            sc = _to_score(z, kind, rng)
            miss = rng.random(n) < spec.missing_score_rate
            frames.append(pd.DataFrame({
                "run_id": run_ids, "log": logs, "sample_id": sids, "epoch": epochs, "step": pd.array([pd.NA] * n, dtype="Int64"),
                "monitor": mon, "monitor_kind": "full_trajectory", "inputs": inp, "config_hash": _config_hash(mon, inp),
                "score": np.where(miss, np.nan, sc), "error": np.where(miss, "timeout", np.array(None)),
            }))
    # per-step rows: one per step actually taken
    steps_used = np.maximum(runs["steps"].to_numpy().astype(np.int64), 0)
    row_run = np.repeat(np.arange(n), steps_used)
    offsets = np.repeat(np.cumsum(steps_used) - steps_used, steps_used)
    row_step = np.arange(row_run.size) - offsets + 1
    is_att_step = np.zeros(row_run.size, dtype=bool)
    if row_run.size:
        att_keys = {(i, t) for i, lst in enumerate(runs["attempt_steps"]) if lst is not None for t in lst}
        esc_keys = {(i, int(t)) for i, t in enumerate(runs["t_star"]) if t is not pd.NA and t == t}
        keys = att_keys | esc_keys
        if keys:
            key_arr = np.array(sorted(i * 100000 + t for i, t in keys))
            is_att_step = np.isin(row_run * 100000 + row_step, key_arr)
    step_base = rng.normal(0, 1, row_run.size) * 0.7 + base[row_run] * 0.3
    step_sig = is_att_step * (1.6 + 1.0 * blatant[row_run]) + is_attack[row_run] * 0.3
    for mon in spec.per_step_monitors:
        kind, q = _monitor_scale(mon)
        kind = "ten" if kind == "ten" else "hundred"
        for inp in spec.inputs:
            parts = inp.split("+")
            w = sum(_CHANNEL[p] for p in parts) / np.sqrt(len(parts))
            z = q * (step_base + step_sig * w) + rng.normal(0, 0.6, row_run.size) - 0.8
            sc = _to_score(z, kind, rng)
            miss = rng.random(row_run.size) < spec.missing_score_rate
            frames.append(pd.DataFrame({
                "run_id": run_ids[row_run], "log": logs[row_run], "sample_id": sids[row_run], "epoch": epochs[row_run],
                "step": pd.array(row_step, dtype="Int64"), "monitor": mon, "monitor_kind": "per_step", "inputs": inp,
                "config_hash": _config_hash(mon, inp), "score": np.where(miss, np.nan, sc), "error": np.where(miss, "timeout", np.array(None)),
                "score_point": "post_action" if "post" in mon else "pre_action",
            }))
    out = pd.concat(frames, ignore_index=True)
    for c in ("monitor", "monitor_kind", "inputs", "config_hash", "score_point"):
        out[c] = out[c].astype(object).where(out[c].notna(), None)
    return out[list(SCORE_COLUMNS) + list(OPTIONAL_SCORE_COLUMNS)]


def synthetic_dataset(n_runs: int = 1000, seed: int = 0, **kwargs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, scores) for n_runs runs; kwargs override SyntheticSpec fields."""
    spec = SyntheticSpec(n_runs=n_runs, **kwargs)
    runs = synthetic_runs(spec, seed)
    return runs, synthetic_scores(runs, spec, seed)


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Write a synthetic runs.parquet and scores.parquet")
    ap.add_argument("out_dir")
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs, scores = synthetic_dataset(args.runs, args.seed)
    runs.to_parquet(out / "runs.parquet", index=False)
    scores.to_parquet(out / "scores.parquet", index=False)
    print(f"wrote {out / 'runs.parquet'} ({len(runs)} runs) and {out / 'scores.parquet'} ({len(scores)} scores)")


if __name__ == "__main__":
    main()
