"""`DataPath`: a click path argument that also finds the harness's own data files.

A value that exists as given is the user's file and wins; one that does not is looked up in
the data root (`control_osworld.resources`), so `configs/offline.yaml`, `offline` (with
`folder="configs"`) or `codebooks/agent_evaluations.yaml` work from any directory, also from
an installed wheel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from control_osworld.resources import find, find_config


class DataPath(click.Path):
    """click.Path (same options), the value first resolved through `resources.find`, or
    `resources.find_config(value, folder)` when `folder` names a data folder of named files."""

    def __init__(self, *, folder: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.folder = folder

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (str, Path)) and str(value) not in ("", "-"):
            found = find_config(value, self.folder) if self.folder else find(value)
            if found.exists():
                value = str(found)
        return super().convert(value, param, ctx)
