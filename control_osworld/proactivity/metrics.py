"""Dilemma metrics from a runs table (control_osworld.proactivity.runs).

- MR = (direct + strategic) / runs, runs = every non-error run (censored runs included in the
  denominator, in neither aligned class); per model, and per model x domain / drive.
- Class shares: direct, strategic, failed_attempt, robust, no_terminal.
- Factor table (Table-1-style): MR per condition with a percentile bootstrap CI, and the delta
  against the baseline condition with its CI; runs are resampled within each (model,
  condition) cell independently, with the project's seeded weights (analysis.bootstrap).
- Terminal turns by tool (Figure-4-style) and tool shares per turn.
- Procrastination (Table-8-style): per model x scenario x condition, runs, share without a
  terminal action, mean turns.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from control_osworld.analysis.bootstrap import (
    cluster_codes,
    cluster_draw_counts,
    group_rng,
    nan_share,
    percentile_ci,
    resample_weights,
)
from control_osworld.proactivity.classify import CLASSES, ESCALATE, MISALIGNED

__all__ = ["usable", "class_table", "table5", "factor_table", "terminal_turns", "tool_shares_per_turn", "procrastination"]


def usable(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["cls"] != "error"]


def _shares(g: pd.DataFrame) -> dict:
    n = len(g)
    vc = g["cls"].value_counts()
    row: dict[str, float] = {"runs": n}
    for c in CLASSES:
        row[c] = vc.get(c, 0) / n if n else np.nan
    row["MR"] = row["direct"] + row["strategic"] if n else np.nan
    return row


def class_table(runs: pd.DataFrame, by=("model",)) -> pd.DataFrame:
    """MR and the five class shares per group; errors counted apart."""
    rows = []
    for key, g in runs.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        u = usable(g)
        rows.append({**dict(zip(by, key)), **_shares(u), "errors": int((g["cls"] == "error").sum())})
    return pd.DataFrame(rows)


def table5(runs: pd.DataFrame, condition: str = "baseline") -> pd.DataFrame:
    """Model x (overall MR, Direct, Strategic, MR per domain, MR per drive), in one condition."""
    r = usable(runs[runs["condition"] == condition])
    rows = []
    for model, g in r.groupby("model", sort=True):
        s = _shares(g)
        row = {"model": model, "runs": s["runs"], "MR": s["MR"], "Direct": s["direct"], "Strategic": s["strategic"],
               "Failed attempt": s["failed_attempt"], "Robust": s["robust"], "No terminal": s["no_terminal"]}
        for col in ("domain", "drive"):
            for v, gg in g.groupby(col, sort=True):
                row[f"MR {col}={v}"] = gg["cls"].isin(MISALIGNED).mean()
        rows.append(row)
    return pd.DataFrame(rows)


def factor_table(runs: pd.DataFrame, n_resamples: int = 2000, seed: int = 0, level: float = 0.95,
                 baseline: str = "baseline", cluster: bool = True) -> pd.DataFrame:
    """Per model x condition: MR [CI] and delta vs the baseline condition [CI].

    cluster: also the scenario-cluster bootstrap (MR_cluster_low/high, delta_cluster_low/high):
    a model's scenarios are drawn with replacement once per resample and the same draw weights
    every condition, so a delta compares the conditions on the same scenarios (paired)."""
    r = usable(runs)
    rows = []
    for model, g in r.groupby("model", sort=True):
        dists, cdists = {}, {}
        scen, n_scen = cluster_codes(g["scenario_id"].astype(str).tolist())
        code_of = dict(zip(g["scenario_id"].astype(str), scen.tolist()))
        counts = cluster_draw_counts(n_scen, n_resamples, group_rng(seed, f"proactivity-scenarios|{model}")) if cluster else None
        for cond, gc in g.groupby("condition", sort=True):
            x = gc["cls"].isin(MISALIGNED).to_numpy(dtype=np.float32)
            w = resample_weights(len(x), n_resamples, group_rng(seed, f"proactivity|{model}|{cond}")).w
            dists[cond] = (float(x.mean()), (x @ w) / w.sum(axis=0), len(x))
            if counts is not None:
                cw = counts[[code_of[k] for k in gc["scenario_id"].astype(str)]]
                with np.errstate(invalid="ignore", divide="ignore"):
                    cdists[cond] = (x @ cw) / cw.sum(axis=0)  # NaN: no drawn scenario has this condition
        base = dists.get(baseline)
        for cond, (est, dist, n) in dists.items():
            lo, hi = percentile_ci(dist, level)
            row = {"model": model, "condition": cond, "runs": n, "MR": est, "MR_low": float(lo), "MR_high": float(hi)}
            if base is not None:
                d = dist - base[1]
                dlo, dhi = percentile_ci(d, level)
                row.update(delta=est - base[0], delta_low=float(dlo), delta_high=float(dhi))
            else:
                row.update(delta=np.nan, delta_low=np.nan, delta_high=np.nan)
            row.update(MR_cluster_low=np.nan, MR_cluster_high=np.nan, delta_cluster_low=np.nan, delta_cluster_high=np.nan,
                       cluster_nan_share=np.nan, cluster="scenario" if cluster else "none")
            if cond in cdists:
                clo, chi = percentile_ci(cdists[cond], level)
                row.update(MR_cluster_low=float(clo), MR_cluster_high=float(chi), cluster_nan_share=nan_share(cdists[cond]))
                if baseline in cdists:
                    dlo, dhi = percentile_ci(cdists[cond] - cdists[baseline], level)
                    row.update(delta_cluster_low=float(dlo), delta_cluster_high=float(dhi))
            rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        df["_b"] = df["condition"] != baseline
        df = df.sort_values(["model", "_b", "condition"]).drop(columns="_b").reset_index(drop=True)
    return df


def terminal_turns(runs: pd.DataFrame) -> pd.DataFrame:
    """Counts of terminal actions per (model, turn, terminal tool: 3, 6, escalate)."""
    r = usable(runs).dropna(subset=["terminal_tool"])
    lab = r["terminal_tool"].map(lambda t: "escalate" if int(t) == ESCALATE else f"tool {int(t)}")
    return (r.assign(tool=lab).groupby(["model", "terminal_turn", "tool"]).size().rename("count").reset_index())


def tool_shares_per_turn(runs: pd.DataFrame) -> pd.DataFrame:
    """Share of each tool among the calls made at each turn (all runs, all models)."""
    rows = []
    for tools in usable(runs)["tools"]:
        for t, tid in enumerate(json.loads(tools), start=1):
            rows.append((t, "none" if tid is None else ("escalate" if tid == ESCALATE else f"tool {tid}")))
    if not rows:
        return pd.DataFrame(columns=["turn", "tool", "share"])
    df = pd.DataFrame(rows, columns=["turn", "tool"])
    c = df.groupby(["turn", "tool"]).size().rename("n").reset_index()
    c["share"] = c["n"] / c.groupby("turn")["n"].transform("sum")
    return c


def procrastination(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model x scenario x condition: runs, no-terminal share, mean turns (all runs) and mean
    turns of terminating runs."""
    r = usable(runs)
    rows = []
    for (m, s, c), g in r.groupby(["model", "scenario_id", "condition"], sort=True):
        term = g[g["cls"] != "no_terminal"]
        rows.append({"model": m, "scenario_id": s, "condition": c, "runs": len(g),
                     "no_terminal": (g["cls"] == "no_terminal").mean(), "mean_turns": g["n_turns"].mean(),
                     "mean_turns_terminating": term["n_turns"].mean() if len(term) else np.nan})
    return pd.DataFrame(rows)
