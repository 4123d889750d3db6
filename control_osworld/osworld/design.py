"""Pairings as data: the design file (`side_tasks/pairings.yaml`) that says which main task
runs with which side task, and why the pair is plausible.

`generate` writes one from the side tasks' pairing rules (`main_task_id`, `main_task_ids`,
`pairs_with`: task ids, apps, files the main task's setup puts on the desktop, exclusions),
the categories asked for (the on-request ones, attacks on the harness, only when named) and
optionally a cap per side task (`per_side`), spread so every main task gets a pairing where it
can. `check` names every problem with the file and the entry: unknown or unrunnable ids,
duplicates, and balance (every side task in at least `k` pairings, every runnable main task in
at least one, unless listed under `unpaired_sides` / `unpaired_mains` with a reason).
`ordered_pairs` gives the samples' order the rules give (side task id, then main task id), so
a design equal to the rules' pairings runs the same samples in the same order with the same
seeds.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import yaml
from pydantic import BaseModel, ConfigDict, Field

from control_osworld.config_file import ConfigError, read_mapping, validate
from control_osworld.osworld.loader import REPO, pairings, side_task_blockers
from control_osworld.osworld.names import ON_REQUEST_CATEGORIES
from control_osworld.osworld.schema import SideTask, Task

__all__ = ["DEFAULT_FILE", "Design", "Pair", "Unpaired", "check", "design_summary", "generate", "load_design",
           "ordered_pairs", "pair_reason", "resolve_path", "shown_path", "write_design"]

DEFAULT_FILE = REPO / "side_tasks" / "pairings.yaml"


class Pair(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    main: str
    side: str
    reason: str = ""
    """Why the pair is plausible: the rule that made it, in words a reviewer can check."""


class Unpaired(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    reason: str = ""


class Design(BaseModel):
    """A pairings file. `k`: every side task (not under `unpaired_sides`) is in at least k
    pairings; every runnable main task (not under `unpaired_mains`) in at least one."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    design: str = "default"
    k: int = Field(default=1, ge=1)
    per_side: int | None = Field(default=None, ge=1)
    """How it was generated: at most this many main tasks per side task (None: every one the
    rules allow), more only where a main task would otherwise be in no pairing."""
    description: str = ""
    pairings: list[Pair] = Field(default_factory=list)
    unpaired_mains: list[Unpaired] = Field(default_factory=list)
    unpaired_sides: list[Unpaired] = Field(default_factory=list)
    excluded: list[Pair] = Field(default_factory=list)
    """Pairs a side task's rule names but excludes (`pairs_with.excluded`), with why the pairing
    cannot work: never in `pairings`."""


def load_design(path: str | Path) -> Design:
    """Raises ConfigError naming the file and the field."""
    p = Path(path)
    try:
        stamp = p.stat().st_mtime_ns
    except OSError:
        stamp = -1
    return _load(str(p), stamp)


@lru_cache(maxsize=16)
def _load(path: str, stamp: int) -> Design:
    return validate(Design, read_mapping(path, "pairings", empty_ok=True), path)


# ----------------------------------------------------------------------------- rules


def pair_reason(side: SideTask, task: Task) -> str:
    """The rule that pairs `side` with `task`, as a reason ("" when none does)."""
    why = []
    if side.main_task_id == task.id:
        why.append("main_task_id: the side task was written for this main task")
    if side.main_task_ids and task.id in side.main_task_ids:
        why.append("main_task_ids: listed")
    rule = side.pairs_with
    if rule is not None and side.pairs_with_task(task):
        if task.id in rule.task_ids:
            why.append("pairs_with.task_ids: listed")
        if task.app in rule.apps or "*" in rule.apps:
            why.append(f"pairs_with.apps: the main task works in the side task's app ({task.app})")
        files = rule.files_present(task)
        if files:
            why.append(f"pairs_with.files: the main task's setup puts files under {', '.join(files)}")
    if not why:
        return ""
    return f"{'; '.join(why)}; category {side.category}"


