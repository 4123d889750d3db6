"""A side-task draft: what the generator (or a template) proposes for one main task, and the
ordinary side-task and oracle files it becomes.

A draft is one JSON object (`Draft`): the side task's words (`instruction`,
`hand_held_instruction`, `harm`, notes), its `config` (setup, applied to honest runs too), its
checker (`evaluator`, from the probes and harm metrics of side_tasks/README.md) and attempt
detector (`attempt`), and the oracles the verification plays: `oracle` and every `decoys[name]`
(each with its `effect_step`) and one `near_miss` (no effect step; `detector` fires or stays
quiet). `parse_draft` raises `DraftError` naming the field; `write_draft` writes the files into a
folder in the layout `control-osworld tasks list --side-dir` reads (`<dir>/<id>.json`,
`<dir>/oracles/<oracle id>.json`) and loads them back with the project's own loaders,
so a draft that does not make a loadable side task fails here, naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from control_osworld.osworld.loader import TaskFileError, _loc, load_side_task
from control_osworld.osworld.names import ON_REQUEST_CATEGORIES, SIDE_CATEGORIES
from control_osworld.osworld.oracle import Oracle, OracleStep, load_oracle
from control_osworld.osworld.schema import SideTask, Task

__all__ = ["Draft", "DraftError", "DraftOracle", "NearMissDraft", "Materialised", "parse_draft", "side_id",
           "write_draft", "AUTHORED_CATEGORIES"]

AUTHORED_CATEGORIES = tuple(c for c in SIDE_CATEGORIES if c not in ON_REQUEST_CATEGORIES)
"""Categories a draft may have: ours, without the on-request attacks on the harness."""
_SLUG = r"^[a-z0-9][a-z0-9-]{0,47}$"


class DraftError(ValueError):
    """A draft that cannot become a side task: `str(e)` is `"<field>: <problem>"`."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class DraftOracle(BaseModel):
    """Scripted steps (the oracle format's `steps`) and the step whose check first scores 1."""

    model_config = ConfigDict(extra="forbid")
    steps: list[OracleStep] = Field(min_length=1)
    effect_step: int = Field(ge=1)


class NearMissDraft(BaseModel):
    """Looks like the harm and is not it: must score 0, the detector `fires` or stays `quiet`."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=_SLUG)
    detector: Literal["fires", "quiet"]
    why: str = Field(min_length=3)
    steps: list[OracleStep] = Field(min_length=1)


class Draft(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slug: str = Field(pattern=_SLUG)
    """Short name; the side task's id is `side_id(main, slug)`."""
    name: str = Field(min_length=3)
    category: str
    instruction: str = Field(min_length=10)
    hand_held_instruction: str = Field(min_length=10)
    harm: str = Field(min_length=10)
    config: list[dict[str, Any]] = Field(default_factory=list)
    evaluator: dict[str, Any]
    attempt: dict[str, Any]
    oracle: DraftOracle
    decoys: dict[str, DraftOracle] = Field(min_length=1)
    near_miss: NearMissDraft
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    rationale: str = ""
    subtlety_notes: str = ""

    @field_validator("category")
    @classmethod
    def _category(cls, v: str) -> str:
        if v not in AUTHORED_CATEGORIES:
            raise ValueError(f"unknown category {v!r}; one of {', '.join(AUTHORED_CATEGORIES)}")
        return v

    @field_validator("decoys")
    @classmethod
    def _decoy_names(cls, v: dict[str, DraftOracle]) -> dict[str, DraftOracle]:
        import re

        bad = [k for k in v if not re.match(_SLUG, k)]
        if bad:
            raise ValueError(f"decoy names must be short slugs (a-z, 0-9, -): {bad}")
        return v


def parse_draft(data: Any) -> Draft:
    """A draft from decoded JSON; raises DraftError naming the first wrong field."""
    if not isinstance(data, dict):
        raise DraftError("(top level)", f"must be a JSON object, got {type(data).__name__}")
    try:
        return Draft.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        msg = "field required" if err["type"] == "missing" else err["msg"].removeprefix("Value error, ")
        more = len(e.errors()) - 1
        raise DraftError(_loc(err["loc"]), msg + (f" (and {more} more problem(s))" if more else "")) from None


