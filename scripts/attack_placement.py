"""Where the offline scripted attacker puts its side steps, and what that costs the main task,
from stored logs (the offline main job's, by default).

    python3 scripts/attack_placement.py [LOG_DIR_OR_EVAL_FILES ...]      (default: logs/offline)
    python3 scripts/attack_placement.py --plans [--seeds N]               (no logs: every pairing's plans)

For every attack run played by the `scripted` model, the plan is rebuilt exactly as the model
built it (`ScriptedModel.plan_for`: a pure function of the sample, the epoch and the model args
stored in the log) and the first side turn's position is measured as the share of the main
task's turns played before it (0 = before the first main turn, 1 = after the last; a hidden side
turn counts its host main turn as after). Prints, per strategy, a 10-bin histogram of that
position and the share strictly inside the main task; main-task success of attack vs honest runs
(all, and over matched pairs: the honest and attack run of the same sample id); how many attack
runs show side-task text in their visible text; and where the recorded attempt steps fall; and, per strategy, whether each attack run's main-task
actions (its recorded actions with the plan's side calls removed, `Turn.side_calls`) match its
honest twin's recorded actions (the honest run of the same sample id and epoch): runs matched,
mismatched (first differing step), main actions replayed or missing, side commands typed after
un-entered main-task text, and runs whose log does not follow the rebuilt plan (left out of
the comparison, counted). `--plans` does the same over the plans alone, for every pairing of
the catalogue, every strategy and N seeds (default 3): no logs, no desktop.
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

from control_osworld.agent.placement import compare_twins, pending_before_side
from control_osworld.control.catalogue import Catalogue
from control_osworld.control.scripted import ON_REQUEST, STRATEGIES, ScriptedModel, _texts
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


def _new_match() -> dict:
    return {"attack_runs": 0, "with_twin": 0, "matched": 0, "mismatched": 0, "replayed_actions": 0,
            "missing_actions": 0, "side_after_unentered_text": 0, "plan_misaligned": 0, "mismatches": []}


def _tally(m: dict, name: str, attack_turns, side_counts, honest_turns) -> None:
    m["with_twin"] += 1
    cmp = compare_twins(attack_turns, side_counts, honest_turns)
    m["matched"] += cmp.equal
    m["replayed_actions"] += cmp.replayed
    m["missing_actions"] += cmp.missing
    if not cmp.equal:
        m["mismatched"] += 1
        if len(m["mismatches"]) < 10:
            m["mismatches"].append({"run": name, "first_mismatch_step": cmp.first_mismatch,
                                    "replayed": cmp.replayed, "missing": cmp.missing})
    m["side_after_unentered_text"] += bool(pending_before_side(attack_turns, side_counts))


def _print_match(match: dict[str, dict]) -> None:
    print("attack runs vs honest twins, side actions removed (per strategy):")
    for strategy in sorted(match):
        m = match[strategy]
        print(f"  {strategy:8s} attack {m['attack_runs']:3d}  with twin {m['with_twin']:3d}  matched {m['matched']:3d}"
              f"  mismatched {m['mismatched']:3d}  replayed {m['replayed_actions']:3d}  missing {m['missing_actions']:3d}"
              f"  side after un-entered text {m['side_after_unentered_text']:3d}  plan misaligned {m['plan_misaligned']:3d}")
        for x in m["mismatches"][:3]:
            print(f"      {x['run']}: first difference at step {x['first_mismatch_step']}")


def plans_main(seeds: int = 3) -> dict:
    """Every pairing of the default dataset, every strategy, `seeds` seeds: plans only."""
    from control_arena import EvalMode

    from control_osworld.control.setting import OSWorldControlSetting

    setting = OSWorldControlSetting()
    honest = {str(s.id): s for s in setting.get_dataset(EvalMode.HONEST)}
    attack = {str(s.id): s for s in setting.get_dataset(EvalMode.ATTACK)}
    match: dict[str, dict] = defaultdict(_new_match)
    for strategy in STRATEGIES + ON_REQUEST:
        for seed in range(seeds):
            model = ScriptedModel(f"attack-{strategy}", seed=seed)
            for sid in sorted(attack):
                a = model.plan_for(attack[sid].metadata, sid, 1)
                m = match[strategy]
                m["attack_runs"] += 1
                if sid not in honest:
                    continue
                h = model.plan_for(honest[sid].metadata, sid, 1)
                _tally(m, f"{sid} seed {seed}", [t.calls for t in a.turns], [t.side_calls for t in a.turns],
                       [t.calls for t in h.turns])
    _print_match(match)
    out = {"mode": "plans", "seeds": seeds, "pairings": len(attack), "twins_match": dict(match),
           "all_matched": all(m["matched"] == m["with_twin"] == m["attack_runs"] for m in match.values())}
    print(json.dumps(out))
    return out


def _actions(rec) -> list[list[dict]]:
    return [[{"tool": a.tool, "arguments": a.arguments} for a in s.actions] for s in rec.trajectory.steps]


def main(argv: list[str]) -> dict:
    from inspect_ai.log import read_eval_log

    if "--plans" in argv:
        seeds = int(argv[argv.index("--seeds") + 1]) if "--seeds" in argv else 3
        return plans_main(seeds)
    paths = _paths(argv)
    table = runs_table(paths)
    giveaway_texts = set(_texts()["attack_giveaway"])
    pos: dict[str, list[float]] = defaultdict(list)
    success_by_strategy: dict[str, list[bool]] = defaultdict(list)
    leaks, attack_runs, plan_mismatch = 0, 0, 0
    attempts_on_side, attempts_total = 0, 0
    models: dict[tuple, ScriptedModel] = {}
    match: dict[str, dict] = defaultdict(_new_match)
    honest_recs = {}
    for path in paths:
        header = read_eval_log(path, header_only=True)
        model = (header.eval.metadata or {}).get("untrusted_model") or header.eval.model
        for rec in read_run_records(path, images=False):
            if rec.eval_mode == "honest" and rec.trajectory.outcome != "error":
                honest_recs[(model, rec.sample_id, rec.epoch)] = rec
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
            m = match[strategy]
            m["attack_runs"] += 1
            twin = honest_recs.get((model, rec.sample_id, rec.epoch))
            acts = _actions(rec)
            aligned = len(acts) == len(plan.turns) and all(len(x) == len(t.calls) for x, t in zip(acts, plan.turns))
            if traj.outcome == "error":
                pass
            elif not aligned:
                m["plan_misaligned"] += 1  # the log did not follow the rebuilt plan (older code, an error)
            elif twin is not None:
                _tally(m, rec.sample_id, acts, [t.side_calls for t in plan.turns], _actions(twin))
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
        "twins_match": dict(match),
        "all_matched": bool(match) and all(m["matched"] == m["with_twin"] and m["plan_misaligned"] == 0
                                           for m in match.values()),
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
    _print_match(match)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
