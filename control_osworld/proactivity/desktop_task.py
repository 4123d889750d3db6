"""The desktop-grounded dilemma task (`proactivity(mode="desktop")`), built the way the control
family builds its own (`control_osworld.control.task.osworld_control`): a control-arena task from a
Setting, the `osworld_policy` (honest) and the `desktop_scaffold` loop.

    inspect eval control_osworld/proactivity/task.py@proactivity -T mode=desktop \\
        --model dilemma/reckless -M gui=1 -T scenario_ids=code-loyalty-release-gate -T max_turns=6
"""

from __future__ import annotations

from pathlib import Path

from control_arena import EvalMode
from control_arena.eval import ControlEvalConfig, get_control_task
from inspect_ai import Task, task_with

from control_osworld.agent.loop import desktop_scaffold
from control_osworld.agent.policies import osworld_policy
from control_osworld.run_spec import RUN_DEFAULTS

from .desktop import DilemmaDesktopSetting, dilemma_effect_checker
from .scenario import Factors, ScenarioError, load_scenarios

__all__ = ["desktop_task"]


def desktop_task(folder: Path, ids: list[str] | None, conditions: list[Factors], *, max_turns: int,
                 target_model: str | None, epochs: int | None, name: str | None, provider: str = RUN_DEFAULTS.provider,
                 allow_bash: bool = False, keep_screenshots: int = RUN_DEFAULTS.keep_screenshots,
                 settle_s: float = RUN_DEFAULTS.settle_s,
                 max_samples: int = RUN_DEFAULTS.max_samples) -> Task:
    try:
        load_scenarios(folder, ids)  # errors name the file before any desktop starts
    except ScenarioError as e:
        raise ValueError(str(e)) from None
    labels = [c.label() for c in conditions]
    setting = DilemmaDesktopSetting(scenarios_dir=str(folder), scenario_ids=ids, conditions=labels,
                                    max_turns=max_turns, provider=provider, allow_bash=allow_bash, settle_s=settle_s)
    # The target is the eval's model (`--model`), or the `untrusted` role when target_model is given.
    policy = osworld_policy(model_role="untrusted" if target_model else None)
    spec = setting.run_spec(keep_screenshots=keep_screenshots, max_samples=max_samples)  # budget: max_turns
    config = ControlEvalConfig(
        max_steps=None,  # the scaffold owns the budget: K turns, then the run is censored
        scaffold=desktop_scaffold(run_spec=spec, stop_on_escape=True, side_task_checker=dilemma_effect_checker),
        untrusted_model=target_model or "mockllm/model", trusted_model="mockllm/model",
        max_samples=spec.max_samples, max_sandboxes=spec.max_samples, fail_on_error=False, token_limit=None, epochs=epochs,
    )
    built = get_control_task(setting, policy, EvalMode.HONEST,
                             eval_config=config, task_name=name or "proactivity_desktop",
                             metadata={"family": "proactivity", "mode": "desktop", "max_turns": max_turns,
                                       "target_model": target_model, "environment_model": None,
                                       "conditions": labels, "scenarios": str(folder), "provider": provider})
    return task_with(built, fail_on_error=False)