def generate(tasks: Iterable[Task], sides: Iterable[SideTask], *, k: int = 1, categories: Iterable[str] | None = None,
             per_side: int | None = None, name: str = "default") -> Design:
    """The design the rules give. `categories`: the side-task categories to pair (default: all
    but the on-request ones); `per_side`: at most this many main tasks per side task, chosen so
    that main tasks with fewer pairings come first (its own `main_task_id` always first)."""
    every = list(tasks)
    tasks = sorted((t for t in every if t.runnable), key=lambda t: t.id)
    sides = sorted(sides, key=lambda s: s.id)
    wanted = set(categories) if categories is not None else None
    pairs: list[Pair] = []
    unpaired_sides: list[Unpaired] = []
    load: Counter = Counter()
    allowed: dict[str, list[Task]] = {}
    for s in sides:
        if (s.category not in wanted) if wanted is not None else (s.category in ON_REQUEST_CATEGORIES):
            why = (f"category {s.category}: an attack on the harness, paired only when named (side_tasks)"
                   if s.category in ON_REQUEST_CATEGORIES else f"category {s.category} not asked for")
            unpaired_sides.append(Unpaired(id=s.id, reason=why))
            continue
        blockers = side_task_blockers(s, every)
        if blockers:
            unpaired_sides.append(Unpaired(id=s.id, reason="; ".join(blockers)))
            continue
        mains = [t for t, _ in pairings(tasks, [s])]
        allowed[s.id] = mains
        if per_side is not None and len(mains) > per_side:
            mains = sorted(mains, key=lambda t: (t.id != s.main_task_id, load[t.id], t.id))
            mains = sorted(mains[:per_side], key=lambda t: t.id)
        for t in mains:
            load[t.id] += 1
            pairs.append(Pair(main=t.id, side=s.id, reason=pair_reason(s, t)))
    if per_side is not None:  # the cap never leaves a main task out that a rule pairs: cover it
        per = Counter(p.side for p in pairs)
        for t in tasks:
            if t.id in load:
                continue
            cands = [sid for sid, mains in allowed.items() if any(m.id == t.id for m in mains)]
            if cands:
                sid = min(cands, key=lambda c: (per[c], c))
                per[sid] += 1
                load[t.id] += 1
                side = next(x for x in sides if x.id == sid)
                pairs.append(Pair(main=t.id, side=sid, reason=pair_reason(side, t) + f"; beyond per_side {per_side}: "
                                  "no other pairing covers this main task"))
        pairs.sort(key=lambda p: (p.side, p.main))
    excluded = [Pair(main=t.id, side=s.id, reason=f"pairs_with.excluded: {cause}")
                for s in sides if s.id in allowed for t in tasks if (cause := s.excluded_reason(t)) is not None]
    paired = {p.main for p in pairs}
    unpaired_mains = [Unpaired(id=t.id, reason=(
        "infeasible: the right answer is a safe stop; side tasks pair with feasible main tasks"
        if t.infeasible else f"no side task's rule pairs with it (app {t.app})")) for t in tasks if t.id not in paired]
    return Design(design=name, k=k, per_side=per_side, pairings=pairs, unpaired_mains=unpaired_mains, unpaired_sides=unpaired_sides,
                  excluded=excluded,
                  description="Generated by `control-osworld tasks pairings --generate` from the side tasks' pairing "
                              "rules; reviewable by hand (`control-osworld tasks pairings` checks it).")


def write_design(design: Design, path: str | Path) -> None:
    header = ("# Pairings: main task x side task, with the reason each pair is plausible.\n"
              "# Generated by `control-osworld tasks pairings --generate`; edit by hand if you like, then\n"
              "# `control-osworld tasks pairings` checks it (ids, duplicates, balance).\n")
    body = yaml.safe_dump(design.model_dump(), sort_keys=False, allow_unicode=True, width=120)
    Path(path).write_text(header + body, encoding="utf-8")


# ----------------------------------------------------------------------------- checks


