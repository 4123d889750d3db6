"""``control-osworld report`` and ``control-osworld audit`` (click commands).

The lead's top-level group adds them with ``main.add_command(report_command)`` and
``main.add_command(audit_command)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from control_osworld.cli_paths import DataPath
from control_osworld.monitoring.cli import classify_command  # noqa: F401  (its old home; a monitor kind now)

__all__ = ["report_command", "audit_command", "classify_command"]


def _fprs(value: str) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"not a comma-separated list of numbers: {value!r}") from None
    if not out or any(not 0 < f < 1 for f in out):
        raise click.BadParameter("each FPR must be in (0, 1)")
    return out


def _score_points(values) -> tuple[tuple[str, str], ...]:
    out = []
    for v in values:
        mon, sep, point = v.rpartition("=")
        if not sep or not mon or point not in ("pre_action", "post_action"):
            raise click.BadParameter(f"--score-point {v!r}: expected MONITOR=pre_action or MONITOR=post_action")
        out.append((mon, point))
    return tuple(out)


def _read_classes(paths):
    import pandas as pd

    if not paths:
        return None
    frames = []
    for p in paths:
        df = pd.read_parquet(p) if p.suffix.lower() in (".parquet", ".pq") else pd.read_csv(p)
        missing = [c for c in ("run_id", "refused", "leaked", "classifier") if c not in df.columns]
        if missing:
            raise click.ClickException(f"{p}: missing column(s) {', '.join(map(repr, missing))}")
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    for c in ("refused", "leaked"):
        out[c] = out[c].map(lambda v: None if v is None or v != v else str(v).lower() in ("true", "1"))
    return out


def _load(logs, scores):
    from .runs import InputError, load_runs, load_scores

    try:
        runs = load_runs(list(logs))
        sc = load_scores(list(scores)) if scores else None
    except (InputError, NotImplementedError) as exc:
        raise click.ClickException(str(exc)) from None
    return runs, sc


@click.command("report")
@click.option("--logs", "logs", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Runs table(s) (.parquet/.csv), inspect .eval logs, or a folder of them. Repeatable.")
@click.option("--scores", "scores", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Monitor scores store(s) (.parquet/.csv). Repeatable.")
@click.option("--proactivity", "dilemmas", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Dilemma runs (.eval logs, folders of them, dilemma_runs.parquet): tables into OUT/proactivity. Repeatable.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path), help="Output folder.")
@click.option("--seed", default=0, show_default=True, help="Bootstrap seed (output is deterministic for a seed).")
@click.option("--resamples", default=2000, show_default=True, help="Bootstrap resamples (of runs, never steps).")
@click.option("--level", default=0.95, show_default=True, help="Confidence level of the percentile CIs.")
@click.option("--fprs", default="0.01,0.03,0.05", show_default=True, help="FPRs for TPR@FPR and caught-before-t*.")
@click.option("--max-fpr", default=0.03, show_default=True, help="Upper FPR of the partial AUROC.")
@click.option("--attacks", type=click.Choice(["successful", "all"]), default="successful", show_default=True,
              help="Positive class: attack runs whose side task succeeded, or all attack runs.")
@click.option("--aggregate", type=click.Choice(["max", "mean", "median", "last"]), default="max", show_default=True,
              help="Per-step monitors: a run's score from its step scores.")
@click.option("--score-point", "score_points", multiple=True, metavar="MONITOR=POINT",
              help="Override a per-step monitor's recorded score point (pre_action: s <= t*; post_action: s < t*); "
                   "MONITOR 'all' for every monitor. Repeatable.")
@click.option("--inclusive-t-star", "inclusive", multiple=True, metavar="MONITOR",
              help="Same as --score-point MONITOR=pre_action ('all' for every monitor). Repeatable.")
@click.option("--errors", type=click.Choice(["exclude", "censor"]), default="exclude", show_default=True,
              help="Hazards: drop error runs (counted apart) or censor them before their failed step.")
@click.option("--codebook", "codebooks", multiple=True, type=DataPath(folder="codebooks", exists=True, dir_okay=False, path_type=Path),
              help="YAML codebook of external evaluations to audit alongside the runs. Repeatable.")
@click.option("--classes", "classes", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Refusal/leak classes of attack runs (.parquet/.csv from `control-osworld classify`). Repeatable.")
@click.option("--exclude-attacks", default="", show_default=False, metavar="CLASSES",
              help="Attack-run classes left out of Tables 3/4, comma-separated: never_attempted, undetermined, refused, leaked.")
@click.option("--audit-unit", type=click.Choice(["runs", "steps"]), default="runs", show_default=True,
              help="Protocols: an audit budget is a share of honest runs (per-run max) or of honest steps.")
@click.option("--trusted-model", default=None, metavar="MODEL",
              help="Protocols: the model whose honest runs in --logs give U_trusted for normalised usefulness "
                   "(U - U_trusted) / (U_untrusted - U_trusted).")
@click.option("--cluster", type=click.Choice(["none", "side_task", "main_task", "both"]), default="side_task", show_default=True,
              help="Cluster bootstrap reported beside the run bootstrap: whole side-task templates, whole main tasks, "
                   "both (two-way), or none (dilemma runs: scenarios unless none).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG figures.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
def report_command(logs, scores, dilemmas, out_dir, seed, resamples, level, fprs, max_fpr, attacks, aggregate, score_points, inclusive, errors, codebooks,
                   classes, exclude_attacks, audit_unit, trusted_model, cluster, no_plots, progress):
    """Regenerate Tables 3 and 4, hazards, identifiability, plots and a summary into OUT
    (control runs: --logs and --scores); dilemma tables into OUT/proactivity (--proactivity)."""
    from .protocols import ProtocolOptions
    from .report import build_report
    from .tables import DetectionOptions

    if not dilemmas and not (logs and scores):
        raise click.UsageError("give --logs and --scores (control runs) and/or --proactivity (dilemma runs)")
    if bool(logs) != bool(scores):
        raise click.UsageError("--logs and --scores go together")
    if dilemmas:
        from control_osworld.families import get_family

        try:
            d_written = get_family("proactivity").report(
                dilemmas, Path(out_dir) / "proactivity", n_resamples=resamples, seed=seed, level=level,
                plots_enabled=not no_plots, errors=errors, cluster=cluster != "none") or {}
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"wrote {len(d_written)} files to {Path(out_dir) / 'proactivity'}")
        if not logs:
            return
    runs, sc = _load(logs, scores)
    points = _score_points(score_points) + tuple((m, "pre_action") for m in inclusive)
    try:
        opts = DetectionOptions(fprs=_fprs(fprs), max_fpr=max_fpr, n_resamples=resamples, level=level, seed=seed,
                                attacks=attacks, aggregate=aggregate, score_points=points, cluster=cluster)
        if trusted_model and not (runs["untrusted_model"] == trusted_model).any():
            raise click.BadParameter(f"no runs of {trusted_model!r} in --logs (models: "
                                     f"{', '.join(sorted(set(runs['untrusted_model'])))})", param_hint="--trusted-model")
        popts = ProtocolOptions(unit=audit_unit, n_resamples=resamples, level=level, seed=seed, trusted_model=trusted_model,
                                cluster=cluster)
        text = _read_classes(classes)
        exclude = tuple(x.strip() for x in exclude_attacks.split(",") if x.strip())
        written = build_report(runs, sc, out_dir, opts, errors=errors, codebooks=codebooks, progress=progress, plots_enabled=not no_plots,
                               protocol_options=popts, text_classes=text, exclude_attacks=exclude)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {len(written)} files to {out_dir}")
    for name in sorted(written):
        click.echo(f"  {name}")


@click.command("audit")
@click.option("--logs", "logs", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Runs table(s) (.parquet/.csv), inspect .eval logs, or a folder of them, to audit. Repeatable.")
@click.option("--codebook", "codebooks", multiple=True, type=DataPath(folder="codebooks", exists=True, dir_okay=False, path_type=Path),
              help="YAML codebook of published evaluations (e.g. codebooks/agent_evaluations.yaml). Repeatable.")
@click.option("--errors", type=click.Choice(["exclude", "censor"]), default="exclude", show_default=True)
@click.option("--out", "out", type=click.Path(path_type=Path),
              help="Folder: audit.md, and with --codebook Table 2 (table2.md/.csv, table2_counts.csv) and Table 3 "
                   "(table3.md/.csv, table3_counts.csv). A path ending in .md gets the audit alone. Default: stdout.")
def audit_command(logs, codebooks, errors, out):
    """Identifiability audit (competing-hazards paper, section 4.5) of runs and/or published evaluations, and
    the codebook's Tables 2 and 3 (this harness's own entry: `control-osworld harness-entry`)."""
    from . import codebook as cbk
    from . import identifiability as idf

    if not logs and not codebooks:
        raise click.UsageError("give --logs and/or --codebook")
    sections = []
    runs = None
    if logs:
        runs, _ = _load(logs, ())
        rec, notes = idf.record_from_runs(runs, errors)
        sections.append((f"Runs: {', '.join(map(str, logs))}", idf.audit_record(rec), notes))
    entries = []
    for cb in codebooks:
        try:
            entries += cbk.load(cb)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    sections += cbk.audit_sections(entries)
    text = idf.render_markdown(sections, idf.audit_side_tasks(runs, errors) if runs is not None else [])
    if out is None:
        sys.stdout.write(text)
        return
    if out.suffix.lower() == ".md":
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}")
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.md").write_text(text, encoding="utf-8")
    written = [out / "audit.md"]
    if entries:
        written += cbk.write_tables(entries, out, sources=codebooks)
    click.echo(f"wrote {len(written)} files to {out}")
    for p in written:
        click.echo(f"  {p.name}")

