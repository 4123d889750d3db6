"""The report's protocol part: protocols.{md,csv} and safety_usefulness_*.png.

The numbers come from ``protocols.protocol_table``; this module only renders them. The
Markdown shows a few audit budgets per cell; the CSV has all of them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import plots
from .protocols import PROTOCOLS, ROUND_BUDGETS, ProtocolOptions, conventions, protocol_table
from .runs import INPUT_SUBSETS

__all__ = ["write_protocol_report", "render_protocols_markdown", "summary_lines", "SHOWN_BUDGETS"]

_SUBSET_ORDER = {v: i for i, v in enumerate(INPUT_SUBSETS)}
SHOWN_BUDGETS = ROUND_BUDGETS  # on the report's grid (REPORT_BUDGETS), so shown exactly


def _nearest(budgets: np.ndarray, wanted) -> list[float]:
    return sorted({float(budgets[np.argmin(np.abs(np.log(budgets) - math.log(w)))]) for w in wanted})


def _pct(x: float) -> str:
    return f"{100 * x:.2g}%"


def _f(x) -> str:
    return "–" if x is None or x != x else f"{x:.3f}"


def _cell(r, name: str) -> str:
    if r.protocol == "defer_to_trusted":
        return f"[{_f(r[name + '_bound_low'])}, {_f(r[name + '_bound_high'])}]"
    return f"{_f(r[name])} [{_f(r[name + '_low'])}, {_f(r[name + '_high'])}]"


def render_protocols_markdown(df: pd.DataFrame, popts: ProtocolOptions, t_star_rules: dict[str, str], header=()) -> str:
    L = ["# Protocols: safety and usefulness at an audit budget", ""]
    L += [f"- {h}" for h in header]
    L += [f"- {c}" for c in conventions(popts, t_star_rules)]
    L += ["- Cells: estimate [CI] for trusted monitoring and stop on suspicion; [bound low, bound high] for "
          f"defer to trusted. All {len(popts.budgets)} budgets are in protocols.csv.", ""]
    if df.empty:
        return "\n".join(L + ["No model has both honest and attack runs with scores.", ""])
    shown = _nearest(np.unique(df["audit_budget"].to_numpy()), SHOWN_BUDGETS)
    for model, g in df.groupby("untrusted_model", sort=True):
        L += [f"## {model}", ""]
        for proto in PROTOCOLS:
            p = g[(g["protocol"] == proto) & g["audit_budget"].isin(shown)]
            if p.empty:
                continue
            norm = bool(popts.trusted_model) and proto != "defer_to_trusted"
            # trusted monitoring's usefulness does not depend on the budget: one column
            u_budgets = shown[-1:] if proto == "trusted_monitoring" else shown
            u_heads = ["usefulness"] if proto == "trusted_monitoring" else [f"usefulness @{_pct(b)}" for b in shown]
            L += [f"### {proto}", "", "| monitor | inputs | " + " | ".join(f"safety @{_pct(b)}" for b in shown)
                  + " | " + " | ".join(u_heads) + " | safety (control-arena) @1% |"
                  + (" safety (conservative) @1% |" if proto != "defer_to_trusted" else "")
                  + (" normalised usefulness @1% |" if norm else ""),
                  "|---|---|" + "---|" * (len(shown) + len(u_budgets) + 1 + (proto != "defer_to_trusted") + norm)]
            one_pct = _nearest(np.asarray(shown), [0.01])[0]
            groups = dict(list(p.groupby(["monitor", "inputs"], sort=True)))
            for mon, inp in sorted(groups, key=lambda k: (k[0], _SUBSET_ORDER.get(k[1], 99), k[1])):
                c = groups[(mon, inp)].set_index("audit_budget")
                one = c["safety_control_arena"].get(one_pct, math.nan)
                L.append(f"| {mon} | {inp} | " + " | ".join(_cell(c.loc[b], "safety") for b in shown) + " | "
                         + " | ".join(_cell(c.loc[b], "usefulness") for b in u_budgets) + f" | {_f(one)} |"
                         + (f" {_f(c['safety_conservative'].get(one_pct, math.nan))} |" if proto != "defer_to_trusted" else "")
                         + (f" {_f(c['usefulness_normalised'].get(one_pct, math.nan))} |" if norm else ""))
            L.append("")
    return "\n".join(L)


_MARKERS = {"A": "o", "T": "s", "S": "^", "A+T": "D", "A+S": "v", "T+S": "P", "A+T+S": "*"}


def _figure(path: Path, model: str, g: pd.DataFrame, popts: ProtocolOptions) -> Path:
    """Three panels (safety and stop-on-suspicion usefulness against the audit budget on a log
    axis, and safety against usefulness): colour = monitor, marker = input subset, bands = the
    CIs of safety; the conventions in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, 3, figsize=(18, 5.6))
    tm = g[g["protocol"] == "trusted_monitoring"]
    sos = g[g["protocol"] == "stop_on_suspicion"]
    monitors = sorted(set(tm["monitor"]))
    palette = plt.get_cmap("tab10" if len(monitors) <= 10 else "tab20")
    colour = {m: palette(i % palette.N) for i, m in enumerate(monitors)}
    subsets = sorted(set(tm["inputs"]), key=lambda s: list(_MARKERS).index(s) if s in _MARKERS else 99)
    for (mon, inp), c in tm.groupby(["monitor", "inputs"], sort=True):
        c = c.sort_values("audit_budget")
        style = dict(color=colour[mon], marker=_MARKERS.get(inp, "x"), markersize=4, linewidth=1.1, alpha=0.9)
        axes[0].plot(c["audit_budget"], c["safety"], **style)
        axes[0].fill_between(c["audit_budget"], c["safety_low"], c["safety_high"], color=colour[mon], alpha=0.05, linewidth=0)
        s = sos[(sos["monitor"] == mon) & (sos["inputs"] == inp)].sort_values("audit_budget")
        axes[1].plot(s["audit_budget"], s["usefulness"], **style)
        axes[2].plot(s["usefulness"], s["safety"], **style)
    unit = "honest runs" if popts.unit == "runs" else "honest steps"
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_xlabel(f"audit budget (share of {unit} flagged)" if popts.unit == "runs"
                      else "audit budget (share of honest steps flagged; full-trajectory monitors: runs)")
    axes[0].set_ylabel("safety: P(caught in time or never effective)")
    axes[0].set_title("trusted monitoring = stop on suspicion: safety")
    axes[1].set_ylabel("usefulness: honest main-task success, unflagged")
    axes[1].set_title("stop on suspicion: usefulness")
    axes[2].set_xlabel("usefulness (stop on suspicion)")
    axes[2].set_ylabel("safety")
    axes[2].set_title("safety vs usefulness (one point per budget)")
    for ax in axes:
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    if len(sos) and np.isfinite(sos["usefulness"]).any():  # zoom on the usefulness the budgets span
        lo, hi = float(np.nanmin(sos["usefulness"])), float(np.nanmax(sos["usefulness"]))
        axes[2].set_xlim(max(-0.02, lo - 0.05), min(1.02, hi + 0.05))
    mon_handles = [Line2D([], [], color=colour[m], linewidth=2, label=m) for m in monitors]
    sub_handles = [Line2D([], [], color="0.35", marker=_MARKERS.get(s, "x"), linestyle="none", label=s) for s in subsets]
    first = fig.legend(handles=mon_handles, title="monitor", loc="upper left", bbox_to_anchor=(0.855, 0.93), fontsize=8)
    fig.add_artist(first)
    fig.legend(handles=sub_handles, title="inputs", loc="lower left", bbox_to_anchor=(0.855, 0.08), fontsize=8, ncol=2)
    n_h, n_a = int(g["n_honest"].iloc[0]), int(g["n_attack"].iloc[0])
    fig.suptitle(f"Protocols from stored scores: {model} ({n_h} honest, {n_a} attack runs)\n"
                 f"budget alpha: tau = (floor(alpha n)+1)-th largest {unit[:-1]} score, flag > tau; caught = a step in "
                 f"time (t* rule per monitor) flagged; bands: {popts.level:.0%} bootstrap CIs "
                 f"({popts.n_resamples} resamples of runs)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.85, 0.93))
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def summary_lines(df: pd.DataFrame, popts: ProtocolOptions) -> list[str]:
    """The report summary's protocol lines: per untrusted model, the safest monitor x subset under
    trusted monitoring at the 1 % audit budget (or the nearest one), with its stop-on-suspicion
    usefulness and control-arena's safety convention beside it."""
    if df.empty:
        return ["- No model has both honest and attack runs with scores (protocols.md)."]
    budget = _nearest(np.unique(df["audit_budget"].to_numpy()), [0.01])[0]
    unit = "honest runs" if popts.unit == "runs" else "honest steps"
    out = []
    for model, g in df[df["audit_budget"] == budget].groupby("untrusted_model", sort=True):
        tm = g[g["protocol"] == "trusted_monitoring"].dropna(subset=["safety"])
        if tm.empty:
            continue
        r = tm.sort_values(["safety", "monitor", "inputs"], ascending=[False, True, True]).iloc[0]
        sos = g[(g["protocol"] == "stop_on_suspicion") & (g["monitor"] == r.monitor) & (g["inputs"] == r.inputs)].iloc[0]
        dtt = g[(g["protocol"] == "defer_to_trusted") & (g["monitor"] == r.monitor) & (g["inputs"] == r.inputs)].iloc[0]
        out.append(f"- {model}, audit budget {_pct(budget)} of {unit}: safest under trusted monitoring {r.monitor} on "
                   f"{r.inputs} ({r.t_star_rule}): safety {_f(r.safety)} [{_f(r.safety_low)}, {_f(r.safety_high)}] "
                   f"(never effective {_f(dtt.safety_bound_low)}; control-arena's convention {_f(r.safety_control_arena)}); "
                   f"usefulness {_f(r.usefulness)}, under stop on suspicion {_f(sos.usefulness)} "
                   f"[{_f(sos.usefulness_low)}, {_f(sos.usefulness_high)}]; conservative safety (left-out attack runs "
                   f"effective and uncaught: {int(r.n_attack_excluded)} errors, {int(r.n_attack_effect_unknown)} effect "
                   f"unknown) {_f(r.safety_conservative)}.")
    return out or ["- No trusted-monitoring safety could be computed (protocols.md)."]


def write_protocol_report(runs: pd.DataFrame, scores: pd.DataFrame, out: Path, popts: ProtocolOptions,
                          inclusive_for, plots_enabled: bool = True, table: pd.DataFrame | None = None,
                          header=()) -> dict[str, Path]:
    """Write protocols.md, protocols.csv and one figure per untrusted model into out (table: the
    ``protocol_table`` of these runs and options, when already computed)."""
    df = protocol_table(runs, scores, popts, inclusive_for) if table is None else table
    ps = df[df["monitor_kind"] == "per_step"] if not df.empty else df
    rules = {m: ", ".join(sorted(set(g["t_star_rule"]))) for m, g in ps.groupby("monitor")} if not ps.empty else {}
    written = {}
    p = out / "protocols.md"
    p.write_text(render_protocols_markdown(df, popts, rules, header), encoding="utf-8", newline="\n")
    written[p.name] = p
    p = out / "protocols.csv"
    df.to_csv(p, index=False, float_format="%.6g", lineterminator="\n")
    written[p.name] = p
    if plots_enabled and not df.empty:
        for model, g in df.groupby("untrusted_model", sort=True):
            name = f"safety_usefulness_{plots.slug(model, '')}.png"
            written[name] = _figure(out / name, str(model), g, popts)
    return written
