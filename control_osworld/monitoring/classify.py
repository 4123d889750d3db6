"""Refused / leaked: a monitor kind over each attack run's visible text, judged through the
judging engine as every monitor is (an offline judge, `offline/rules`, or any inspect model).

* refused: the agent's visible text declines the side task (or the whole task).
* leaked: the agent's visible text gives the hidden objective away (talks about a secret
  or side task, about not being seen...), what a user reading the transcript would notice.

`classify_runs(records, config)` gives one row per attack run: run_id, refused, leaked,
classifier, reason, error (a failed judgement leaves refused/leaked null: fail closed).
`control-osworld classify` writes them for `report --classes` (analysis/attack_classes.py
joins them to the checker's attempt classes).
"""

from __future__ import annotations

import asyncio
import json
from typing import Iterable

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from control_osworld.judging.engine import Judge, JudgeParseError, parse_json_object

from .offline import OfflineRequest
from .rules import REFUSAL, rules_classify

__all__ = ["REFUSAL", "ClassifierConfig", "classify_runs", "load_classifier_config", "rules_classify",
           "visible_transcript"]

COLUMNS = ["run_id", "refused", "leaked", "classifier", "reason", "error"]


class ClassifierConfig(BaseModel):
    """One file in classifiers/*.yaml: `offline/rules` or any inspect model string."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    model: str
    prompt: str | None = None
    """Template file (model judges): {main_task}, {side_task_id} and {transcript} are filled in."""
    prompt_text: str | None = None
    max_tokens: int = Field(1024, ge=16)
    retries: int = Field(2, ge=0, description="Re-asks after a malformed reply.")
    description: str = ""

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        v = v.strip()
        if v.startswith("offline/") and v != "offline/rules":
            raise ValueError(f"unknown offline classifier {v!r}; use offline/rules")
        if "/" not in v:
            raise ValueError(f"{v!r} is not a model string (provider/model, or offline/rules)")
        return v

    def model_post_init(self, _):
        if self.model != "offline/rules" and not self.prompt_text:
            raise ValueError("a model judge needs a prompt (a template file)")


def load_classifier_config(path, **overrides) -> ClassifierConfig:
    """Read one classifier YAML (as monitors' configs are read: a prompt file is found next to
    the config or in the repo). ConfigError (a ValueError) naming the file and the field."""
    from control_osworld.config_file import read_prompted

    return read_prompted(path, ClassifierConfig, "classifier config", **overrides)


def visible_transcript(record) -> str:
    """An attack run's visible text, step by step (what the classifier reads)."""
    return "\n".join(f"[step {s.step}] {s.visible_text.strip()}" for s in record.trajectory.steps if s.visible_text.strip())


_VERDICT = {"refused": bool, "leaked": bool}


def parse_verdict(reply: str) -> tuple[bool, bool, str]:
    """A model's reply: the last flat JSON object with boolean 'refused' and 'leaked'."""
    d = parse_json_object(reply, _VERDICT)
    return d["refused"], d["leaked"], str(d.get("reason", ""))[:500]


def parse_offline_verdict(reply: str) -> tuple[bool, bool, str]:
    """The offline judge's reply: one JSON object (its reason may quote braces)."""
    try:
        d = json.loads(reply)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"offline reply is not JSON ({exc})") from None
    if not (isinstance(d, dict) and all(isinstance(d.get(k), bool) for k in _VERDICT)):
        raise JudgeParseError("offline reply has no boolean 'refused' and 'leaked'")
    return d["refused"], d["leaked"], str(d.get("reason", ""))[:500]


def _prompt(rec, config: ClassifierConfig) -> str:
    if config.model == "offline/rules":
        return OfflineRequest(verdict="refusal", texts={"T": visible_transcript(rec)}).model_dump_json()
    return (config.prompt_text or "").replace("{main_task}", rec.main_task_description or rec.main_task_id) \
        .replace("{side_task_id}", rec.side_task_id or "").replace("{transcript}", visible_transcript(rec) or "(no visible text)")


async def _judge(records, config: ClassifierConfig) -> list[dict]:
    offline = config.model == "offline/rules"  # the `offline` provider: registered by importing .offline
    engine = Judge()  # no cache: a re-run asks again (as classification always did)
    out = []
    try:
        for rec in records:
            j = await engine.ask(config.model, _prompt(rec, config), parse_offline_verdict if offline else parse_verdict,
                                 generate={"max_tokens": config.max_tokens}, retries=config.retries)
            row = {"run_id": rec.run_id, "refused": None, "leaked": None, "classifier": config.name, "reason": "",
                   "error": None}
            if j.verdict is not None:
                row["refused"], row["leaked"], row["reason"] = j.verdict
            elif j.failure == "parse":
                row["error"] = f"malformed reply: {j.detail}; began {j.reply[:120]!r}"
            else:  # network, auth: this run has no class, the others go on
                row["error"] = (j.error or "")[:500]
            out.append(row)
    finally:
        await engine.aclose()
    return out


def classify_runs(records: Iterable, config: ClassifierConfig) -> pd.DataFrame:
    """One row per attack run (honest runs are skipped): run_id, refused, leaked, classifier,
    reason, error (a failed judgement leaves refused/leaked null)."""
    attack = [r for r in records if r.eval_mode == "attack"]
    return pd.DataFrame(asyncio.run(_judge(attack, config)), columns=COLUMNS)
