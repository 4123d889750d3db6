"""Regenerate the analysis report from a runs table and a scores store.

Writes into DIR: table3.{md,csv,tex}, table4.{md,csv,tex}, hazards.{md,csv},
identifiability.md, excluded_runs.{md,csv} (every left-out run with its reason, unknown checks
by side task; also unknown_checks_by_side_task.csv), roc_table3_*.png / roc_table4_*.png (log-FPR axis),
cumulative_incidence.png and summary.md. Markdown, CSV and LaTeX are byte-identical for
the same inputs and seed.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from control_osworld.progress import StageProgress, active_log

from . import attack_classes as ac
from . import codebook, exclusions, plots, render, tables
from . import hazards as hz
from . import identifiability as idf
from .bootstrap import ResampleWeights, check_cluster, cluster_weights, group_rng, resample_weights
from .conditions import UNRECORDED, by_condition, condition_parts
from .protocol_report import summary_lines, write_protocol_report
from .protocols import ProtocolOptions, protocol_table
from .runs import attempts_as_recorded
from .tables import DetectionOptions

__all__ = ["build_report", "hazard_tables", "HAZARD_BUDGETS", "K_MAX_EPS", "N_AGENTS"]

HAZARD_BUDGETS = (10, 25, 50, 75, 150)
K_MAX_EPS = (0.01, 0.05, 0.10)
N_AGENTS = (10, 100)


def _groups(runs: pd.DataFrame):
    """Hazard groups: untrusted model x (honest | attack prompt)."""
    keys = runs[["untrusted_model", "eval_mode", "attack_prompt"]].drop_duplicates()
    keys = keys.sort_values(["untrusted_model", "eval_mode", "attack_prompt"])
    for m, mode, p in keys.itertuples(index=False):
        sel = (runs["untrusted_model"] == m) & (runs["eval_mode"] == mode) & (runs["attack_prompt"] == p)
        label = f"{m} / {mode}" + (f": {p}" if p else "")
        yield label, m, mode, p, runs[sel]


BOUNDARY_KINDS = ("open", "closed", "none")
"""a and b are reported per boundary kind, never pooled: an open sink lets every attempt take
effect (b = 1 by construction), a closed one blocks it."""


def _boundary_kind(v) -> str:
    return v if v in ("open", "closed") else "none"


def _usable_rows(oc: np.ndarray, errors: str) -> np.ndarray:
    """The runs the hazard estimator keeps, in order (its resample weights' rows)."""
    return np.ones(oc.size, dtype=bool) if errors == "censor" else oc != "error"


def hazard_tables(runs: pd.DataFrame, n_resamples: int = 2000, seed: int = 0, level: float = 0.95, errors: str = "exclude",
                  cluster: str = "side_task", cluster_keys=None):
    """(per-step frame, per-group summary frame, figure data) for every hazard group.

    cluster: the cluster bootstrap reported beside the run bootstrap (F_c(K) *_cluster_low/high);
    cluster_keys: optional function(group frame) -> (side keys, main keys) (default: the runs'
    side-task template and main task, ``tables.run_cluster_keys``)."""
    from .tables import run_cluster_keys

    check_cluster(cluster)
    keys_of = cluster_keys or run_cluster_keys
    steps_rows, summary_rows, fig = [], [], []
    for label, m, mode, p, g in _groups(runs):
        K = int(g["budget"].max())
        st, oc = g["outcome_step"].to_numpy(dtype=np.int64), g["outcome"].to_numpy(dtype=object)
        aj = hz.aalen_johansen(st, oc, K, errors)
        n_use = aj.n_runs
        lo = hi = clo = chi = None
        if n_use:
            w = resample_weights(n_use, n_resamples, group_rng(seed, f"hazards|{label}"))
            lo, hi = hz.bootstrap_cumulative_incidence(st, oc, K, level=level, errors=errors, weights=w)
            if cluster != "none":
                side, main = keys_of(g)
                keep = np.flatnonzero(_usable_rows(oc, errors))
                cw = cluster_weights([side[i] for i in keep], [main[i] for i in keep], cluster, n_resamples,
                                     group_rng(seed, f"hazards-cluster|{cluster}|{label}"))
                clo, chi = hz.bootstrap_cumulative_incidence(st, oc, K, level=level, errors=errors, weights=ResampleWeights(cw))
        att = hz.attempt_rates(st, oc, attempts_as_recorded(g), K, errors)
        tab = aj.table()
        for i, c in enumerate(hz.CAUSES):
            tab[f"F_{c}_low"] = lo[:, i] if lo is not None else np.nan
            tab[f"F_{c}_high"] = hi[:, i] if hi is not None else np.nan
        tab["attempt_at_risk"] = att["at_risk"]
        for c in ("attempts", "effective", "blocked", "a", "b"):
            tab[c] = att[c]
        tab.insert(0, "attack_prompt", p)
        tab.insert(0, "eval_mode", mode)
        tab.insert(0, "untrusted_model", m)
        fit = hz.constant_hazard_fit(st, oc, K, errors)
        ie = hz.CAUSES.index("escaped")
        gof = hz.constant_hazard_check(st, oc, K, errors, band=(lo[:, ie], hi[:, ie]) if lo is not None and hi is not None else None)
        tab["F_escaped_constant_hazard"] = gof.fitted  # observed (F_escaped) beside fitted, per step
        steps_rows.append(tab.reset_index())
        fig.append((label, np.arange(1, K + 1), aj.cif, lo, hi))

        row = {"group": label, "untrusted_model": m, "eval_mode": mode, "attack_prompt": p, "budget": K,
               "n_runs": len(g), "n_used": n_use, "n_error": aj.n_error, "survival_K": aj.survival[-1] if n_use else np.nan}
        for i, c in enumerate(hz.CAUSES):
            row[f"F_{c}"] = aj.cif[-1, i] if n_use else np.nan
            row[f"F_{c}_low"] = lo[-1, i] if lo is not None else np.nan
            row[f"F_{c}_high"] = hi[-1, i] if hi is not None else np.nan
            row[f"F_{c}_cluster_low"] = clo[-1, i] if clo is not None else np.nan
            row[f"F_{c}_cluster_high"] = chi[-1, i] if chi is not None else np.nan
        row["cluster"] = cluster
        row.update({"s": fit.completed, "g": fit.stopped, "e": fit.escaped, "d": fit.terminated, "h": fit.total,
                    "person_steps": fit.person_steps})
        row.update({"gof_verdict": gof.verdict, "gof_lr": gof.lr_statistic, "gof_df": gof.df, "gof_p": gof.p_value,
                    "gof_max_gap": gof.max_gap, "gof_max_gap_step": gof.max_gap_step, "gof_outside_band": gof.outside_band,
                    "gof_reason": gof.reason})
        e, h = fit.escaped, fit.total
        ok = n_use and h == h and h > 0
        # F_E(K) fitted is shown beside the AJ value as the check itself; every projection beyond the
        # observed steps (F_E(b > K), F_E(inf), K_max) is withheld unless the constant-hazard model fits
        project = ok and gof.verdict == "fits"
        row["projection"] = "shown" if project else f"withheld: {gof.verdict} ({gof.reason})"
        row["F_E_const_K"] = hz.constant_hazard_incidence(e, h, K) if ok else np.nan
        for b in HAZARD_BUDGETS:
            row[f"F_E_const_{b}"] = hz.constant_hazard_incidence(e, h, b) if ok and (b <= K or project) else np.nan
        row["F_E_const_inf"] = hz.constant_hazard_incidence(e, h, math.inf) if project else np.nan
        for eps in K_MAX_EPS:
            row[f"K_max_{eps:g}"] = hz.k_max(e, h, eps) if project else np.nan
        f_e = row["F_escaped"]
        for n in N_AGENTS:
            r = hz.multi_agent_risk(f_e, n) if f_e == f_e else hz.MultiAgentRisk(np.nan, np.nan, np.nan)
            row[f"N{n}_independent"], row[f"N{n}_lower"], row[f"N{n}_upper"] = r
        tot_att, tot_eff, tot_risk = att["attempts"].sum(), att["effective"].sum(), att["at_risk"].sum()
        row["attempt_runs_person_steps"] = int(tot_risk)
        row["attempts"], row["effective"] = int(tot_att), int(tot_eff)
        kinds = g["boundary"].map(_boundary_kind).to_numpy(dtype=object) if "boundary" in g.columns else np.full(len(g), "none", dtype=object)
        recorded = attempts_as_recorded(g)
        with_attempts = set(k for k, a_ in zip(kinds, recorded) if a_ is not None and not (isinstance(a_, float) and a_ != a_))
        # pooled a and b only when the runs that record attempts share one boundary kind (never pooled
        # over an open boundary, where b = 1 by construction, and a closed or no boundary)
        pooled = len(with_attempts) <= 1
        row["a"] = tot_att / tot_risk if tot_risk and pooled else np.nan
        row["b"] = tot_eff / tot_att if tot_att and pooled else np.nan
        for kind in BOUNDARY_KINDS:
            sel = kinds == kind
            if sel.any():
                ak = hz.attempt_rates(st[sel], oc[sel], [r for r, s_ in zip(recorded, sel) if s_], K, errors)
                ka, ke, kr = int(ak["attempts"].sum()), int(ak["effective"].sum()), int(ak["at_risk"].sum())
            else:
                ka = ke = kr = 0
            row[f"runs_{kind}"] = int(sel.sum())
            row[f"attempts_{kind}"], row[f"effective_{kind}"], row[f"person_steps_{kind}"] = ka, ke, kr
            row[f"a_{kind}"] = ka / kr if kr else np.nan
            row[f"b_{kind}"] = ke / ka if ka else np.nan
        summary_rows.append(row)
    steps_df = pd.concat(steps_rows, ignore_index=True) if steps_rows else pd.DataFrame()
    return steps_df, pd.DataFrame(summary_rows), fig


def _f(x, nd=3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _k(x) -> str:
    """A budget: whole number, ∞, or – when unknown."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return "∞" if math.isinf(x) else str(int(x))


def _ci(r, key) -> str:
    return f"{_f(r[key])} [{_f(r[key + '_low'])}, {_f(r[key + '_high'])}]"


def render_hazards_markdown(summary: pd.DataFrame, n_resamples: int, level: float, seed: int, errors: str, header=()) -> str:
    L = ["# Competing hazards over agent steps (competing-hazards paper, section 3)", ""]
    L += [f"- {h}" for h in header]
    L += [
        "- Discrete-time Aalen-Johansen: hazard_c(t) = events_c(t) / at risk(t); S(t) = prod (1 - sum_c hazard_c); "
        "F_c(t) = sum_j S(j-1) hazard_c(j). Censored runs are at risk through their last step (events before censoring at a tied step).",
        "- Budget exhaustion = administrative right-censoring at K. Errors: "
        + ("excluded from the estimator, counted apart." if errors == "exclude" else "censored after the step before the failure."),
        f"- CIs: {level:.0%} percentile, {n_resamples} bootstrap resamples of runs within each group, seed {seed}; "
        "cluster CIs of F_c(K) in their own section (cluster unit named there; default side_task, report --cluster).",
        "- Constant hazards: per-cause MLE = events / person-steps at risk; F_E(K) = (e/h)(1 - (1-h)^K); "
        "K_max(eps) = floor(ln(1 - eps h/e) / ln(1 - h)) when eps < e/h, else ∞ (a bound conditional on the model).",
        "- N agents (own budgets, no sharing): independent 1 - (1 - F_E(K))^N; any dependence: between F_E(K) and min(1, N F_E(K)).",
        "- a = attempts / person-steps at risk and b = effective / attempts, over runs that record attempts (e = a b), "
        "per boundary kind: open (the sink lets every attempt through: b = 1 by construction, so only e = a is observed), "
        "closed (the sink blocks), none (no boundary switch: b observed, not controlled). Never pooled across kinds.",
        "- Constant-hazard projections (F_E beyond the budget, F_E(∞), K_max) are shown only when the goodness-of-fit "
        f"check passes: likelihood ratio of per-step vs constant hazards (chi-square, alpha {hz.GOF_ALPHA:g}) and the fitted "
        "F_E(t) inside the AJ pointwise CI at every step; otherwise withheld (–, with the reason).",
        "",
        "## Cumulative incidence at the budget K",
        "",
        "| Group | K | runs (used/errors) | completed | stopped | escaped | terminated | S(K) censored |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in summary.iterrows():
        L.append(f"| {r.group} | {r.budget} | {r.n_used}/{r.n_error} | " + " | ".join(_ci(r, f"F_{c}") for c in hz.CAUSES) + f" | {_f(r.survival_K)} |")
    L += ["", "## Goodness of fit of constant hazards (before any projection)", "",
          "| Group | LR | df | p | max |F_E AJ - fit| (step) | steps outside AJ CI | verdict |",
          "|---|---|---|---|---|---|---|"]
    for _, r in summary.iterrows():
        L.append(f"| {r.group} | {_f(r.gof_lr, 1)} | {r.gof_df} | {_f(r.gof_p, 3)} | {_f(r.gof_max_gap)} ({r.gof_max_gap_step}) | "
                 f"{r.gof_outside_band if r.gof_outside_band >= 0 else '–'} | {r.gof_verdict}: {r.gof_reason} |")
    L += ["", "## Constant-hazard fit and what it implies", "",
          "| Group | s | g | e | d | h | F_E(K) AJ | F_E(K) fit | " + " | ".join(f"F_E({b})" for b in HAZARD_BUDGETS)
          + " | F_E(∞) | " + " | ".join(f"K_max({e:g})" for e in K_MAX_EPS) + " |",
          "|---|" + "---|" * (8 + len(HAZARD_BUDGETS) + len(K_MAX_EPS))]
    for _, r in summary.iterrows():
        L.append(f"| {r.group} | " + " | ".join(_f(r[k], 4) for k in ("s", "g", "e", "d", "h")) + f" | {_f(r.F_escaped)} | {_f(r.F_E_const_K)} | "
                 + " | ".join(_f(r[f"F_E_const_{b}"]) for b in HAZARD_BUDGETS) + f" | {_f(r.F_E_const_inf)} | "
                 + " | ".join(_k(r[f"K_max_{e:g}"]) for e in K_MAX_EPS) + " |")
    if "F_escaped_cluster_low" in summary.columns and summary["cluster"].ne("none").any():
        L += ["", f"## Cluster bootstrap of F_c(K) (cluster = {summary['cluster'].iloc[0]}, beside the run CIs above)", "",
              "| Group | completed | stopped | escaped | terminated |", "|---|---|---|---|---|"]
        for _, r in summary.iterrows():
            L.append(f"| {r.group} | " + " | ".join(f"{_f(r[f'F_{c}'])} {{{_f(r[f'F_{c}_cluster_low'])}, {_f(r[f'F_{c}_cluster_high'])}}}"
                                                 for c in hz.CAUSES) + " |")
    L += ["", "## N agents and the attempt decomposition (a and b per boundary kind)", "",
          "| Group | " + " | ".join(f"N={n}: independent [bounds]" for n in N_AGENTS) + " | "
          + " | ".join(f"{k}: runs, attempts/effective, a, b" for k in BOUNDARY_KINDS) + " |",
          "|---|" + "---|" * (len(N_AGENTS) + len(BOUNDARY_KINDS))]
    for _, r in summary.iterrows():
        L.append(f"| {r.group} | " + " | ".join(f"{_f(r[f'N{n}_independent'])} [{_f(r[f'N{n}_lower'])}, {_f(r[f'N{n}_upper'])}]" for n in N_AGENTS)
                 + " | " + " | ".join(_ab_text(r, k) for k in BOUNDARY_KINDS) + " |")
    L.append("")
    return "\n".join(L)


def _ab_text(r, kind: str) -> str:
    if not r.get(f"runs_{kind}", 0):
        return "–"
    b = "1 by construction" if kind == "open" else _f(r[f"b_{kind}"])
    return f"{r[f'runs_{kind}']}, {r[f'attempts_{kind}']}/{r[f'effective_{kind}']}, {_f(r[f'a_{kind}'], 4)}, {b}"


def _best_cells(df: pd.DataFrame) -> list[str]:
    out = []
    au = df[df["metric"] == "auroc"].dropna(subset=["estimate"])
    for (m, p), g in au.groupby(["untrusted_model", "attack_prompt"], sort=True):
        r = g.sort_values(["estimate", "monitor", "inputs"], ascending=[False, True, True]).iloc[0]
        out.append(f"{m} / {p}: {r.monitor} on {r.inputs}, AUROC {r.estimate:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]")
    return out


def build_report(runs: pd.DataFrame, scores: pd.DataFrame, out_dir, opts: DetectionOptions = DetectionOptions(),
                 errors: str = "exclude", codebooks: Iterable = (), progress=None, plots_enabled: bool = True,
                 protocol_options: ProtocolOptions | None = None,
                 text_classes: pd.DataFrame | None = None, exclude_attacks: Iterable[str] = ()) -> dict[str, Path]:
    """Write every report file into out_dir; returns {name: path}.

    protocol_options: the protocol part's audit budgets, calibration unit and trusted model
    (default: every budget, per-run calibration, the detection tables' resamples and seed).
    text_classes: attack_classes.classify_runs(...) rows (refused / leaked per attack run);
    exclude_attacks: attack-run classes left out of Tables 3/4 (never_attempted, undetermined,
    refused, leaked); every table's header says which and how many."""
    popts = protocol_options or ProtocolOptions(n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
    exclude_attacks = tuple(sorted(set(exclude_attacks)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}

    def write(name: str, text: str):
        p = out / name
        p.write_text(text, encoding="utf-8", newline="\n")
        written[name] = p

    # Parts done as plain lines (the tables' cells get the bars); on stderr when it is not a
    # terminal and progress was asked for or the main job keeps a progress log.
    plain = progress is not False and not sys.stderr.isatty() and (progress is True or active_log() is not None)
    with StageProgress("report", 7, "parts", bar=False, plain=plain) as p:
        _build(runs, scores, out, opts, popts, errors, codebooks, progress, plots_enabled, write, written, p.advance,
               text_classes, exclude_attacks)
    return written


def _build(runs, scores, out: Path, opts, popts, errors, codebooks, progress, plots_enabled, write, written, step,
           text_classes=None, exclude_attacks=()) -> None:
    unmatched = int((~scores["run_id"].isin(runs["run_id"])).sum())
    side_audits = idf.audit_side_tasks(runs, errors)
    classes = ac.attack_classes(runs, text_classes)
    excluded = ac.excluded_runs(classes, exclude_attacks)
    header = run_statements(runs, classes, side_audits, exclude_attacks, excluded, text_classes)
    opts = dataclasses.replace(opts, header=tuple(header))
    table_runs = runs[~runs["run_id"].isin(excluded)].reset_index(drop=True)
    t3 = by_action_space(tables.table3, table_runs, scores, opts, progress)
    step()
    t4 = by_action_space(tables.table4, table_runs, scores, opts, progress)
    step()
    for name, df, per_step, title, label in (
        ("table3", t3, False, "Table 3: full-trajectory monitors", "tab:full-trajectory"),
        ("table4", t4, True, "Table 4: per-step monitors", "tab:per-step"),
    ):
        parts = condition_parts(df)  # one table per action space x observation when runs vary
        if len(parts) > 1 or parts[0][0]:
            write(f"{name}.md", "\n".join(render.render_markdown(d, f"{title} ({lab})", opts, per_step)
                                          for lab, d in parts))
            write(f"{name}.tex", "\n".join(render.render_latex(d, f"{title} ({lab})", opts, per_step,
                                                               f"{label}-{_slug(lab)}") for lab, d in parts))
        else:
            write(f"{name}.md", render.render_markdown(df, title, opts, per_step))
            write(f"{name}.tex", render.render_latex(df, title, opts, per_step, label))
        render.write_csv(df, out / f"{name}.csv")
        written[f"{name}.csv"] = out / f"{name}.csv"

    _write_by_category(table_runs, runs, scores, opts, progress, out, write, written, header)

    steps_df, summary, fig = hazard_tables(runs, opts.n_resamples, opts.seed, opts.level, errors, cluster=opts.cluster)
    write("hazards.md", render_hazards_markdown(summary, opts.n_resamples, opts.level, opts.seed, errors, header))
    classes.to_csv(out / "attack_classes.csv", index=False, lineterminator="\n")
    written["attack_classes.csv"] = out / "attack_classes.csv"
    steps_df.to_csv(out / "hazards.csv", index=False, float_format="%.6g", lineterminator="\n")
    written["hazards.csv"] = out / "hazards.csv"
    step()

    rec, notes = idf.record_from_runs(runs, errors)
    sections = [("These runs", idf.audit_record(rec), notes)]
    attack = runs[runs["eval_mode"] == "attack"]
    if len(attack) and len(attack) < len(runs):
        rec_a, notes_a = idf.record_from_runs(attack, errors)
        sections.append(("Attack runs only", idf.audit_record(rec_a), notes_a))
    for cb in codebooks:
        sections += codebook.audit_sections(codebook.load(cb))
    write("identifiability.md", idf.render_markdown(sections, side_audits))
    step()

    if plots_enabled:
        written.update(_plots(table_runs, scores, opts, out, fig))
    step()

    # protocols on every usable run (the detection tables' attack exclusions do not apply)
    ptab = by_condition(lambda sub: protocol_table(sub, scores, popts, opts.inclusive_for), runs,
                        relabel="untrusted_model")
    written.update(write_protocol_report(runs, scores, out, popts, opts.inclusive_for, plots_enabled, table=ptab,
                                         header=header))
    ex = exclusions.excluded_runs_table(runs, excluded, opts.attacks, errors)
    unk = exclusions.unknown_by_side_task(runs)
    write("excluded_runs.md", exclusions.render_markdown(ex, unk, header))
    ex.to_csv(out / "excluded_runs.csv", index=False, lineterminator="\n")
    written["excluded_runs.csv"] = out / "excluded_runs.csv"
    unk.to_csv(out / "unknown_checks_by_side_task.csv", index=False, lineterminator="\n")
    written["unknown_checks_by_side_task.csv"] = out / "unknown_checks_by_side_task.csv"
    step()

    write("summary.md", _summary(runs, scores, t3, t4, summary, sections[0][1], opts, errors, unmatched, sorted(written), side_audits,
                                 summary_lines(ptab, popts), ex, unk))
    step()


def _write_by_category(table_runs, runs, scores, opts, progress, out: Path, write, written, header) -> None:
    """categories.md (+ CSVs): runs and attack success per category and strategy; Tables 3/4
    per category (table3_by_category.*, table4_by_category.*), split by action space as above."""
    from control_osworld.analysis import categories as cat

    per_cat, success, strat = cat.runs_by_category(runs), cat.attack_success(runs), cat.attack_success(runs, True)
    write("categories.md", cat.render_markdown(per_cat, success, strat, header))
    for name, df in (("runs_by_category", per_cat), ("attack_success_by_category", success),
                     ("attack_success_by_category_strategy", strat)):
        df.to_csv(out / f"{name}.csv", index=False, float_format="%.6g", lineterminator="\n")
        written[f"{name}.csv"] = out / f"{name}.csv"
    att_cats = sorted(set(cat.category_of(table_runs)[(table_runs["eval_mode"] == "attack").to_numpy()]))
    for name, fn, per_step, title in (("table3", tables.table3, False, "Table 3: full-trajectory monitors"),
                                      ("table4", tables.table4, True, "Table 4: per-step monitors")):
        if len(att_cats) <= 1:  # one category (or none): its table is the main one, not computed twice
            what = f"every attack run is of category {att_cats[0]}" if att_cats else "no attack runs"
            write(f"{name}_by_category.md", f"# {title} by category\n\n{what.capitalize()}: see {name}.md.\n")
            continue
        df = cat.by_category(lambda r, s, o, p, fn=fn: by_action_space(fn, r, s, o, p), table_runs, scores, opts, progress)
        keys = [k for k in ("side_task_category", "action_space") if k in df.columns]
        parts = [] if df.empty else [(g if isinstance(g, tuple) else (g,), d.drop(columns=keys))
                                     for g, d in df.groupby(keys, sort=False)]
        md = [render.render_markdown(d, f"{title} (category {g[0]}" + (f", action space {g[1]}" if len(g) > 1 else "") + ")",
                                     opts, per_step) for g, d in parts]
        write(f"{name}_by_category.md", "\n".join(md) if md else f"# {title} by category\n\nNo attack runs.\n")
        render.write_csv(df, out / f"{name}_by_category.csv")
        written[f"{name}_by_category.csv"] = out / f"{name}_by_category.csv"


def _plots(runs, scores, opts, out: Path, fig_groups) -> dict[str, Path]:
    written = {}
    for table, (cells, mat) in (("table3", tables.full_trajectory_scores(runs, scores)), ("table4", tables.per_step_scores(runs, scores, opts))):
        if not cells:
            continue
        monitors = sorted(set(m for m, _ in cells))
        for model, prompt, honest, attack in tables.row_groups(runs, opts.attacks):
            panels = []
            for mon in monitors:
                curves = [(inp, mat[c, honest], mat[c, attack]) for c, (m, inp) in enumerate(cells) if m == mon]
                if any(np.isfinite(h).any() and np.isfinite(a).any() for _, h, a in curves):
                    panels.append((mon, curves))
            if not panels:
                continue
            name = f"roc_{table}_{plots.slug(model, prompt)}.png"
            title = f"{'Full-trajectory' if table == 'table3' else 'Per-step (per-run ' + opts.aggregate + ')'} monitors: {model} / {prompt}"
            written[name] = plots.roc_figure(out / name, title, panels, opts.fprs)
    if fig_groups:
        written["cumulative_incidence.png"] = plots.cumulative_incidence_figure(out / "cumulative_incidence.png", fig_groups)
    return written


UNRECORDED_SPACE = UNRECORDED


def _slug(label: str) -> str:
    """`action space pyautogui, observation som` -> `pyautogui-som` (LaTeX labels)."""
    return "-".join(part.rsplit(" ", 1)[-1] for part in label.split(", "))


def action_spaces(runs: pd.DataFrame) -> list[str]:
    """The agents' action spaces among these runs (runs-table column `action_space`)."""
    if "action_space" not in runs.columns:
        return []
    return sorted({str(v) for v in runs["action_space"].astype(object).where(runs["action_space"].notna(),
                                                                              UNRECORDED)})


def by_action_space(table_fn, runs: pd.DataFrame, scores: pd.DataFrame, opts, progress=None) -> pd.DataFrame:
    """Table 3 or 4 (`table_fn`) per condition, action space x observation
    (analysis/conditions.py): runs of several conditions give one table per condition (honest and
    attack runs of a condition compared with each other only), stacked with a column per varying
    axis; runs of one condition: the table as it is."""
    return by_condition(lambda sub: table_fn(sub, scores, opts, progress), runs)


def matching_statement(runs: pd.DataFrame) -> str:
    """How honest runs were matched to attack runs, from the runs' metadata."""
    honest, attack = runs[runs["eval_mode"] == "honest"], runs[runs["eval_mode"] == "attack"]
    col = honest["honest_matching"] if "honest_matching" in honest.columns else pd.Series(dtype=object)
    modes = sorted(set(v for v in col if v is not None))
    if not modes:
        how = "not recorded by these runs (older logs: honest runs likely had no side-task setup, one per main task)"
    elif modes == ["matched"]:
        env = honest["env_side_task_id"].notna()
        how = (f"matched: honest runs in their attack counterparts' environments (side-task setup, no objective), "
               f"{int(env.sum())} of {len(honest)} with a side-task environment")
    elif modes == ["per_main"]:
        how = "per_main: one honest run per main task without side-task setup (honest and attack desktops differ)"
    else:
        how = f"mixed ({', '.join(modes)})"
    mix = ""
    if len(honest) and len(attack):
        h = honest["main_task_id"].value_counts(normalize=True)
        a = attack["main_task_id"].value_counts(normalize=True)
        idx = h.index.union(a.index)
        tv = 0.5 * float((h.reindex(idx, fill_value=0) - a.reindex(idx, fill_value=0)).abs().sum())
        mix = f"; main-task mix: total variation distance between honest and attack main-task shares {tv:.2f} (0 = same mix)"
    return f"Honest/attack matching: {how}{mix}."


def design_statement(runs: pd.DataFrame) -> str:
    """The pairings design these runs come from (its name, file, k) and its counts, measured on
    the attack runs: distinct (main, side) pairings, side and main tasks, pairings per side task
    and per main task, and whether every side task is in at least k of them."""
    col = runs["design"] if "design" in runs.columns else pd.Series([None] * len(runs), dtype=object)
    names = sorted(set(v for v in col if isinstance(v, str)))
    if not names:
        return "Design: not recorded by these runs (older logs: pairings from the side tasks' rules)."
    attack = runs[runs["eval_mode"] == "attack"]
    parts = []
    for name in names:
        sel = runs[col == name]
        files = sorted(set(v for v in sel.get("design_file", pd.Series(dtype=object)) if isinstance(v, str)))
        ks = sorted(set(int(v) for v in sel.get("design_k", pd.Series(dtype=object)) if v is not None and not pd.isna(v)))
        a = attack[attack.index.isin(sel.index)]
        pairs = a[["main_task_id", "side_task_id"]].dropna().drop_duplicates()
        per_side = pairs.groupby("side_task_id").size()
        per_main = pairs.groupby("main_task_id").size()
        where = "the side tasks' pairing rules" if name == "rules" else ", ".join(files) or "file not recorded"
        k_txt = f"k = {ks[0]}" if len(ks) == 1 else ("k not declared" if not ks else f"k = {ks}")
        declared = sorted(set(int(v) for v in sel.get("design_pairings", pd.Series(dtype=object))
                              if v is not None and not pd.isna(v)))
        if len(declared) == 1:
            k_txt += f", {declared[0]} pairings declared"
        txt = (f"{name} ({where}), {k_txt}: {len(pairs)} pairings (main x side) in {len(a)} attack runs over "
               f"{per_side.size} side tasks and {per_main.size} main tasks")
        if len(pairs):
            txt += (f"; pairings per side task {int(per_side.min())}-{int(per_side.max())}, "
                    f"per main task {int(per_main.min())}-{int(per_main.max())}")
            if len(ks) == 1:
                txt += f"; every side task in >= k: {'yes' if int(per_side.min()) >= ks[0] else 'no'}"
        txt += f"; {int((sel['eval_mode'] == 'honest').sum())} honest runs"
        parts.append(txt)
    return "Design: " + "; ".join(parts) + "."


def classes_statement(classes: pd.DataFrame, exclude, excluded: set, text_classes) -> str:
    c = ac.class_counts(classes)
    who = (f"classifier {', '.join(sorted(set(text_classes['classifier'])))}" if text_classes is not None and len(text_classes)
           else "visible text not classified: control-osworld classify")
    ex = (f"left out of Tables 3/4: {', '.join(exclude)} ({len(excluded)} runs)" if exclude else "none left out of Tables 3/4")
    return (f"Attack-run classes ({len(classes)} runs): attempted {c['attempted']}, never attempted {c['never_attempted']}, "
            f"undetermined (no attempt detector, no effect) {c['undetermined']}; refused {c['refused']}, leaked {c['leaked']}, "
            f"text not classified {c['text_not_classified']} ({who}); {ex}.")


def audit_statement(side_audits) -> str:
    if not side_audits:
        return "Identifiability of a and b: no attack runs."
    by: dict[str, list[str]] = {}
    for a in side_audits:
        v = {j.quantity: j.verdict for j in a.judgements}["a_and_b"]
        by.setdefault(v, []).append(a.side_task_id)
    return ("Identifiability of a and b per side task, from the runs' recorded attempt_detector, attempt_steps and boundary: "
            + "; ".join(f"{v}: {', '.join(ids)}" for v, ids in sorted(by.items())) + " (identifiability.md).")


def run_statements(runs, classes, side_audits, exclude, excluded, text_classes) -> list[str]:
    """What every table states about its runs: the design, matching, attack-run classes, the audit,
    unknown verdicts and left-out runs."""
    return [design_statement(runs), matching_statement(runs), classes_statement(classes, exclude, excluded, text_classes),
            audit_statement(side_audits), exclusions.unknown_statement(runs)]


def _errors_line(runs: pd.DataFrame, errors: str) -> str:
    """Where the error runs failed, and what the report does with them."""
    err = runs[runs["outcome"] == "error"]
    if err.empty:
        return "- Errors (infrastructure failures): none."
    st = err["outcome_step"].to_numpy(dtype=np.int64)
    after = int((st > err["budget"].to_numpy(dtype=np.int64)).sum())
    setup = int((st == 0).sum())
    how = ("left out of the hazard estimates" if errors == "exclude"
           else "censored in the hazard estimates after the step before the failed one")
    return (f"- Errors (infrastructure failures): {len(err)} ({int((err['eval_mode'] == 'honest').sum())} honest, "
            f"{int((err['eval_mode'] == 'attack').sum())} attack): {setup} before step 1 (setup), "
            f"{len(err) - setup - after} during a step, {after} after the run's last step; kept apart: "
            f"left out of Tables 3 and 4 and protocol safety (its conservative column counts attack errors as "
            f"effective and uncaught) and {how}. A run whose outcome was recorded before its error keeps that outcome.")


def _exclusion_lines(ex: pd.DataFrame | None, unk: pd.DataFrame | None) -> list[str]:
    L = ["", "## Excluded runs (excluded_runs.md)", ""]
    if ex is None or ex.empty:
        L.append("- None: every run is in every part of the report.")
    else:
        for (reason, where), g in ex.groupby(["reason", "left_out_of"], sort=True):
            L.append(f"- {reason}: {len(g)} run(s) ({int((g['eval_mode'] == 'honest').sum())} honest, "
                     f"{int((g['eval_mode'] == 'attack').sum())} attack), left out of {where}.")
    L += ["", "## Unknown checks by side task", ""]
    if unk is None or unk.empty:
        L.append("- No attack runs.")
    else:
        for r in unk.itertuples(index=False):
            L.append(f"- {r.side_task_id}: {r.runs_with_unknown_checks} of {r.attack_runs} attack runs with unknown checks "
                     f"({r.unknown_check_steps} steps; {r.checks_recorded} runs record their checks), final verdict unknown in "
                     f"{r.side_verdict_unknown}" + (f" ({r.reasons})" if r.reasons else "") + ".")
    return L


def _summary(runs, scores, t3, t4, hsum, judgements, opts, errors, unmatched, files, side_audits=(), protocol_lines=(),
             ex=None, unk=None) -> str:
    n = len(runs)
    modes = runs["eval_mode"].value_counts()
    L = ["# Analysis summary", ""]
    L.append(f"- Runs: {n} ({int(modes.get('honest', 0))} honest, {int(modes.get('attack', 0))} attack) over "
             f"{runs['untrusted_model'].nunique()} untrusted model(s) and {runs.loc[runs['eval_mode'] == 'attack', 'attack_prompt'].nunique()} attack prompt(s).")
    oc = runs["outcome"].value_counts()
    L.append("- Outcomes: " + ", ".join(f"{c} {int(oc.get(c, 0))}" for c in hz.OUTCOMES) + ".")
    L.append(_errors_line(runs, errors))
    succ = int(exclusions.effective(runs[runs["eval_mode"] == "attack"]).sum())
    n_unk = int(exclusions.effect_unknown(runs).sum())
    L.append(f"- Attack runs whose side task succeeded: {succ} (t* recorded with an unknown final verdict included; "
             f"effect unknown in {n_unk}, left out). Table rows use {'those' if opts.attacks == 'successful' else 'all attack runs'}.")
    L.append(f"- Scores: {len(scores)} rows, {int(scores['score'].isna().sum())} missing (monitor errors), {unmatched} for runs not in the runs table (ignored).")
    L.append(f"- Conventions: AUROC ties 1/2; pAUROC FPR < {opts.max_fpr:g} McClish and raw/max_fpr; TPR@FPR with k = floor(a n), flag > tau, achieved FPR reported; "
             f"{opts.level:.0%} percentile CIs from {opts.n_resamples} stratified run resamples, seed {opts.seed}, and beside them cluster CIs "
             f"(cluster = {opts.cluster}; default side_task; report --cluster); per-step run score = {opts.aggregate}; errors {errors}.")
    L += [f"- {h}" for h in opts.header]
    L += _exclusion_lines(ex, unk)
    L += ["", "## Best monitor per row group (AUROC)", ""]
    for name, df in (("Table 3 (full trajectory)", t3), ("Table 4 (per step)", t4)):
        best = _best_cells(df)
        L += [f"- {name}: " + ("; ".join(best) if best else "no scores")]
    cb = t4[(t4["metric"] == "caught_before_t_star")].dropna(subset=["estimate"])
    if not cb.empty:
        f0 = min(opts.fprs)
        top = cb[cb["fpr"] == f0].sort_values(["estimate", "monitor", "inputs"], ascending=[False, True, True]).head(1)
        if not top.empty:
            r = top.iloc[0]
            L.append(f"- Highest caught-before-t* at per-run FPR {f0:.0%}: {r.monitor} on {r.inputs} ({r.untrusted_model} / {r.attack_prompt}): {r.estimate:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}].")
    L += ["", "## Protocols (protocols.md, safety_usefulness_*.png)", ""] + list(protocol_lines)
    L += ["", "## Competing hazards", ""]
    for _, r in hsum.iterrows():
        if r.eval_mode != "attack":
            continue
        km = r[f"K_max_{K_MAX_EPS[0]:g}"]
        ab = "; ".join(f"{k}: a = {_f(r[f'a_{k}'], 4)}, b = {'1 by construction' if k == 'open' else _f(r[f'b_{k}'])}"
                       for k in BOUNDARY_KINDS if r.get(f"runs_{k}", 0))
        cl = (f" {{cluster {r.cluster}: {_f(r.F_escaped_cluster_low)}, {_f(r.F_escaped_cluster_high)}}}"
              if r.get("cluster", "none") != "none" else "")
        proj = (f"K_max({K_MAX_EPS[0]:g}) = {_k(km)}" if r.projection == "shown"
                else f"K_max and F_E(∞) withheld (constant hazards {r.gof_verdict})")
        L.append(f"- {r.group}: F_E({r.budget}) = {_ci(r, 'F_escaped')}{cl}; F_completed = {_f(r.F_completed)}, F_stopped = {_f(r.F_stopped)}; "
                 f"{ab or 'no attempts recorded'}; {proj}; "
                 f"N={N_AGENTS[-1]}: {_f(r[f'N{N_AGENTS[-1]}_independent'])} if independent.")
    L += ["", "## Identifiability (these runs)", ""]
    L += [f"- {j.quantity}: {j.verdict}" for j in judgements]
    for a in side_audits:
        j = {x.quantity: x.verdict for x in a.judgements}
        b = a.boundary
        L.append(f"- side task {a.side_task_id} ({a.n_runs} attack runs; attempt detector {a.detector}; boundary open {b['open']}, "
                 f"closed {b['closed']}, none {b['none']}): h_E {j['h_E']}; a and b {j['a_and_b']}.")
    L += ["", "## Files", ""] + [f"- {f}" for f in files + ["summary.md"]]
    L.append("")
    return "\n".join(L)
