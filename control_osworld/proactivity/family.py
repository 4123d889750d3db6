"""The dilemma family (toxic proactivity) in the family registry (control_osworld/families.py):
its runs (`family: proactivity` configs), its `proactivity` commands and `report --proactivity`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from control_osworld.families import family


@family("proactivity")
class Proactivity:
    def run(self, config: str | Path, *, log_dir: str | None, skip_agents: bool) -> int:
        from control_osworld.proactivity.run import run

        return run(config, log_dir=log_dir, skip_agents=skip_agents)

    def commands(self) -> Sequence[Any]:
        from control_osworld.proactivity.cli import proactivity_group

        return [proactivity_group]

    def report(self, paths: Sequence[Path], out_dir: Path, **options: Any) -> dict[str, Path] | None:
        """The dilemma tables into `out_dir` from .eval logs, folders of them or dilemma_runs.parquet."""
        from control_osworld.proactivity.report import build_proactivity_report
        from control_osworld.proactivity.runs import load_dilemma_runs

        return build_proactivity_report(load_dilemma_runs(paths), out_dir, **options)
