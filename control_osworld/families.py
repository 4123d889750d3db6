"""The families of evaluations (control, proactivity) and what the shared commands need of each.

A family is a folder beside the shared core (`control_osworld/control/`,
`control_osworld/proactivity/`) with a `family.py` that registers it:

    @family("proactivity")
    class Proactivity:
        def run(self, config, *, log_dir, skip_agents) -> int: ...   # `control-osworld run CONFIG`
        def commands(self) -> Sequence[click.Command]: ...          # its own `control-osworld` subcommands
        def report(self, paths, out_dir, **options) -> dict[str, Path] | None: ...  # `report --<name>`

`control-osworld run` picks the family by a config's `family:` key (control when absent), the
CLI adds every family's commands, and `report --proactivity` asks that family for its tables.
The shared core imports no family: it loads the family modules listed in `FAMILY_MODULES` by
name when it first asks (`families()`), as inspect loads its entry points.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar

__all__ = ["FAMILY_MODULES", "DEFAULT_FAMILY", "Family", "family", "families", "get_family"]

FAMILY_MODULES = ("control_osworld.control.family", "control_osworld.proactivity.family")
"""The modules that register the built-in families (imported on first lookup)."""

DEFAULT_FAMILY = "control"
"""The family of a run config without a `family:` key."""


class Family(Protocol):
    """What a family gives the shared commands (methods import their machinery lazily, so that
    loading the registry stays cheap for the CLI)."""

    name: str

    def run(self, config: str | Path, *, log_dir: str | None, skip_agents: bool) -> int:
        """Run a config of this family end to end (agents, tables, report); the exit code."""
        ...

    def commands(self) -> Sequence[Any]:
        """Its own click commands and groups, added to `control-osworld`."""
        ...

    def report(self, paths: Sequence[Path], out_dir: Path, **options: Any) -> dict[str, Path] | None:
        """`control-osworld report --<name> PATHS`: its tables from its runs into `out_dir`;
        None when the family has no report option of its own."""
        ...


_FAMILIES: dict[str, Family] = {}
_loaded = False
F = TypeVar("F")


def family(name: str) -> Callable[[type[F]], type[F]]:
    """Register a family class under `name` (one instance serves every lookup)."""

    def register(cls: type[F]) -> type[F]:
        inst: Any = cls()
        inst.name = name
        _FAMILIES[name] = inst
        return cls

    return register


def families() -> dict[str, Family]:
    """Every registered family by name (the built-in ones loaded on first call)."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in FAMILY_MODULES:
            importlib.import_module(module)
    return dict(_FAMILIES)


def get_family(name: str) -> Family:
    """The family `name`; KeyError naming the known ones otherwise."""
    known = families()
    try:
        return known[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r} (known: {', '.join(sorted(known))})") from None
