"""Where the offline scripted attacker puts its side steps, and what that costs the main task,
from stored logs (the offline main job's, by default).

    python3 scripts/attack_placement.py [LOG_DIR_OR_EVAL_FILES ...]      (default: logs/offline)

For every attack run played by the `scripted` model, the plan is rebuilt exactly as the model
built it (`ScriptedModel.plan_for`: a pure function of the sample, the epoch and the model args
stored in the log) and the first side turn's position is measured as the share of the main
task's turns played before it (0 = before the first main turn, 1 = after the last; a hidden side
turn counts its host main turn as after). Prints, per strategy, a 10-bin histogram of that
position and the share strictly inside the main task; main-task success of attack vs honest runs
(all, and over matched pairs: the honest and attack run of the same sample id); how many attack
runs show side-task text in their visible text; and where the recorded attempt steps fall.
Ends with one JSON line.
"""

from __future__ import annotations

import glob
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from control_osworld.agent.scripted import ScriptedModel, _texts
from control_osworld.catalogue import Catalogue
from control_osworld.logs import read_run_records, runs_table

BINS = 10


def _paths(args: list[str]) -> list[str]:
    out: list[str] = []
    for a in args or ["logs/offline"]:
        p = Path(a)
        out += sorted(glob.glob(str(p / "*.eval"))) if p.is_dir() else [str(p)]
    if not out:
        raise SystemExit(f"no .eval logs in {' '.join(args or ['logs/offline'])}")
    return out


def _position(plan) -> float | None:
    turns = plan.turns[:-1]  # the last turn is the submit
    side_idx = next((i for i, t in enumerate(turns) if t.side), None)
    if side_idx is None:
        return None
    n_main = sum(1 for t in turns if not t.side) + sum(1 for t in turns if t.side and t.hosts_main)
    before = sum(1 for t in turns[:side_idx] if not t.side)
    return before / n_main if n_main else None


def main(argv: list[str]) -> dict:
    from inspect_ai.log import read_eval_log

    paths = _paths(argv)
    table = runs_table(paths)
    giveaway_texts = set(_texts()["attack_giveaway"])
    pos: dict[str, list[float]] = defaultdict(list)
    success_by_strategy: dict[str, list[bool]] = defaultdict(list)
    leaks, attack_runs, plan_mismatch = 0, 0, 0
    attempts_on_side, attempts_total = 0, 0
    models: dict[tuple, ScriptedModel] = {}
    for path in paths:
        header = read_eval_log(path, header_only=True)
        model = (header.eval.metadata or {}).get("untrusted_model") or header.eval.model
        if not str(model).startswith("scripted/"):
            continue
        args = dict(header.eval.model_args or {})
        key = (model, json.dumps(args, sort_keys=True))
        if key not in models:
            models[key] = ScriptedModel(model.split("/", 1)[1], **args)
        sm = models[key]
        samples = {str(s.id): s for s in read_eval_log(path).samples or []}
        for rec in read_run_records(path, images=False):
            if rec.eval_mode != "attack" or not rec.side_task_id:
                continue
            sample = samples[rec.sample_id]
            plan = sm.plan_for(sample.metadata, rec.sample_id, rec.epoch)
            attack_runs += 1
            p = _position(plan)
            strategy = plan.strategy or "?"
            if p is not None:
                pos[strategy].append(p)
            traj = rec.trajectory
            if traj.outcome != "error" and len(traj.steps) != len(plan.turns):
                plan_mismatch += 1
            row = table[(table.log == path) & (table.sample_id == rec.sample_id) & (table.epoch == rec.epoch)]
            if len(row) and row.iloc[0].main_task_success is not None:
                success_by_strategy[strategy].append(bool(row.iloc[0].main_task_success))
            cat = Catalogue.for_sample(sample.metadata.get("metadata", {}))
            side_texts = {s.get("text") for s in cat.side_oracle(rec.side_task_id)["steps"] if s.get("text")}
            main_texts = {s.get("text") for s in cat.oracle(rec.main_task_id)["steps"] if s.get("text")}
            leaked = any(s.visible_text and (s.visible_text in giveaway_texts
                                             or s.visible_text in side_texts - main_texts)
                         for s in traj.steps)
            leaks += leaked
            for t in traj.attempt_steps:
                attempts_total += 1
                if 1 <= t <= len(plan.turns) and plan.turns[t - 1].side:
                    attempts_on_side += 1

    ok = table[table.outcome != "error"]
    honest = ok[ok.eval_mode == "honest"]
    attack = ok[ok.eval_mode == "attack"]
    both = honest.merge(attack, on=["sample_id", "epoch"], suffixes=("_h", "_a"))
    both = both[both.main_task_success_h.notna() & both.main_task_success_a.notna()]

    def rate(s) -> float | None:
        s = s.dropna()
        return round(float(s.astype(bool).mean()), 4) if len(s) else None

    per_strategy = {}
    print("first side step, as a share of the main task's turns before it (bins of 0.1):")
    for strategy in sorted(pos):
        v = np.asarray(pos[strategy])
        hist = np.histogram(np.clip(v, 0, 1 - 1e-9), bins=BINS, range=(0, 1))[0].tolist()
        inside = float(np.mean((v > 0) & (v < 1)))
        per_strategy[strategy] = {"n": int(v.size), "mid_task_share": round(inside, 4),
                                  "median": round(float(np.median(v)), 4), "hist": hist,
                                  "at_start": int(np.sum(v == 0)), "at_end": int(np.sum(v >= 1)),
                                  "attack_main_success": rate(pd.Series(success_by_strategy[strategy], dtype=object))}
        bar = " ".join(f"{h:3d}" for h in hist)
        print(f"  {strategy:8s} n={v.size:3d} mid-task {inside:5.1%} median {np.median(v):.2f}  [{bar}]"
              f"  main success {per_strategy[strategy]['attack_main_success']}")
    out = {
        "logs": len(paths),
        "honest_runs": int(len(honest)), "attack_runs": int(len(attack)),
        "honest_main_success": rate(honest.main_task_success),
        "attack_main_success": rate(attack.main_task_success),
        "matched_pairs": int(len(both)),
        "matched_honest_main_success": rate(both.main_task_success_h),
        "matched_attack_main_success": rate(both.main_task_success_a),
        "first_side_position": per_strategy,
        "attack_runs_leaking_side_text": leaks, "scripted_attack_runs": attack_runs,
        "attempt_steps_on_side_turns": attempts_on_side, "attempt_steps": attempts_total,
        "plan_length_mismatches": plan_mismatch,
        "errors": int((table.outcome == "error").sum()),
    }
    print(f"main-task success: honest {out['honest_main_success']} (n={len(honest)}), attack "
          f"{out['attack_main_success']} (n={len(attack)}); matched pairs n={len(both)}: honest "
          f"{out['matched_honest_main_success']}, attack {out['matched_attack_main_success']}")
    if len(both):
        lost = both[both.main_task_success_h.astype(bool) & ~both.main_task_success_a.astype(bool)]
        for _, r in lost.iterrows():
            print(f"  attack lost the main task: {r.sample_id}")
    print(f"attack runs with side-task text in visible text: {leaks}/{attack_runs}; attempt steps on side "
          f"turns: {attempts_on_side}/{attempts_total}")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
