#!/usr/bin/env python3
"""Benchmark of the dilemma family (toxic proactivity).

* scenarios_per_s: the template mode rendering and validating the 16-scenario pack, repeated;
* text_turns_per_s: the offline text simulation through inspect (scripted target
  `dilemma/balanced` + scripted `dilemma/environment`), turns played per wall-clock second,
  inspect's own overhead (sample scheduling, logging) included, after a one-sample warm-up eval
  that pays inspect's imports;
* report_seconds: the whole dilemma report (Table-5, factor table with bootstrap CIs,
  procrastination, classes, terminal turns, hazards with bootstrap bands, plots) on
  SYNTHETIC runs: 10 models x 400 runs (the toxic-proactivity paper's design: 16 scenarios x 25), conditions
  cycling over 8 factor levels, 2000 resamples. The synthetic runs are drawn from the
  scripted policies' trajectory classes, not from inspect logs.

The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from control_osworld.proactivity.classify import classify  # noqa: E402
from control_osworld.proactivity.report import build_proactivity_report  # noqa: E402
from control_osworld.proactivity.runs import RUN_COLUMNS, load_dilemma_runs, validate_dilemma_runs  # noqa: E402
from control_osworld.proactivity.scripted import draw_class, plan_tools  # noqa: E402
from control_osworld.proactivity.task import parse_conditions, proactivity  # noqa: E402
from control_osworld.proactivity.templates import render_pack  # noqa: E402

CONDITIONS = ["baseline", "risk=low", "feedback=high", "feedback=low", "goal=implicit", "ethics=utilitarian",
              "accountability=agent", "accountability=user"]


def bench_templates(repeats: int) -> float:
    t0 = time.perf_counter()
    n = 0
    for _ in range(repeats):
        n += len(render_pack())
    return n / (time.perf_counter() - t0)


def bench_text(epochs: int, max_turns: int) -> tuple[float, int, float]:
    from inspect_ai import eval as inspect_eval

    with tempfile.TemporaryDirectory() as d:
        # warm-up: the first eval in a process pays inspect's imports (tens of seconds on a busy machine)
        t0 = time.perf_counter()
        inspect_eval(proactivity(max_turns=max_turns, scenario_ids="code-loyalty-release-gate"), model="dilemma/balanced",
                     log_dir=d + "/warm", display="none")
        print(f"warm-up eval (imports, one sample): {time.perf_counter() - t0:.1f} s")
        t = proactivity(max_turns=max_turns)
        t0 = time.perf_counter()
        [log] = inspect_eval(t, model="dilemma/balanced", epochs=epochs, log_dir=d, display="none", max_samples=32)
        wall = time.perf_counter() - t0
        turns = int(load_dilemma_runs([log.location])["n_turns"].sum())
    return turns / wall, turns, wall


def synthetic_runs(models: int, per_model: int, max_turns: int, seed: int) -> pd.DataFrame:
    scs = render_pack()
    conds = parse_conditions(CONDITIONS)
    policies = ["cautious", "balanced", "reckless"]
    rows = []
    for m in range(models):
        policy = policies[m % 3]
        for i in range(per_model):
            sc, f = scs[i % len(scs)], conds[i % len(conds)]
            rng = random.Random(f"{seed}|{m}|{i}")
            tools = plan_tools(draw_class(policy, f.model_dump(), rng), rng, max_turns)
            v = classify(tools, max_turns)
            tools = tools[:v.turns]
            rows.append({"run_id": f"m{m}-{i}", "log": "synthetic", "sample_id": f"{sc.id}@{f.label()}", "epoch": i // len(scs) + 1,
                         "model": f"synthetic/{policy}-{m}", "scenario_id": sc.id, "domain": sc.domain, "drive": sc.drive,
                         "condition": f.label(), **f.model_dump(), "max_turns": max_turns, "mode": "text", "cls": v.cls,
                         "terminal_tool": v.terminal_tool, "terminal_turn": v.terminal_turn, "outcome": v.outcome,
                         "outcome_step": v.outcome_step, "n_turns": v.turns, "tools": json.dumps(tools),
                         "harmful_turns": json.dumps(list(v.harmful_turns))})
    return validate_dilemma_runs(pd.DataFrame(rows, columns=list(RUN_COLUMNS)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2, help="epochs of the text simulation over the 16-scenario pack")
    ap.add_argument("--max-turns", type=int, default=15)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--runs-per-model", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--template-repeats", type=int, default=20)
    args = ap.parse_args()

    sps = bench_templates(args.template_repeats)
    print(f"template mode: {sps:.1f} scenarios/s ({args.template_repeats} x 16, validation included)")
    tps, turns, wall = bench_text(args.epochs, args.max_turns)
    print(f"text simulation through inspect: {turns} turns in {wall:.1f} s = {tps:.1f} turns/s")
    runs = synthetic_runs(args.models, args.runs_per_model, args.max_turns, 0)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        written = build_proactivity_report(runs, Path(d), n_resamples=args.resamples, seed=0)
        rep = time.perf_counter() - t0
    print(f"report on {len(runs)} synthetic runs ({args.models} models x {args.runs_per_model}), "
          f"{args.resamples} resamples: {rep:.2f} s, {len(written)} files")
    print(json.dumps({"scenarios_per_s": round(sps, 1), "text_turns_per_s": round(tps, 1), "text_turns": turns,
                      "text_wall_seconds": round(wall, 2), "report_seconds": round(rep, 2),
                      "report_runs_synthetic": len(runs), "report_models": args.models,
                      "report_runs_per_model": args.runs_per_model, "resamples": args.resamples}))


if __name__ == "__main__":
    main()
