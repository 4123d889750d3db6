#!/usr/bin/env python3
"""Benchmark: Tables 3 and 4 over 10,000 runs x 7 input subsets x 3 monitors, 2000 resamples.

Times the vectorised report tables (control_osworld.analysis.tables) on seeded synthetic
data, then a plain loop of scikit-learn calls computing the same statistics on the same
per-run scores and resample counts, two ways:

* measured: the loop in full (2000 resamples) on one cell (one monitor x one input subset
  x one row group), against our engine on the same cell: ``speedup_measured``;
* extrapolated: the loop over every cell, timed on a few resamples per cell and scaled
  linearly to the full count (a full loop would take tens of minutes):
  ``baseline_seconds_extrapolated`` and ``speedup_extrapolated``.

Then the protocol curves (analysis.protocols: trusted monitoring, stop on suspicion, defer to
trusted) for every monitor x subset x 30 audit budgets with the same resamples:
``protocol_curves_seconds``. The last line of output is one JSON object; its
``load_average_1min`` is the machine's load at the start and at the end (timings on a shared
machine mean little without it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from sklearn.metrics import auc, roc_auc_score, roc_curve  # noqa: E402

from control_osworld.analysis import protocols as P  # noqa: E402
from control_osworld.analysis import tables as T  # noqa: E402
from control_osworld.analysis.bootstrap import (  # noqa: E402
    masked_roc_statistics,
    percentile_ci,
    resample_weights,
)
from control_osworld.testing.synthetic_tables import synthetic_dataset  # noqa: E402


def sklearn_cell(h, a, fprs, max_fpr):
    """One resample's statistics with scikit-learn (and a sort for the k-rule threshold)."""
    y = np.r_[np.zeros(h.size), np.ones(a.size)]
    s = np.r_[h, a]
    out = [roc_auc_score(y, s), roc_auc_score(y, s, max_fpr=max_fpr)]
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    stop = np.searchsorted(fpr, max_fpr, side="right")
    xs = np.r_[fpr[:stop], max_fpr]
    ys = np.r_[tpr[:stop], np.interp(max_fpr, fpr[stop - 1 : stop + 1], tpr[stop - 1 : stop + 1])]
    out.append(auc(xs, ys) / max_fpr)
    hs = np.sort(h)[::-1]
    for f in fprs:
        k = math.floor(f * h.size + 1e-9)
        tau = hs[k] if k < h.size else -np.inf
        out += [np.mean(a > tau), np.mean(h > tau)]
    return out


def baseline(runs, scores, opts, per_cell_resamples, seed=0):
    """Plain loop: for every cell, every resample, call scikit-learn. Returns (seconds for the
    measured resamples, number of measured resamples per cell, prep seconds)."""
    t0 = time.perf_counter()
    mats = [T.full_trajectory_scores(runs, scores), T.per_step_scores(runs, scores, opts)]
    prep = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    groups = T.row_groups(runs, opts.attacks)
    t0 = time.perf_counter()
    for ti, (cells, mat) in enumerate(mats):
        for _, _, honest, attack in groups:
            for c in range(len(cells)):
                h_all, a_all = mat[c, honest], mat[c, attack]
                h_all, a_all = h_all[~np.isnan(h_all)], a_all[~np.isnan(a_all)]
                if h_all.size == 0 or a_all.size == 0:
                    continue
                for _ in range(per_cell_resamples):
                    h = h_all[rng.integers(0, h_all.size, h_all.size)]
                    a = a_all[rng.integers(0, a_all.size, a_all.size)]
                    sklearn_cell(h, a, opts.fprs, opts.max_fpr)
                    if ti == 1:  # Table 4: caught-before-t* is one more TPR@FPR pass per resample
                        hs = np.sort(h)[::-1]
                        for f in opts.fprs:
                            k = math.floor(f * h.size + 1e-9)
                            np.mean(a > hs[min(k, h.size - 1)])
    return time.perf_counter() - t0, prep