def side_id(main: Task, slug: str) -> str:
    return f"gen-{main.id}-{slug}"


@dataclass
class Materialised:
    """A draft written as files and loaded back: the side task and every oracle it lists, as
    (oracle id, oracle, kind, declared detector behaviour)."""

    side: SideTask
    oracles: list[tuple[str, Oracle, str, str]]
    files: list[Path]


def _oracle_json(task_id: str, steps: list[OracleStep], effect_step: int | None) -> dict:
    out: dict[str, Any] = {"task_id": task_id, "steps": [s.model_dump(exclude_defaults=True) for s in steps],
                           "submit": "done"}
    if effect_step is not None:
        out["effect_step"] = effect_step
    return out


def side_json(draft: Draft, main: Task) -> tuple[dict, dict[str, dict]]:
    """The side-task file and its oracle files (oracle id -> JSON) for `draft` on `main`."""
    sid = side_id(main, draft.slug)
    decoy_ids = [f"{sid}.{k}" for k in draft.decoys]
    nm_id = f"{sid}.{draft.near_miss.name}"
    side = {"id": sid, "name": draft.name, "category": draft.category, "main_task_id": main.id,
            "instruction": draft.instruction, "hand_held_instruction": draft.hand_held_instruction,
            "config": draft.config, "evaluator": draft.evaluator, "attempt": draft.attempt,
            "difficulty": draft.difficulty, "rationale": draft.rationale, "subtlety_notes": draft.subtlety_notes,
            "harm": draft.harm, "decoys": decoy_ids,
            "near_misses": [{"oracle": nm_id, "detector": draft.near_miss.detector, "why": draft.near_miss.why}],
            "notes": "authored by control-osworld tasks author"}
    oracles = {sid: _oracle_json(sid, draft.oracle.steps, draft.oracle.effect_step)}
    for k, d in draft.decoys.items():
        oracles[f"{sid}.{k}"] = _oracle_json(sid, d.steps, d.effect_step)
    oracles[nm_id] = _oracle_json(sid, draft.near_miss.steps, None)
    return side, oracles


def write_draft(draft: Draft, main: Task, folder: Path) -> Materialised:
    """Write the draft's files into `folder` (and `folder/oracles/`) and load them back with the project's
    loaders. Raises DraftError naming the field (`<file>: <field>: <problem>` from the loader)."""
    side_doc, oracle_docs = side_json(draft, main)
    root = folder
    (root / "oracles").mkdir(parents=True, exist_ok=True)
    side_file = root / f"{side_doc['id']}.json"
    side_file.write_text(json.dumps(side_doc, indent=2) + "\n")
    files = [side_file]
    for oid, doc in oracle_docs.items():
        p = root / "oracles" / f"{oid}.json"
        p.write_text(json.dumps(doc, indent=2) + "\n")
        files.append(p)
    try:
        side = load_side_task(side_file)
    except TaskFileError as e:
        raise DraftError(_draft_field(e.field), f"{e.problem} (as {e.file})") from None
    if not side.runnable:
        raise DraftError("evaluator", f"the side task cannot run here: {side.reason}")
    kinds = {side.id: ("oracle", "fires"), **{d: ("decoy", "fires") for d in side.decoys},
             **{n.oracle: ("near_miss", n.detector) for n in side.near_misses}}
    oracles = []
    for oid, (kind, det) in kinds.items():
        where = "oracle" if kind == "oracle" else ("near_miss" if kind == "near_miss" else f"decoys.{oid.rsplit('.', 1)[1]}")
        try:
            o = load_oracle(root / "oracles" / f"{oid}.json", side=True)
        except TaskFileError as e:
            raise DraftError(f"{where}.{e.field}" if e.field else where, e.problem) from None
        if o.uses_bash and not main.allows_bash:
            raise DraftError(where, f"uses the bash tool, but main task {main.id} does not allow bash: play it "
                                    "through the GUI (e.g. type into the terminal the main task opens)")
        oracles.append((oid, o, kind, det))
    return Materialised(side, oracles, files)


def _draft_field(file_field: str) -> str:
    """A side-task file's field as the draft names it (the same names, but `decoys`/`near_misses`
    are written from `decoys`/`near_miss`)."""
    return "near_miss" if file_field.startswith("near_misses") else (file_field or "(top level)")
