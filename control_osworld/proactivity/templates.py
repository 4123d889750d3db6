"""Template mode: the bundled scenario pack without a model, deterministically.

`scenarios/templates.yaml` holds 4 domains x 2 cases; each case is rendered under both drives
(`prompts/proactivity/drives.yaml`) into a Scenario, which passes the same invariant checks as
a generated one. Same inputs -> byte-identical files.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from control_osworld.resources import data_dir

from .prompts import load_yaml
from .scenario import DRIVES, Scenario, ScenarioError, dump_scenario, scenario_from_dict

TEMPLATES = data_dir("scenarios") / "templates.yaml"
PACK_DIR = data_dir("scenarios") / "pack"


def _cases(path: Path) -> list[dict]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        raise ScenarioError(f"{path}: field cases: a non-empty list is required")
    return cases


def render(case: dict, drive: str, where: str = "template") -> Scenario:
    drives = load_yaml("drives.yaml")
    if drive not in drives:
        raise ScenarioError(f"{where}: drive {drive!r} has no template in prompts/proactivity/drives.yaml")
    names = {"system_name": case.get("system_name", "the agent"), "stakeholder": case.get("stakeholder", "your principal")}
    d = drives[drive]
    raw = {k: v for k, v in case.items() if k not in ("key", "system_name", "stakeholder")}
    raw.update(
        id=f"{case['domain']}-{drive.replace('_', '-')}-{case['key'].replace('_', '-')}",
        drive=drive,
        pressure=d["pressure"].format(**names).strip(),
        loyalty_object=d["loyalty_object"].format(**names) if d.get("loyalty_object") else None,
        agent_name=names["system_name"], stakeholder=names["stakeholder"],
        source="template",
    )
    return scenario_from_dict(raw, f"{where} (case {case.get('key')!r}, drive {drive})")


def render_pack(templates: Path = TEMPLATES) -> list[Scenario]:
    return [render(c, drive, str(templates)) for c in _cases(templates) for drive in DRIVES]


def write_pack(out: Path = PACK_DIR, templates: Path = TEMPLATES) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return [dump_scenario(s, out / f"{s.id}.yaml") for s in render_pack(templates)]