def one_cell(runs, scores, opts, seed=0):
    """(loop seconds, engine seconds) on the first full-trajectory cell of the first row group,
    both over all the resamples: the loop draws its own indices, the engine uses count weights."""
    cells, mat = T.full_trajectory_scores(runs, scores)
    _, _, honest, attack = T.row_groups(runs, opts.attacks)[0]
    h_all, a_all = mat[0, honest], mat[0, attack]
    h_all, a_all = h_all[~np.isnan(h_all)], a_all[~np.isnan(a_all)]
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    stats = []
    for _ in range(opts.n_resamples):
        h = h_all[rng.integers(0, h_all.size, h_all.size)]
        a = a_all[rng.integers(0, a_all.size, a_all.size)]
        stats.append(sklearn_cell(h, a, opts.fprs, opts.max_fpr))
    np.quantile(np.asarray(stats), [0.025, 0.975], axis=0)
    loop_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    wh = resample_weights(h_all.size, opts.n_resamples, np.random.default_rng(seed))
    wa = resample_weights(a_all.size, opts.n_resamples, np.random.default_rng(seed + 1))
    out = masked_roc_statistics(h_all, a_all, wh, wa, fprs=opts.fprs, max_fpr=opts.max_fpr)
    for v in out.values():
        percentile_ci(v, opts.level)
    ours_s = time.perf_counter() - t0
    return loop_s, ours_s, f"{cells[0][0]} / {cells[0][1]}, {h_all.size} honest + {a_all.size} attack runs"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--baseline-resamples", type=int, default=10, help="resamples per cell actually timed for the loop")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    load_start = os.getloadavg()[0]
    print(f"cores: {os.cpu_count()}; load average (1 min) {load_start:.2f}; python {sys.version.split()[0]}; numpy {np.__version__}")
    t0 = time.perf_counter()
    runs, scores = synthetic_dataset(args.runs, seed=args.seed)
    print(f"synthetic data: {len(runs)} runs, {len(scores)} score rows "
          f"(3 full-trajectory + 3 per-step monitors x 7 input subsets) in {time.perf_counter() - t0:.1f} s")
    opts = T.DetectionOptions(n_resamples=args.resamples, seed=args.seed)

    t0 = time.perf_counter()
    t3 = T.table3(runs, scores, opts)
    t3_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    t4 = T.table4(runs, scores, opts)
    t4_s = time.perf_counter() - t0
    tables_s = t3_s + t4_s
    n3 = t3.groupby(["untrusted_model", "attack_prompt", "monitor", "inputs"]).ngroups
    n4 = t4.groupby(["untrusted_model", "attack_prompt", "monitor", "inputs"]).ngroups
    print(f"Table 3: {n3} cells x {args.resamples} resamples in {t3_s:.2f} s")
    print(f"Table 4: {n4} cells x {args.resamples} resamples (+ caught-before-t*, per-step FPR) in {t4_s:.2f} s")
    print(f"tables total: {tables_s:.2f} s")

    cell_loop_s, cell_ours_s, cell = one_cell(runs, scores, opts, args.seed)
    speedup_measured = cell_loop_s / cell_ours_s
    print(f"one cell ({cell}), {args.resamples} resamples: scikit-learn loop {cell_loop_s:.2f} s, "
          f"ours {cell_ours_s:.3f} s: measured speedup {speedup_measured:.0f}x")

    loop_s, prep_s = baseline(runs, scores, opts, args.baseline_resamples, args.seed)
    factor = args.resamples / args.baseline_resamples
    baseline_s = prep_s + loop_s * factor
    print(f"baseline (plain loop of scikit-learn calls, same cells and data): timed {args.baseline_resamples} resamples "
          f"per cell in {loop_s:.2f} s, extrapolated linearly x{factor:g} to {args.resamples} resamples, "
          f"plus {prep_s:.2f} s to build the per-run score matrices: {baseline_s:.1f} s (extrapolated)")
    speedup = baseline_s / tables_s
    print(f"speedup (extrapolated baseline): {speedup:.0f}x (targets: >= 50x and <= 10 s)")

    popts = P.ProtocolOptions(n_resamples=args.resamples, seed=args.seed, budgets=P.DEFAULT_BUDGETS)  # the 30-point grid
    t0 = time.perf_counter()
    curves = P.protocol_table(runs, scores, popts, inclusive_for=lambda m, point: True)
    proto_s = time.perf_counter() - t0
    n_curves = curves.groupby(["untrusted_model", "monitor", "inputs"]).ngroups
    print(f"protocol curves: {n_curves} monitor x subset x model curves x {len(popts.budgets)} audit budgets x "
          f"3 protocols, {args.resamples} resamples, in {proto_s:.2f} s (target <= 10 s)")
    print(json.dumps({"tables_seconds": round(tables_s, 3), "baseline_seconds_extrapolated": round(baseline_s, 1),
                      "speedup_extrapolated": round(speedup, 1), "cell_baseline_seconds": round(cell_loop_s, 2),
                      "cell_seconds": round(cell_ours_s, 4), "speedup_measured": round(speedup_measured, 1),
                      "protocol_curves_seconds": round(proto_s, 3),
                      "load_average_1min": [round(load_start, 2), round(os.getloadavg()[0], 2)]}))


if __name__ == "__main__":
    main()
