"""Scenario generation as an inspect task: `generator` and `discriminator` are model roles.

    inspect eval control_osworld/proactivity/generate.py@proactivity_generate \
        --model-role generator=anthropic/claude-sonnet-4-5 --model-role discriminator=openai/gpt-4o \
        -T out_dir=scenarios/generated
    control-osworld proactivity generate configs/proactivity-generate.yaml

One sample per domain x drive x index. Accepted scenarios are written to OUT_DIR/<id>.yaml;
every sample's audit (all drafts, scores, critiques, the abandonment reason) to
OUT_DIR/audit/<domain>-<drive>-<index>.json and into the log's store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import get_model
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, solver
from pydantic import BaseModel, ConfigDict, Field

from control_osworld.config_file import read_config
from control_osworld.proactivity.pipeline import GenerationSettings, Thresholds, generate_scenario
from control_osworld.proactivity.scenario import (
    DOMAINS,
    DRIVES,
    Factors,
    dump_scenario,
    scenario_from_dict,
)
from control_osworld.sample_store import sample_store


class GenerateConfig(BaseModel):
    """configs/proactivity-generate.yaml"""

    model_config = ConfigDict(extra="forbid", frozen=True)
    generator: str
    discriminator: str
    generator_args: dict[str, Any] = Field(default_factory=dict)
    discriminator_args: dict[str, Any] = Field(default_factory=dict)
    domains: list[str] = Field(default_factory=lambda: list(DOMAINS))
    drives: list[str] = Field(default_factory=lambda: list(DRIVES))
    per_cell: int = Field(2, ge=1)
    risk: str = "high"
    thresholds: Thresholds = Thresholds()
    max_rewrites: int = Field(4, ge=0)
    out_dir: str = "scenarios/generated"
    log_dir: str = "logs/generate"

    @classmethod
    def load(cls, path: str | Path) -> "GenerateConfig":
        """Raises ConfigError naming the file and the field."""
        return read_config(path, cls)


@solver
def scenario_pipeline(out_dir: str, settings: GenerationSettings = GenerationSettings()):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        m = state.metadata
        gen = get_model(role="generator", required=True)
        disc = get_model(role="discriminator", required=True)
        res = await generate_scenario(m["domain"], m["drive"], Factors(risk=m["risk"]), gen, disc, settings, m["index"])
        out = Path(out_dir)
        (out / "audit").mkdir(parents=True, exist_ok=True)
        (out / "audit" / f"{m['domain']}-{m['drive']}-{m['index']}.json").write_text(res.model_dump_json(indent=1))
        if res.scenario:
            sc = scenario_from_dict(res.scenario)
            dump_scenario(sc, out / f"{sc.id}.yaml")
        sample_store(state.store).proactivity_generation = res.model_dump(mode="json")
        state.completed = True
        return state
    return solve


@scorer(metrics=[mean()])
def accepted():
    async def score(state: TaskState, target: Target) -> Score:
        r = sample_store(state.store).proactivity_generation
        if r is None:
            raise RuntimeError("no generation record in the store (scenario_pipeline did not run)")
        return Score(value=float(r["status"] == "accepted"), answer=r["status"], explanation=r.get("reason") or "")
    return score


@task
def proactivity_generate(domains: str | list[str] | None = None, drives: str | list[str] | None = None, per_cell: int = 2,
                         risk: str = "high", out_dir: str = "scenarios/generated", max_rewrites: int = 4) -> Task:
    doms = domains.split(",") if isinstance(domains, str) else (domains or list(DOMAINS))
    drvs = drives.split(",") if isinstance(drives, str) else (drives or list(DRIVES))
    for d in doms:
        if d not in DOMAINS:
            raise ValueError(f"domains: unknown domain {d!r} (one of {', '.join(DOMAINS)})")
    for d in drvs:
        if d not in DRIVES:
            raise ValueError(f"drives: unknown drive {d!r} (one of {', '.join(DRIVES)})")
    Factors(risk=risk)
    samples = [Sample(id=f"{d}-{v}-{i}", input=f"{d} / {v}", metadata={"domain": d, "drive": v, "index": i, "risk": risk})
               for d in doms for v in drvs for i in range(per_cell)]
    return Task(dataset=MemoryDataset(samples, name="proactivity_generate"),
                solver=scenario_pipeline(str(Path(out_dir).resolve()), GenerationSettings(max_rewrites=max_rewrites)),
                scorer=accepted(), metadata={"family": "proactivity_generate"})


def run_generation(cfg: GenerateConfig):
    from inspect_ai import eval as inspect_eval

    t = proactivity_generate(cfg.domains, cfg.drives, cfg.per_cell, cfg.risk, cfg.out_dir, cfg.max_rewrites)
    t.solver = scenario_pipeline(str(Path(cfg.out_dir).resolve()),
                                 GenerationSettings(thresholds=cfg.thresholds, max_rewrites=cfg.max_rewrites))
    gen = get_model(cfg.generator, **cfg.generator_args)
    disc = get_model(cfg.discriminator, **cfg.discriminator_args)
    [log] = inspect_eval(t, model=gen, model_roles={"generator": gen, "discriminator": disc}, log_dir=cfg.log_dir,
                         display="none")
    return log
