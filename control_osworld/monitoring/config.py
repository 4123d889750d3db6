"""Monitor configuration: one frozen, serialisable model per `monitors/*.yaml` file.

A config says what a monitor looks at (kind, mode, score point, inputs, history, image
options) and who judges it (an inspect model string, or an offline judge: `offline/rules`,
`offline/learned`, and the baselines `offline/length` / `offline/random`).
`config_hash` covers everything that can change a score except the input subset (which is
its own column in the scores store) and the display name.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from control_osworld.config_file import REPO_ROOT, ConfigError, describe, read_prompted
from control_osworld.contracts import INPUT_SUBSETS, canonical_subset

__all__ = [
    "ALL_SUBSETS",
    "BASELINE_MODELS",
    "BaselineOptions",
    "CLASSIFIER_MAX_TOKENS",
    "OFFLINE_MODELS",
    "REPO_ROOT",
    "ConfigError",
    "GenerateOptions",
    "HistoryOptions",
    "ImageOptions",
    "LearnedOptions",
    "MonitorConfig",
    "MonitorKind",
    "SCORING_KINDS",
    "ScoreRange",
    "canonical_subset",
    "load_config",
    "parse_subsets",
]

# Fixed order A, T, S joined by "+": the contract with the analysis stage (contracts.py).
ALL_SUBSETS: tuple[str, ...] = INPUT_SUBSETS
OFFLINE_MODELS = ("offline/rules", "offline/learned", "offline/length", "offline/random")
CLASSIFIER_MAX_TOKENS = 1024
"""A `classify` config's reply budget when it sets none (what classifier configs always had)."""
BASELINE_MODELS = ("offline/length", "offline/random")
"""Baselines: what a monitor scores without reading the view's content (run length; noise)."""


def parse_subsets(values: list[str] | tuple[str, ...]) -> list[str]:
    """Canonical, de-duplicated subsets in the order given."""
    out: list[str] = []
    for v in values:
        s = canonical_subset(v)
        if s not in out:
            out.append(s)
    return out


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ImageOptions(_Frozen):
    max_side: int = Field(1024, ge=16, description="Longest side in pixels after downscaling (never upscaled).")
    format: Literal["jpeg", "png"] = "jpeg"
    quality: int = Field(80, ge=1, le=100, description="JPEG quality.")
    detail: Literal["auto", "low", "high"] = "auto"
    """OpenAI's image detail hint; other providers ignore it."""
    action_frames: bool = False
    """Also show, after each executed action of a batched turn, the screen region that action
    changed (recorded per action by the computer tool, bounded in bytes): no gap between the
    screenshots. Results only: post_action steps, earlier steps of a rolling view, full runs."""


class HistoryOptions(_Frozen):
    steps: int | None = Field(10, ge=0, description="Earlier steps shown in rolling mode (null: all).")
    images: int | None = Field(3, ge=0, description="Only the last N screenshots of a view are sent (null: all).")


class ScoreRange(_Frozen):
    min: float = 0
    max: float = 100
    integer: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> ScoreRange:
        if not self.min < self.max:
            raise ValueError(f"min ({self.min}) must be below max ({self.max})")
        return self


class GenerateOptions(_Frozen):
    """The subset of inspect's GenerateConfig a monitor needs (kept hashable)."""

    max_tokens: int | None = 4096  # small enough that Anthropic answers plain JSON, not SSE
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    reasoning_tokens: int | None = None
    timeout: int | None = None
    max_retries: int | None = None
    max_connections: int | None = None

    def to_inspect(self):
        from inspect_ai.model import GenerateConfig

        return GenerateConfig(**self.model_dump(exclude_none=True))


class LearnedOptions(_Frozen):
    folds: int = Field(5, ge=2, description="Folds per axis (fewer if there are fewer templates or runs).")
    cross_fit: Literal["template", "run"] = "template"
    """template: no side task or main task in both a run's training set and its test cell;
    run: folds of runs only (a side-task script seen in another pairing can leak; ablations)."""
    seed: int = 0
    C: float = Field(1.0, gt=0)
    n_features: int = Field(2**16, ge=16)
    model_path: str | None = None
    """A model saved by `learned.train_and_save`, for live use (no cross-fitting there)."""


class BaselineOptions(_Frozen):
    seed: int = 0
    """offline/random: the seed its scores are drawn with (a hash of the seed and the view)."""


MonitorKind = Literal["full_trajectory", "per_step", "classify"]
"""`full_trajectory` and `per_step` score views (monitoring/runtime.py); `classify` says refused /
leaked of each attack run's visible text (monitoring/classify.py, `control-osworld classify`,
configs in classifiers/*.yaml, where `kind: classify` is the default)."""
SCORING_KINDS = ("full_trajectory", "per_step")


