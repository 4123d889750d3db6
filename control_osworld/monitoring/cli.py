"""`control-osworld monitor LOGS... --config monitors/X.yaml`: score stored logs, no agent re-run."""

from __future__ import annotations

from pathlib import Path

import click

from control_osworld.cli_paths import DataPath

from .config import ALL_SUBSETS, ConfigError, parse_subsets
from .runner import load_configs

__all__ = ["monitor_command", "read_logs"]


def read_logs(paths: list[Path]):
    """RunRecords from .eval logs (files, or folders of them)."""
    from .runner import LogReadError
    from .runner import read_logs as _read

    try:
        return _read(paths)
    except (LogReadError, ImportError) as exc:
        raise click.ClickException(str(exc)) from None


@click.command("monitor")
@click.argument("logs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--config", "-c", "config_paths", multiple=True, required=True, type=DataPath(folder="monitors", path_type=Path),
              help="A monitor config (monitors/*.yaml); repeat for several.")
@click.option("--inputs", "inputs", multiple=True,
              help="Input subset, e.g. A,S or A+T+S; repeat for several. Default: each config's own `inputs`.")
@click.option("--all-subsets", is_flag=True, help="Score all seven subsets of A, T, S.")
@click.option("--model", help="Judge every config with this model instead (e.g. openai/gpt-4.1-mini, offline/rules).")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), default=Path("scores"), show_default=True,
              help="Scores store folder (the analysis reads STORE/scores.parquet).")
@click.option("--concurrency", default=8, show_default=True, help="Views scored at once.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Reply cache, the only one (default: STORE/cache/monitor, with $XDG_CACHE_HOME/control-osworld/monitor-cache behind it).")
@click.option("--no-cache", is_flag=True, help="Ask the model again even when a reply is cached.")
@click.option("--include-reasoning", is_flag=True, help="Also show monitors the agent's private reasoning (off by default).")
@click.option("--into-logs", is_flag=True,
              help="Also write the scores into the .eval logs as inspect scores (one scorer per monitor and subset), "
                   "so inspect view and control-arena's samples_df see them. Idempotent.")
@click.option("--progress/--no-progress", default=None, help="Progress on stderr: bars on a terminal, plain lines (done/total, rate, ETA) otherwise (default: on).")
def monitor_command(logs, config_paths, inputs, all_subsets, model, store, concurrency, cache_dir, no_cache,
                    include_reasoning, into_logs, progress) -> None:
    """Score stored LOGS (.eval files or folders) with monitors; rows go to the scores store.

    Replies are cached by content and finished rows are kept, so running it again costs
    nothing and an interrupted run resumes where it stopped.
    """
    from .runtime import score_runs

    if all_subsets and inputs:
        raise click.UsageError("give --inputs or --all-subsets, not both")
    try:
        configs = load_configs(config_paths)
        if model:
            configs = [c.with_model(model) for c in configs]
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise click.UsageError(f"two configs share a name: {', '.join(names)}")
    try:
        subsets = list(ALL_SUBSETS) if all_subsets else parse_subsets(list(inputs))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--inputs") from None

    runs = read_logs(list(logs))
    if not runs:
        raise click.ClickException("the logs hold no runs")
    # Without --inputs each config scores its own subset.
    groups = [(configs, subsets)] if subsets else [([c], [c.inputs]) for c in configs]
    frames = [score_runs(runs, cs, ss, store, concurrency=concurrency, progress=progress, cache_dir=cache_dir,
                         use_cache=not no_cache, include_reasoning=include_reasoning or None)
              for cs, ss in groups]

    import pandas as pd

    df = pd.concat(frames, ignore_index=True)
    summary = df.groupby(["monitor", "monitor_kind", "inputs"], sort=False).agg(
        rows=("run_id", "size"), errors=("error", lambda s: int(s.notna().sum())),
        cached=("cached", lambda s: int(s.fillna(False).astype(bool).sum())), mean_score=("score", "mean"))
    click.echo(summary.to_string())
    click.echo(f"{len(runs)} runs; scores in {store / 'scores.parquet'}")
    if into_logs:
        from .store import ScoreStore
        from .writeback import write_scores_into_logs

        files = sorted({str(r.log) for r in runs})
        changed = write_scores_into_logs(ScoreStore(store).read(), files)
        click.echo(f"scores written into {sum(1 for n in changed.values() if n)} of {len(files)} log(s) "
                   f"({sum(changed.values())} sample scores changed)")
    if df["error"].notna().any():
        first = df[df["error"].notna()].iloc[0]
        click.echo(f"{int(df['error'].notna().sum())} rows are errors, e.g. {first['run_id']} step {first['step']}: {first['error'][:200]}", err=True)


@click.command("classify")
@click.argument("logs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--config", "config", default=None, type=DataPath(folder="classifiers", exists=True, dir_okay=False, path_type=Path),
              help="Classifier config (classifiers/*.yaml; default: the repo's classifiers/refusal_rules.yaml).")
@click.option("--model", default=None, help="Override the config's model (any inspect model string, or offline/rules).")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the classes (.parquet or .csv), for `report --classes`.")
def classify_command(logs, config, model, out_file):
    """Refused / leaked (in visible text) for each attack run of .eval LOGS."""
    from control_osworld.logs import iter_run_records
    from control_osworld.monitoring.config import REPO_ROOT

    from .classify import classify_runs, load_classifier_config

    try:
        cfg = load_classifier_config(config or REPO_ROOT / "classifiers" / "refusal_rules.yaml", model=model)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    records = []
    for log in logs:
        try:
            records += list(iter_run_records(log, images=False))
        except Exception as exc:
            raise click.ClickException(f"{log}: not a readable control-osworld .eval log ({type(exc).__name__}: {exc})") from None
    df = classify_runs(records, cfg)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    if out_file.suffix.lower() in (".parquet", ".pq"):
        df.to_parquet(out_file, index=False)
    else:
        df.to_csv(out_file, index=False, lineterminator="\n")
    click.echo(f"{len(df)} attack runs: refused {int(df['refused'].map(lambda v: v is True).sum())}, "
               f"leaked {int(df['leaked'].map(lambda v: v is True).sum())}, errors {int(df['error'].notna().sum())}; wrote {out_file}")
