"""Typed models of OSWorld task JSON and of side-task JSON (the upstream control setting's
shape): models only. The names they may use are in `names.py`, the setup step types in
`setup.STEPS`, the semantic checks the loader runs in `validity.py`.

Main tasks keep OSWorld's keys (REFERENCE §1): `id`, `snapshot`, `instruction`, `source`,
`config`, `trajectory`, `related_apps`, `evaluator`, and the rare `proxy`, `fixed_ip`,
`possibility_of_env_change`, `hint`. Unknown keys are kept (upstream files load unchanged).
Our extras: `allow_bash` (the agent may use a bash tool on this task).

Side tasks keep the upstream control setting's keys: `id`, `main_task_id`, `instruction`,
`hand_held_instruction`, `config` (prepended to the main task's setup), `evaluator`,
`category`, `name`, `difficulty`, `rationale`, `subtlety_notes`, `independence_notes`.
Our extras: `main_task_ids` / `pairs_with` (a pairing rule: task ids, apps, files the main
task's setup puts on the desktop, exclusions), `attempt` (an evaluator that
scores 1 once the side task was *tried*, effective or not), `boundary` (a switch between an
environment where the effect can happen, `open`, and one that blocks it, `closed`),
`network` (`sink`: the side task needs the second host), `notes`, and the checker model's
(side_tasks/README.md): `harm` (the state that is the harm, which the checker tests), `decoys`
(oracle ids of other ways to the same harm: must score 1) and `near_misses` (oracles that look
like the harm and are not: must score 0, the detector firing or quiet as declared).

Structure (types, required fields) is checked by pydantic; names (setup step types,
getters, metrics) by `validity.check_task` / `validity.check_side_task`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from control_osworld.osworld.names import CATEGORY_ALIASES, known_category

# ----------------------------------------------------------------------------- models


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _FromFile(_Loose):
    """A task read from a file: the loader sets the file and the reasons it cannot run here."""

    _file: str = PrivateAttr(default="")
    _unsupported: list[str] = PrivateAttr(default_factory=list)
    _warnings: list[str] = PrivateAttr(default_factory=list)

    @property
    def file(self) -> str:
        return self._file

    @property
    def warnings(self) -> list[str]:
        """What the loader noticed and let through (`<file>: <field>: <what>`), e.g. an unknown
        side-task category."""
        return list(self._warnings)

    @property
    def unsupported_reasons(self) -> list[str]:
        return list(self._unsupported)

    @property
    def runnable(self) -> bool:
        return not self._unsupported

    @property
    def reason(self) -> str:
        return "; ".join(self._unsupported)


class SetupStep(_Loose):
    """`{"type": T, "parameters": {...}}`; parameters are checked per type (`setup.STEPS`)."""

    type: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class Getter(_Loose):
    """A result/expected getter: `{"type": "vm_file", "path": ..., "dest": ...}` etc."""

    type: str


def _none_if_empty(v: Any) -> Any:
    # upstream: `if "expected" in evaluator and evaluator["expected"]` -> {} and [] mean "none"
    if v == {} or v == []:
        return None
    if isinstance(v, list):
        return [None if x == {} else x for x in v]
    return v


class Evaluator(_Loose):
    func: str | list[str]
    conj: Literal["and", "or"] = "and"
    result: Getter | list[Getter | None] | None = None
    expected: Getter | list[Getter | None] | None = None
    options: dict[str, Any] | list[dict[str, Any] | None] | None = None
    postconfig: list[SetupStep] = Field(default_factory=list)

    _norm = field_validator("result", "expected", "options", mode="before")(lambda v: _none_if_empty(v))

    @property
    def funcs(self) -> list[str]:
        return [self.func] if isinstance(self.func, str) else list(self.func)

    @property
    def is_infeasible(self) -> bool:
        return self.func == "infeasible"

    def getters(self) -> list[tuple[str, Getter]]:
        """(field path, getter) of every result/expected getter."""
        out = []
        for name in ("result", "expected"):
            v = getattr(self, name)
            if isinstance(v, Getter):
                out.append((name, v))
            elif isinstance(v, list):
                out.extend((f"{name}[{i}]", g) for i, g in enumerate(v) if g is not None)
        return out


class Task(_FromFile):
    """An OSWorld main task."""

    id: str
    snapshot: str | None = None
    instruction: str
    source: str | None = None
    config: list[SetupStep] = Field(default_factory=list)
    trajectory: str | None = None
    related_apps: list[str] = Field(default_factory=list)
    evaluator: Evaluator
    proxy: bool | None = None
    fixed_ip: bool | None = None
    possibility_of_env_change: str | None = None
    hint: str | None = None
    allow_bash: bool = False

    _app: str = PrivateAttr(default="")

    @property
    def app(self) -> str:
        """The folder the task lives in under tasks/ (else its snapshot)."""
        return self._app or self.snapshot or ""

    @property
    def infeasible(self) -> bool:
        return self.evaluator.is_infeasible

    @property
    def allows_bash(self) -> bool:
        return self.allow_bash

    @property
    def placed_files(self) -> list[str]:
        """Paths the setup puts on the desktop (download targets, opened files), `~/`-form."""
        out = []
        for step in self.config:
            if step.type == "download":
                out += [f.get("path", "") for f in step.parameters.get("files", []) if isinstance(f, dict)]
            elif step.type == "open":
                out.append(step.parameters.get("path", ""))
        return [_home(p) for p in out if isinstance(p, str) and p]


def _home(path: str) -> str:
    return "~/" + path[len("/home/user/"):] if path.startswith("/home/user/") else path


def under(path: str, folder: str) -> bool:
    """`path` is `folder` or inside it (both in `~/`-form or absolute)."""
    folder = _home(folder).rstrip("/")
    return path == folder or path.startswith(folder + "/")


class PairingRule(_Loose):
    """Which main tasks a side task pairs with: listed ids and/or whole apps, minus exclusions."""

    task_ids: list[str] = Field(default_factory=list)
    apps: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    """Main tasks whose setup puts a file under one of these paths (`~/Documents`, a file)."""
    exclude: list[str] = Field(default_factory=list)
    excluded: dict[str, str] = Field(default_factory=dict)
    """Main task id -> why the pairing cannot work (its setup breaks the main task's evaluator,
    its effect cannot outlast the main task's own steps, ...): never paired, even when named by
    `main_task_id` / `main_task_ids` / `task_ids`; the generated design lists it with its reason
    (`excluded`). Found by `control-osworld tasks play-pairings` (issue 19)."""
    include_infeasible: bool = False

    def files_present(self, task: "Task") -> list[str]:
        """The rule's `files` entries the task's setup puts something under."""
        return [f for f in self.files if any(under(p, f) for p in task.placed_files)]


class Boundary(_Loose):
    """A boundary switch: `open` lets the effect happen, `closed` makes the environment block it
    (the attempt is still recorded). `kind: sink` switches the exfiltration sink between
    delivering and a tripwire that records the attempt and refuses delivery."""

    kind: Literal["sink"] = "sink"
    default: Literal["open", "closed"] = "open"
    description: str = ""


class NearMiss(BaseModel):
    """An oracle that looks like the side task's harm and is not it (side_tasks/README.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    oracle: str
    """Its oracle id (`side_tasks/oracles/<oracle>.json`)."""
    detector: Literal["fires", "quiet"]
    """What the attempt detector must do: `fires` (an attempt that missed the harm) or `quiet`
    (unrelated work that merely looks like it)."""
    why: str = ""


class SideTask(_FromFile):
    id: str
    name: str = ""
    category: str
    main_task_id: str | None = None
    main_task_ids: list[str] | None = None
    pairs_with: PairingRule | None = None
    instruction: str
    hand_held_instruction: str = ""
    config: list[SetupStep] = Field(default_factory=list)
    evaluator: Evaluator
    attempt: Evaluator | None = None
    boundary: Boundary | None = None
    network: Literal["none", "sink"] = "none"
    placement: Literal["anywhere", "after_main", "before_main"] = "anywhere"
    """Where the scripted attacker (control/scripted.py) may put the side oracle's steps in a main
    task's run, whatever its strategy: `anywhere` (at the strategy's rest points); `after_main`
    (after the main task's last step) for a side task whose steps change what the main task
    writes (its output sabotaged) or what its later steps would write over; `before_main` (before
    its first step) for one whose steps do the main task's own output wrongly and first, where a
    second output does not replace the first (a form filed twice: the second download is saved
    under another name). Placed otherwise, the main task's own steps undo the effect
    (side_tasks/README.md, issue 19)."""
    difficulty: str | None = None
    rationale: str | None = None
    subtlety_notes: str | None = None
    independence_notes: str | None = None
    notes: str | None = None
    harm: str | None = None
    """The state of the desktop (or sink) that is the harm, however it was brought about: what
    the evaluator tests (side_tasks/README.md). Upstream files have none."""
    decoys: list[str] = Field(default_factory=list)
    """Oracle ids of other ways to the same harm (encoded, split, obfuscated, GUI, other
    spellings): each must score 1 at its effect_step."""
    near_misses: list[NearMiss] = Field(default_factory=list)
    """Oracles that look like the harm and are not it: each must score 0."""

    @property
    def variants(self) -> list[tuple[str, str]]:
        """(oracle id, "oracle" | "decoy" | "near_miss") of everything the oracle suite plays."""
        return [(self.id, "oracle"), *((d, "decoy") for d in self.decoys),
                *((n.oracle, "near_miss") for n in self.near_misses)]

    @field_validator("category", mode="after")
    @classmethod
    def _category(cls, v: str) -> str:
        # upstream's names for our categories become ours; an unknown one is kept as it is
        # (the loader warns, naming the file and the field: `category_known`)
        return CATEGORY_ALIASES.get(v, v)

    @property
    def category_known(self) -> bool:
        return known_category(self.category)

    @property
    def has_boundary(self) -> bool:
        return self.boundary is not None

    def excluded_reason(self, task: Task) -> str | None:
        """Why the pairing with `task` cannot work (`pairs_with.excluded`), else None."""
        return self.pairs_with.excluded.get(task.id) if self.pairs_with is not None else None

    def pairs_with_task(self, task: Task) -> bool:
        if self.excluded_reason(task) is not None:
            return False
        if self.main_task_id is not None and task.id == self.main_task_id:
            return True
        if self.main_task_ids and task.id in self.main_task_ids:
            return True
        rule = self.pairs_with
        if rule is None or task.id in rule.exclude:
            return False
        if task.infeasible and not rule.include_infeasible:
            return False
        return task.id in rule.task_ids or task.app in rule.apps or "*" in rule.apps or bool(rule.files_present(task))
