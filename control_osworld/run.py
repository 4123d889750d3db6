"""`control-osworld run CONFIG`: a config of any family, run by its family (families.py).

The family is the config's `family:` key (control when absent): `control` runs the control
family's main job (control_osworld/control/run.py), `proactivity` the dilemmas
(control_osworld/proactivity/run.py).
"""

from __future__ import annotations

from pathlib import Path

from control_osworld.config_file import ConfigError, read_mapping
from control_osworld.families import DEFAULT_FAMILY, get_family

__all__ = ["run", "config_family"]


def config_family(path: str | Path) -> str:
    """`family:` of a run config (control when absent); a file that cannot be read is left to
    the family's own loader to report."""
    try:
        raw = read_mapping(path, empty_ok=True)
    except ConfigError:
        return DEFAULT_FAMILY
    return str(raw.get("family", DEFAULT_FAMILY))


def run(config_path: str | Path, *, log_dir: str | None = None, skip_agents: bool = False) -> int:
    """Run every stage of the config's family; ConfigError naming the field for an unknown family."""
    name = config_family(config_path)
    try:
        fam = get_family(name)
    except KeyError as exc:
        raise ConfigError(f"{config_path}: field 'family': {exc.args[0]}") from None
    return fam.run(config_path, log_dir=log_dir, skip_agents=skip_agents)
