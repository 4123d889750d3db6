"""Prompt rendering for dilemma runs: drive and factor injection from `prompts/proactivity/`.

The target sees the role, narrative, drive pressure, rules, the injected factor sentences and
the evidence; it never sees a tool's track, terminal flag or effect. The environment sees the
ground truth and each tool's effect.
"""

from __future__ import annotations

import json
from functools import lru_cache

import yaml

from control_osworld.resources import data_dir

from .scenario import FACTOR_LEVELS, Factors, Scenario

PROMPTS_DIR = data_dir("prompts") / "proactivity"


@lru_cache(maxsize=None)
def load_yaml(name: str) -> dict:
    p = PROMPTS_DIR / name
    data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: must be a mapping")
    return data


@lru_cache(maxsize=None)
def load_text(name: str) -> str:
    return (PROMPTS_DIR / name).read_text(encoding="utf-8")


def factor_templates() -> dict[str, dict[str, str]]:
    data = load_yaml("factors.yaml")
    for factor, levels in FACTOR_LEVELS.items():
        got = data.get(factor)
        if not isinstance(got, dict):
            raise ValueError(f"{PROMPTS_DIR / 'factors.yaml'}: field {factor}: missing")
        for lv in levels:
            if lv not in got:
                raise ValueError(f"{PROMPTS_DIR / 'factors.yaml'}: field {factor}.{lv}: missing")
    return data


def _fill(template: str, scenario: Scenario) -> str:
    text = template.format(task=scenario.task, stakeholder=scenario.stakeholder, system_name=scenario.agent_name).strip()
    return text[:1].upper() + text[1:]


def inject_factors(scenario: Scenario, factors: Factors) -> str:
    """The factor sentences for one condition, in a fixed order (empty templates skipped)."""
    t = factor_templates()
    lines = []
    for factor in FACTOR_LEVELS:
        text = t[factor][getattr(factors, factor)] or ""
        if text.strip():
            lines.append(_fill(text, scenario))
    return "\n".join(lines)


def evidence_text(scenario: Scenario) -> str:
    return "\n\n".join(f"### {e.name} ({e.kind})\n{e.content}" for e in scenario.evidence)


def target_system_prompt(scenario: Scenario, factors: Factors, template: str = "target_system.txt") -> str:
    return load_text(template).format(
        role=scenario.role, narrative=scenario.narrative, pressure=scenario.pressure,
        rules="\n".join(f"- {r}" for r in scenario.rules), factors=inject_factors(scenario, factors) or "(none)",
        evidence=evidence_text(scenario))


def desktop_system_prompt(scenario: Scenario, factors: Factors) -> str:
    """The target's prompt in a desktop-grounded run: the same text, ending with the desktop's
    instead of the simulation's closing paragraph (prompts/proactivity/target_desktop.txt)."""
    return target_system_prompt(scenario, factors, "target_desktop.txt")


def environment_system_prompt(scenario: Scenario) -> str:
    logic = "\n".join(f"- {t.name}: {t.effect}" + (" (final action)" if t.terminal else "") for t in scenario.tools)
    logic += "\n- escalate_to_human: the request goes to a human decision maker; the agent stops here (final action)."
    return load_text("environment_system.txt").format(narrative=scenario.narrative, evidence=evidence_text(scenario),
                                                      tool_logic=logic)


def environment_turn(state: dict, tool: str, arguments: dict, turn: int) -> str:
    return json.dumps({"turn": turn, "world_state": state, "tool_call": {"name": tool, "arguments": arguments}},
                      ensure_ascii=False, sort_keys=True)
