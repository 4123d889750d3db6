"""`inspect eval` entry point of the dilemma family (toxic proactivity, toxic-proactivity paper).

    inspect eval control_osworld/proactivity/task.py@proactivity --model dilemma/balanced
    inspect eval control_osworld/proactivity/task.py@proactivity --model openai/gpt-4o \
        --model-role environment=anthropic/claude-sonnet-4-5 -T max_turns=15 \
        -T conditions="baseline;goal=implicit;ethics=utilitarian"

One sample per scenario x factor condition; the eval's model is the target (or the `target`
role), the `environment` role resolves its tool calls (default: the offline dilemma/environment).
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset

from control_osworld.proactivity.samples import dilemma_samples, dilemma_scorer, parse_conditions
from control_osworld.proactivity.scenario import ScenarioError, load_scenarios
from control_osworld.proactivity.simulate import dilemma_simulation
from control_osworld.proactivity.templates import PACK_DIR
from control_osworld.run_spec import RUN_DEFAULTS

__all__ = ["proactivity", "parse_conditions", "dilemma_samples", "dilemma_scorer"]


@task
def proactivity(
    scenarios: str | None = None,
    scenario_ids: str | list[str] | None = None,
    conditions: str | list[str] | None = None,
    max_turns: int = RUN_DEFAULTS.max_turns,
    mode: str = "text",
    target_model: str | None = None,
    environment_model: str | None = None,
    epochs: int | None = None,
    name: str | None = None,
    provider: str = RUN_DEFAULTS.provider,
    allow_bash: bool = False,
    keep_screenshots: int = RUN_DEFAULTS.keep_screenshots,
    settle_s: float = RUN_DEFAULTS.settle_s,
    max_samples: int = RUN_DEFAULTS.max_samples,
) -> Task:
    """Dilemma scenarios as an inspect Task: `mode=text` (the toxic-proactivity paper's simulation: an environment
    model resolves the calls) or `mode=desktop` (the scenario grounded in a real desktop: the
    tools have real effects, the computer tool is there too, and the trusted checker records
    the step of each harmful effect; `provider`, `allow_bash`, `keep_screenshots`, `settle_s`,
    `max_samples` apply to it only)."""
    if mode not in ("text", "desktop"):
        raise ValueError(f"mode {mode!r}: one of 'text', 'desktop'")
    folder = Path(scenarios).resolve() if scenarios else PACK_DIR
    ids = scenario_ids.split(",") if isinstance(scenario_ids, str) else scenario_ids
    if mode == "desktop":
        from control_osworld.proactivity.desktop_task import desktop_task

        return desktop_task(folder, ids, parse_conditions(conditions), max_turns=max_turns, target_model=target_model,
                            epochs=epochs, name=name, provider=provider, allow_bash=allow_bash,
                            keep_screenshots=keep_screenshots, settle_s=settle_s, max_samples=max_samples)
    try:
        scs = load_scenarios(folder, ids)
    except ScenarioError as e:
        raise ValueError(str(e)) from None
    conds = parse_conditions(conditions)
    return Task(
        dataset=MemoryDataset(dilemma_samples(scs, conds, max_turns, mode), name="proactivity"),
        solver=dilemma_simulation(max_turns=max_turns),
        model_roles={k: v for k, v in (("target", target_model), ("environment", environment_model)) if v} or None,
        scorer=dilemma_scorer(), epochs=epochs, name=name or "proactivity",
        metadata={"family": "proactivity", "mode": mode, "max_turns": max_turns, "target_model": target_model,
                  "environment_model": environment_model or "dilemma/environment",
                  "conditions": [c.label() for c in conds], "scenarios": str(folder)},
    )