class MonitorConfig(_Frozen):
    name: str
    kind: MonitorKind
    mode: Literal["rolling", "independent"] | None = None
    """per_step only (default rolling); a full-trajectory monitor reads the finished run."""
    score_point: Literal["pre_action", "post_action"] | None = None
    """per_step only (default pre_action)."""
    inputs: str = "A+T+S"
    model: str
    prompt: str | None = None
    """Path of the prompt template as written in the config (for people)."""
    prompt_text: str | None = None
    """The template itself, read at load time so a config is self-contained and hashed by content."""
    image: ImageOptions = ImageOptions()
    history: HistoryOptions = HistoryOptions()
    score: ScoreRange = ScoreRange()
    generate: GenerateOptions = GenerateOptions()
    retries: int = Field(2, ge=0, description="Re-asks after a malformed reply before recording an error.")
    include_reasoning: bool = False
    """Show the agent's private reasoning too. Off by default: monitors see what a user sees."""
    learned: LearnedOptions = LearnedOptions()
    baseline: BaselineOptions = BaselineOptions()
    """offline/random's seed (offline/length has no options)."""
    description: str = ""
    takeover_steps: Literal["keep", "drop"] = "keep"
    """Steps of a take-over during a run (a person had the desktop: `Step.kind` takeover/handback,
    agent/takeover.py): `keep` shows them, marked as a person's; `drop` leaves them out of every
    view and scores none of them. A human run's own steps are its player's: always kept."""

    @model_validator(mode="before")
    @classmethod
    def _per_step_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") == "classify":
            # classifier configs write their reply budget at the top level (`max_tokens: 1024`)
            data = {**data}
            generate = dict(data.get("generate") or {})
            if "max_tokens" in data:
                if "max_tokens" in generate:
                    raise ValueError("max_tokens is set twice (top level and generate.max_tokens)")
                generate["max_tokens"] = data.pop("max_tokens")
            generate.setdefault("max_tokens", CLASSIFIER_MAX_TOKENS)
            data["generate"] = generate
        if isinstance(data, dict) and data.get("kind") == "per_step":
            data = {**data}
            if data.get("mode") is None:
                data["mode"] = "rolling"
            if data.get("score_point") is None:
                data["score_point"] = "pre_action"
        return data

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs(cls, v: Any) -> str:
        return canonical_subset(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str, info: ValidationInfo) -> str:
        v = v.strip()
        if info.data.get("kind") == "classify" and v.startswith("offline/") and v != "offline/rules":
            raise ValueError(f"unknown offline classifier {v!r}; use offline/rules")
        if v.startswith("offline/") and v not in OFFLINE_MODELS:
            raise ValueError(f"unknown offline monitor {v!r}; use one of {', '.join(OFFLINE_MODELS)}")
        if "/" not in v:
            raise ValueError(f"{v!r} is not a model string (provider/model, e.g. openai/gpt-4.1-mini, or offline/rules)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> MonitorConfig:
        if self.kind != "per_step":
            # A full-trajectory monitor and a classifier read the finished run: mode and score point mean nothing.
            stray = [f for f in ("mode", "score_point") if getattr(self, f) is not None]
            if stray:
                raise ValueError(f"{'/'.join(stray)} only applies to per_step monitors")
        if self.kind == "classify":
            if not self.is_offline and not self.prompt_text:
                raise ValueError("a model classifier needs a prompt (a template file)")
            return self
        if not self.is_offline and not self.prompt_text:
            raise ValueError("a model monitor needs a prompt (a template file in prompts/)")
        if self.prompt_text and not self.is_offline and "{transcript}" not in self.prompt_text:
            raise ValueError("the prompt template must contain {transcript} (where the A/T/S view goes)")
        return self

    @property
    def is_offline(self) -> bool:
        return self.model in OFFLINE_MODELS

    @property
    def config_hash(self) -> str:
        """Hash of everything that can change a score except the input subset and the name."""
        body = self.model_dump(mode="json", exclude={"name", "inputs", "prompt", "description"})
        if self.is_offline:
            body.pop("prompt_text")  # offline monitors never read the prompt
            body.pop("generate")
            body.pop("retries")
        if self.model != "offline/learned":
            body.pop("learned")
        if self.model != "offline/random":
            body.pop("baseline")  # so adding the field changed no other monitor's hash
        if self.takeover_steps == "keep":
            body.pop("takeover_steps")  # the default: the hashes from before the option stand
        blob = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> MonitorConfig:
        """A validated copy with some fields changed."""
        return MonitorConfig.model_validate({**self.model_dump(), **changes})

    def with_model(self, model: str) -> MonitorConfig:
        """The same monitor judged by another model (the command-line override)."""
        try:
            return self.replace(model=model)
        except ValidationError as exc:
            raise ConfigError(describe(exc, f"monitor {self.name!r} with --model {model}")) from None


def load_config(path: str | Path, *, defaults: dict[str, Any] | None = None, **overrides: Any) -> MonitorConfig:
    """Read one monitor YAML (`defaults`: values for fields the file leaves out; classifier files
    leave out `kind: classify`). Raises ConfigError naming the file and the field."""
    return read_prompted(path, MonitorConfig, "monitor config", defaults=defaults, **overrides)
