"""Monitors over .eval logs: what the main job (`control-osworld run`) and the CLI call."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, Sequence

from control_osworld.resources import find_config

from .config import (
    ALL_SUBSETS,
    SCORING_KINDS,
    ConfigError,
    MonitorConfig,
    load_config,
    parse_subsets,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LogReadError", "load_configs", "monitor_logs", "read_logs"]


class LogReadError(RuntimeError):
    pass


def read_logs(paths: Sequence[str | Path]):
    """RunRecords (screenshots resolved) from .eval logs, files or folders of them."""
    from control_osworld.logs import read_run_records

    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.rglob("*.eval"))
            if not found:
                raise LogReadError(f"{p}: folder holds no .eval logs")
            files += found
        elif not p.exists():
            raise LogReadError(f"{p}: no such log")
        else:
            files.append(p)
    runs = []
    for f in files:
        try:
            runs += read_run_records(f)
        except Exception as exc:
            raise LogReadError(f"{f}: cannot read as a run log ({type(exc).__name__}: {exc})") from exc
    return runs


def load_configs(paths: Sequence[str | Path | MonitorConfig]) -> list[MonitorConfig]:
    """Configs from files; a relative path that is not found here is looked up in the data root
    (a bare name in monitors/: `per_step_rules`)."""
    out = []
    for p in paths:
        c = p if isinstance(p, MonitorConfig) else load_config(find_config(p, "monitors"))
        if c.kind not in SCORING_KINDS:  # a classifier says refused/leaked per run: no views to score
            raise ConfigError(f"{p if not isinstance(p, MonitorConfig) else c.name}: field 'kind': {c.kind!r} is run by "
                              f"`control-osworld classify`, not as a scoring monitor")
        out.append(c)
    return out


def monitor_logs(
    logs: Sequence[str | Path],
    monitors: Sequence[str | Path | MonitorConfig],
    *,
    subsets: Sequence[str] | Literal["all"] = "all",
    store: str | Path,
    concurrency: int = 8,
    progress: bool | None = None,
    cache_dir: str | Path | None = None,
) -> "pd.DataFrame":
    """Score every run in `logs` with every monitor × subset into the scores store."""
    from .runtime import score_runs

    configs = load_configs(monitors)
    chosen = list(ALL_SUBSETS) if subsets == "all" else parse_subsets(list(subsets))
    runs = read_logs(logs)
    if not runs:
        import pandas as pd

        return pd.DataFrame()
    return score_runs(runs, configs, chosen, store, concurrency=concurrency, progress=progress, cache_dir=cache_dir)
