"""The tasks and side tasks of one pair of folders, with what the control loop needs of them:
samples' tasks by id, their pairings, setup, evaluation, per-step checkers and oracles.

One `Catalogue` per (tasks dir, side-tasks dir), cached: the setting, the setup solver, the
scorer and the scripted model all ask for the same one by the dirs in the sample's metadata.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from control_osworld.osworld.loader import load_side_tasks, load_tasks, pairings
from control_osworld.osworld.schema import SideTask, Task
from control_osworld.resources import data_dir

log = logging.getLogger(__name__)
DEFAULT_TASKS = data_dir("tasks")
DEFAULT_SIDE_TASKS = data_dir("side_tasks")


class Catalogue:
    def __init__(self, tasks_dir: Path, side_tasks_dir: Path):
        self.tasks_dir = Path(tasks_dir)
        self.side_tasks_dir = Path(side_tasks_dir)
        tasks = load_tasks(self.tasks_dir)
        sides = load_side_tasks(self.side_tasks_dir) if self.side_tasks_dir.is_dir() else []
        for e in [*getattr(tasks, "errors", []), *getattr(sides, "errors", [])]:
            log.warning("skipped: %s", e)
        self.errors = [*getattr(tasks, "errors", []), *getattr(sides, "errors", [])]
        self.warnings: list[str] = [*getattr(tasks, "warnings", []), *getattr(sides, "warnings", [])]
        for w in self.warnings:
            log.warning("%s", w)
        self._tasks: dict[str, Task] = {t.id: t for t in tasks}
        self._sides: dict[str, SideTask] = {s.id: s for s in sides}

    @classmethod
    def load(cls, tasks_dir: str | Path | None = None, side_tasks_dir: str | Path | None = None) -> "Catalogue":
        return _cached(str(Path(tasks_dir or DEFAULT_TASKS).resolve()),
                       str(Path(side_tasks_dir or DEFAULT_SIDE_TASKS).resolve()))

    @classmethod
    def for_sample(cls, extra: Mapping[str, Any]) -> "Catalogue":  # contracts.SampleMetadata
        return cls.load(extra.get("tasks_dir"), extra.get("side_tasks_dir"))

    # ------------------------------------------------------------ selection
    def main(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise KeyError(f"no main task {task_id!r} in {self.tasks_dir}") from None

    def side(self, side_id: str) -> SideTask:
        try:
            return self._sides[side_id]
        except KeyError:
            raise KeyError(f"no side task {side_id!r} in {self.side_tasks_dir}") from None

    def all_main_tasks(self) -> list[Task]:
        return list(self._tasks.values())

    def all_side_tasks(self) -> list[SideTask]:
        return list(self._sides.values())

    def runnable_main_tasks(self, ids: Iterable[str] | None = None, apps: Iterable[str] | None = None) -> list[Task]:
        ids = set(ids) if ids else None
        apps = set(apps) if apps else None
        out = []
        for t in self._tasks.values():
            if ids is not None and t.id not in ids:
                continue
            if apps is not None and t.app not in apps:
                continue
            if not t.runnable:
                log.warning("skipping main task %s (%s): %s", t.id, t.file, t.reason)
                continue
            out.append(t)
        if ids is not None and (missing := ids - set(self._tasks)):
            raise KeyError(f"no main task(s) {', '.join(sorted(missing))} in {self.tasks_dir}")
        return sorted(out, key=lambda t: t.id)

    def pairings(self, mains: list[Task], side_ids: Iterable[str] | None = None,
                 design: str | Path | None = None) -> list[tuple[Task, SideTask]]:
        """(main, side) pairs over `mains`: from the side tasks' rules, or from the pairings file
        `design` (checked first; a ConfigError names the file and the entry), in the rules'
        order (side task id, then main task id)."""
        if design is not None:
            return self._design_pairings(mains, side_ids, Path(design))
        from control_osworld.osworld.names import ON_REQUEST_CATEGORIES

        wanted = set(side_ids) if side_ids is not None else None
        sides = [s for s in self._sides.values()
                 if (s.id in wanted if wanted is not None else s.category not in ON_REQUEST_CATEGORIES)]
        return pairings(mains, sorted(sides, key=lambda s: s.id))

    def _design_pairings(self, mains: list[Task], side_ids: Iterable[str] | None, path: Path):
        from control_osworld.config_file import ConfigError
        from control_osworld.osworld.design import (
            check_or_raise,
            load_design,
            ordered_pairs,
            shown_path,
        )

        shown = shown_path(path)
        d = load_design(path)
        check_or_raise(d, shown, self._tasks.values(), self._sides.values())
        keep = {t.id for t in mains}
        wanted = set(side_ids) if side_ids is not None else None
        if wanted is not None and (absent := wanted - {p.side for p in d.pairings}):
            raise ConfigError(f"{shown}: side task(s) {', '.join(sorted(absent))} are in no pairing of this design "
                              f"(regenerate it: control-osworld tasks pairings --generate --category ...; "
                              f"or run without a pairings file)")
        return [(self._tasks[p.main], self._sides[p.side]) for p in ordered_pairs(d)
                if p.main in keep and (wanted is None or p.side in wanted)]

    # ------------------------------------------------------------ on the desktop
    async def setup(self, env, item: Task | SideTask, boundary: str | None = None) -> None:
        from control_osworld.osworld.setup import run_steps

        h = env.handle
        await run_steps(env.client, item.config, file=item.file, screen=(h.screen_width, h.screen_height))
        if isinstance(item, SideTask) and item.has_boundary:
            sink = self.sink(env)
            if sink is not None:
                await sink.aset_mode(boundary or item.boundary.default)  # type: ignore[union-attr]  # has_boundary

    def sink(self, env):
        from control_osworld.osworld.sink import Sink

        return Sink.for_handle(env.handle)

    async def evaluate_main(self, env, task: Task, last_action: str | None):
        """The main task's evaluator (postconfig on): an `EvalResult` (score None when unknown)."""
        from control_osworld.osworld.evaluators.engine import evaluate_detailed

        return await evaluate_detailed(env.client, task.evaluator, last_action, postconfig=True, sink=self.sink(env))

    async def evaluate_side(self, env, side: SideTask, boundary: str | None = None, baseline: dict | None = None):
        """The side task's full check (postconfig on) against the checker's baselines (taken
        after setup): an `EvalResult` (score None when unknown)."""
        from control_osworld.osworld.evaluators.engine import evaluate_detailed

        return await evaluate_detailed(env.client, side.evaluator, None, postconfig=True, sink=self.sink(env),
                                       baseline=baseline)

    def checker(self, env, side: SideTask, boundary: str | None = None):
        """The per-step checker bound to this desktop: `await checker.check(step)`."""
        from control_osworld.osworld.checker import SideTaskChecker

        return SideTaskChecker(side, sink=self.sink(env), boundary=boundary).bind(env.client)

    # ------------------------------------------------------------ oracles
    def oracle(self, task_id: str) -> dict[str, Any]:
        from control_osworld.osworld.oracle import load_oracle, oracle_path

        return load_oracle(oracle_path(task_id, root=self.tasks_dir)).model_dump()

    def side_oracle(self, side_id: str) -> dict[str, Any]:
        from control_osworld.osworld.oracle import load_oracle, oracle_path

        return load_oracle(oracle_path(side_id, side=True, root=self.side_tasks_dir)).model_dump()


@lru_cache(maxsize=8)
def _cached(tasks_dir: str, side_tasks_dir: str) -> Catalogue:
    return Catalogue(Path(tasks_dir), Path(side_tasks_dir))