def check(design: Design, where: str, tasks: Iterable[Task], sides: Iterable[SideTask]) -> list[str]:
    """Every problem of the design against these tasks, `<where>: <entry>: <problem>`."""
    by_task = {t.id: t for t in tasks}
    by_side = {s.id: s for s in sides}
    out: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    for i, p in enumerate(design.pairings):
        at = f"{where}: pairings[{i}]"
        t, s = by_task.get(p.main), by_side.get(p.side)
        if t is None:
            out.append(f"{at}.main: unknown main task {p.main!r}")
        elif not t.runnable:
            out.append(f"{at}.main: main task {p.main!r} cannot run here: {t.reason}")
        if s is None:
            out.append(f"{at}.side: unknown side task {p.side!r}")
        elif not s.runnable:
            out.append(f"{at}.side: side task {p.side!r} cannot run here: {s.reason}")
        if not p.reason.strip():
            out.append(f"{at}.reason: empty (say why the pair is plausible)")
        if s is not None and t is not None and (why := s.excluded_reason(t)) is not None:
            out.append(f"{at}: {p.main} x {p.side} is excluded by the side task's rule ({s.file}: "
                       f"pairs_with.excluded): {why}")
        key = (p.main, p.side)
        if key in seen:
            out.append(f"{at}: duplicate of pairings[{seen[key]}] ({p.main} x {p.side})")
        else:
            seen[key] = i
    per_side = Counter(p.side for p in design.pairings)
    per_main = Counter(p.main for p in design.pairings)
    for field, entries, known, paired in (("unpaired_mains", design.unpaired_mains, by_task, per_main),
                                          ("unpaired_sides", design.unpaired_sides, by_side, per_side)):
        first: dict[str, int] = {}
        for i, u in enumerate(entries):
            at = f"{where}: {field}[{i}]"
            if u.id not in known:
                out.append(f"{at}.id: unknown {'main' if field == 'unpaired_mains' else 'side'} task {u.id!r}")
            if u.id in first:
                out.append(f"{at}: duplicate of {field}[{first[u.id]}] ({u.id})")
            first.setdefault(u.id, i)
            if paired.get(u.id):
                out.append(f"{at}: {u.id} is listed as unpaired but is in {paired[u.id]} pairing(s)")
            if not u.reason.strip():
                out.append(f"{at}.reason: empty (say why it is left out)")
    excused_m = {u.id for u in design.unpaired_mains}
    excused_s = {u.id for u in design.unpaired_sides}
    for sid, s in sorted(by_side.items()):
        if s.runnable and sid not in excused_s and per_side[sid] < design.k:
            out.append(f"{where}: balance: side task {sid} is in {per_side[sid]} pairing(s), fewer than k = {design.k} "
                       f"(add pairings, or list it under unpaired_sides with a reason)")
    for tid, t in sorted(by_task.items()):
        if t.runnable and tid not in excused_m and not per_main[tid]:
            out.append(f"{where}: balance: main task {tid} is in no pairing "
                       f"(add one, or list it under unpaired_mains with a reason)")
    return out


def ordered_pairs(design: Design) -> list[Pair]:
    """The pairings in the order the rules give them (side task id, then main task id)."""
    return sorted(design.pairings, key=lambda p: (p.side, p.main))


def design_summary(design: Design) -> dict:
    """k and the counts a table header states."""
    per_side = Counter(p.side for p in design.pairings)
    per_main = Counter(p.main for p in design.pairings)
    return {"design": design.design, "k": design.k, "per_side": design.per_side, "pairings": len(design.pairings),
            "side_tasks": len(per_side), "main_tasks": len(per_main),
            "per_side_min": min(per_side.values(), default=0), "per_side_max": max(per_side.values(), default=0),
            "per_main_min": min(per_main.values(), default=0), "per_main_max": max(per_main.values(), default=0),
            "unpaired_mains": len(design.unpaired_mains), "unpaired_sides": len(design.unpaired_sides)}


def check_or_raise(design: Design, where: str, tasks: Iterable[Task], sides: Iterable[SideTask]) -> None:
    problems = check(design, where, tasks, sides)
    if problems:
        more = f" (and {len(problems) - 5} more: control-osworld tasks pairings)" if len(problems) > 5 else ""
        raise ConfigError("\n".join(problems[:5]) + more)


def shown_path(path: str | Path) -> str:
    """A design file as messages and sample metadata show it: relative to the repository when
    inside it, else as given."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


def resolve_path(path: str | Path) -> Path:
    """A pairings file named on the command line: absolute, else relative to the working
    directory, else to the repository (`inspect eval` runs a task file from its folder)."""
    p = Path(path)
    if p.is_absolute() or p.exists() or not (REPO / p).exists():
        return p.resolve()
    return (REPO / p).resolve()
