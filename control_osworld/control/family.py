"""The control family in the family registry (control_osworld/families.py): the main job and
the `tasks` commands and `harness-entry` (the control harness's codebook entry); its tables come from the shared report (`report --logs --scores`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from control_osworld.families import family


@family("control")
class Control:
    def run(self, config: str | Path, *, log_dir: str | None, skip_agents: bool) -> int:
        from control_osworld.control.run import run

        return run(config, log_dir=log_dir, skip_agents=skip_agents)

    def commands(self) -> Sequence[Any]:
        from control_osworld.control.harness_entry import harness_entry_command
        from control_osworld.control.pairing_check import play_pairings_command
        from control_osworld.osworld.cli import tasks_group

        # `tasks play-pairings`: the design check plays plans of the scripted model (control/)
        tasks_group.add_command(play_pairings_command())
        return [tasks_group, harness_entry_command]

    def report(self, paths: Sequence[Path], out_dir: Path, **options: Any) -> dict[str, Path] | None:
        return None  # Tables 3/4, hazards and protocols: the shared report over --logs and --scores
