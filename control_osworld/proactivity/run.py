"""`control-osworld run CONFIG` for a config with `family: proactivity`: every target model x
the scenarios x the factor conditions, through `inspect_ai.eval_set` (resumable), then the
dilemma runs table and the report (control_osworld.proactivity.report)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from control_osworld.config_file import read_config
from control_osworld.desktop.provider import ProviderName
from control_osworld.run_spec import RUN_DEFAULTS


class TargetPairing(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    target_model: str
    model_args: dict[str, Any] = Field(default_factory=dict)
    environment_model: str | None = None
    """Overrides the config's environment model for this target."""


class DilemmaRunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    family: Literal["proactivity"]
    log_dir: str = "logs/proactivity"
    scenarios: str | None = None
    """Scenario folder (default: the bundled scenarios/pack); relative to the config file."""
    scenario_ids: list[str] | None = None
    mode: Literal["text", "desktop"] = "text"
    """`text`: the toxic-proactivity paper's simulation; `desktop`: grounded in a real desktop (control_osworld/proactivity/desktop.py)."""
    provider: ProviderName = RUN_DEFAULTS.provider
    """Desktop provider (mode desktop): local | docker | k8s (remote desktops cannot keep the checker trusted)."""
    allow_bash: bool = False
    """Mode desktop: offer inspect's bash tool too."""
    max_turns: int = Field(RUN_DEFAULTS.max_turns, ge=1)
    environment_model: str = "dilemma/environment"
    environment_args: dict[str, Any] = Field(default_factory=dict)
    pairings: list[TargetPairing] = Field(min_length=1)
    conditions: list[str] = Field(default_factory=lambda: ["baseline"])
    epochs: int = Field(1, ge=1)
    max_samples: int = Field(8, ge=1)
    retry_attempts: int = 2
    report: bool = True
    resamples: int = Field(2000, ge=1)
    seed: int = 0

    @field_validator("conditions")
    @classmethod
    def _conditions(cls, v: list[str]) -> list[str]:
        from control_osworld.proactivity.task import parse_conditions

        parse_conditions(v)
        return v

    @classmethod
    def load(cls, path: str | Path) -> "DilemmaRunConfig":
        """Raises ConfigError naming the file and the field."""
        return read_config(path, cls, paths=("scenarios",))


def build_tasks(cfg: DilemmaRunConfig) -> list:
    from inspect_ai.model import get_model

    from control_osworld.proactivity.task import proactivity

    tasks = []
    for p in cfg.pairings:
        env = get_model(p.environment_model or cfg.environment_model, **cfg.environment_args) if cfg.mode == "text" else None
        slug = p.target_model.replace("/", "-")
        t = proactivity(scenarios=cfg.scenarios, scenario_ids=cfg.scenario_ids, conditions=cfg.conditions,
                        max_turns=cfg.max_turns, mode=cfg.mode, name=f"proactivity_{slug}", provider=cfg.provider,
                        allow_bash=cfg.allow_bash, max_samples=cfg.max_samples)
        t.model = get_model(p.target_model, **p.model_args)
        if env is not None:
            t.model_roles = {"environment": env}
        t.metadata = {**(t.metadata or {}), "target_model": p.target_model,
                      "environment_model": (p.environment_model or cfg.environment_model) if cfg.mode == "text" else None}
        tasks.append(t)
    return tasks


def run(config_path: str | Path, *, log_dir: str | None = None, skip_agents: bool = False) -> int:
    from inspect_ai import eval_set

    from control_osworld.proactivity.report import build_proactivity_report
    from control_osworld.proactivity.runs import load_dilemma_runs

    cfg = DilemmaRunConfig.load(config_path)
    out = Path(log_dir or cfg.log_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not skip_agents:
        tasks = build_tasks(cfg)
        print(f"[run] {len(tasks)} dilemma tasks ({', '.join(t.name for t in tasks)}) -> {out}", file=sys.stderr)
        ok, _ = eval_set(tasks, log_dir=str(out), retry_attempts=cfg.retry_attempts, max_tasks=2,
                         max_samples=cfg.max_samples, epochs=cfg.epochs, fail_on_error=False, retry_on_error=1,
                         log_dir_allow_dirty=True)
        if not ok:
            print("[run] some samples still errored after retries; they are kept apart as `error`", file=sys.stderr)
    runs = load_dilemma_runs([out])
    runs.to_parquet(out / "dilemma_runs.parquet")
    print(f"[run] dilemma runs table {out / 'dilemma_runs.parquet'}: {len(runs)} runs; classes "
          f"{runs['cls'].value_counts().to_dict()}", file=sys.stderr)
    if cfg.report:
        build_proactivity_report(runs, out / "report" / "proactivity", n_resamples=cfg.resamples, seed=cfg.seed)
        print(f"[run] report in {out / 'report' / 'proactivity'}", file=sys.stderr)
    return 0
