"""Loading task and side-task folders.

`load_tasks("tasks")` reads `tasks/<app>/*.json` (not `tasks/oracles/` nor `tasks/assets/`),
`load_side_tasks("side_tasks")` reads `side_tasks/*.json` (not `side_tasks/oracles/`).
A file that does not validate becomes a `TaskFileError` naming the file and the field
(`tasks/calc/x.json: evaluator.func: unknown metric 'foo'`); the other files still load: the
returned list carries the errors in `.errors`. A task that is valid but needs what our
desktops lack (Chrome's debugging port, Google Drive, the live web, an app we do not ship)
loads with `runnable == False` and the reason in `.reason`.

Control OSWorld's side-task files (`examples/<domain>/side_tasks/<uuid>_side.json`) load
unchanged: every category that format uses is known (`names.known_category`); an unknown one
loads with a warning naming the file and the field (`.warnings` of the item and of the list).
Main-task folders skip `side_tasks/` sub-folders, so upstream's examples folder loads as main
tasks. `side_task_blockers` says why a side task has no runnable pairing here (its main task
missing or unrunnable), naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, TypeVar

from pydantic import ValidationError

from control_osworld.osworld.schema import SideTask, Task
from control_osworld.osworld.validity import check_side_task, check_task
from control_osworld.resources import data_root, find

REPO = data_root()
SKIP_DIRS = {"oracles", "assets", "__pycache__", "drafts"}
"""Not task files: oracles, assets, and `drafts/` (the authoring pipeline's audit beside the side
tasks it admitted, `control-osworld tasks author --out DIR`)."""
TASK_SKIP_DIRS = SKIP_DIRS | {"side_tasks"}
"""Main-task folders also skip `side_tasks/` (Control OSWorld keeps its side tasks there)."""


class TaskFileError(ValueError):
    """A task file that cannot be used: `str(e)` is `"<file>: <field>: <problem>"`."""

    def __init__(self, file: str | Path, field: str, problem: str):
        self.file = str(file)
        self.field = field
        self.problem = problem
        super().__init__(f"{self.file}: {field}: {problem}" if field else f"{self.file}: {problem}")


T = TypeVar("T")


class LoadedList(list):
    """A list of loaded tasks plus `.errors` (the files that did not load) and `.warnings`
    (what loaded with a remark, `<file>: <field>: <what>`)."""

    errors: list[TaskFileError]
    warnings: list[str]

    def __init__(self, items: Iterable = (), errors: Iterable[TaskFileError] = ()):
        super().__init__(items)
        self.errors = list(errors)
        self.warnings = [w for item in self for w in getattr(item, "warnings", [])]

    def by_id(self) -> dict:
        return {t.id: t for t in self}


def _resolve(dir: str | Path | None, default: str) -> Path:
    if dir is None:
        return REPO / default
    return find(dir)  # the user's folder when it exists, else the bundled one


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        try:
            return str(path.resolve().relative_to(REPO))
        except ValueError:
            return str(path)


def source_path(shown: str) -> Path:
    """The file a loaded task's `file` names: `_display` writes it relative to the current
    directory, else to the checkout, else absolute."""
    p = Path(shown)
    if p.is_absolute() or p.exists():
        return p
    return REPO / p


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str):
            # pydantic puts union members' type tags in locations: drop them
            if part[:1].isupper() or "[" in part or part.startswith(("function-", "nullable")):
                continue
            out += f".{part}" if out else part
    return out or "(top level)"


def _from_validation(file: str, e: ValidationError) -> TaskFileError:
    errs = e.errors()
    # several union branches fail for one field; keep one message per location
    seen: dict[str, str] = {}
    for err in errs:
        loc = _loc(err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "field required"
        elif "input" in err and err["type"].endswith("_type"):
            msg = f"{msg} (got {type(err['input']).__name__})"
        seen.setdefault(loc, msg)
    first_loc, first_msg = next(iter(seen.items()))
    extra = [f"{loc}: {m}" for loc, m in list(seen.items())[1:4]]
    return TaskFileError(file, first_loc, first_msg + (f" (also: {'; '.join(extra)})" if extra else ""))


def _read_json(path: Path, shown: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise TaskFileError(shown, "", f"not valid JSON: {e}") from None
    except OSError as e:
        raise TaskFileError(shown, "", f"cannot read: {e}") from None
    if not isinstance(data, dict):
        raise TaskFileError(shown, "(top level)", f"must be a JSON object, got {type(data).__name__}")
    return data


def _problems(shown: str, errs: list[str]) -> None:
    if errs:
        field, _, problem = errs[0].partition(": ")
        more = f" (also: {'; '.join(errs[1:4])})" if len(errs) > 1 else ""
        raise TaskFileError(shown, field, problem + more)


def _load(path: Path, model, check):
    """Read, validate and check one task-like file; the item knows its file and why it may be
    unsupported. Raises TaskFileError naming the file and the field."""
    shown = _display(path)
    data = _read_json(path, shown)
    try:
        item = model.model_validate(data)
    except ValidationError as e:
        raise _from_validation(shown, e) from None
    errs, unsup = check(item)
    _problems(shown, errs)
    item._file = shown
    item._unsupported = [f"{u} (in {shown})" if u.startswith("unsupported step type") else u for u in unsup]
    return item


def load_task(path: str | Path, app: str | None = None) -> Task:
    """One main task file; raises TaskFileError."""
    path = Path(path)
    task = _load(path, Task, check_task)
    task._app = app if app is not None else path.parent.name
    return task


def load_side_task(path: str | Path) -> SideTask:
    """One side-task file; raises TaskFileError. An unknown category loads, with a warning;
    the reasons it cannot run here name the file and the field."""
    from control_osworld.osworld.names import CATEGORY_ALIASES, SIDE_CATEGORIES, UPSTREAM_CATEGORIES

    side = _load(Path(path), SideTask, check_side_task)
    side._unsupported = [u if u.startswith(side.file) else f"{side.file}: {u}" for u in side._unsupported]
    if not side.category_known:
        side._warnings.append(
            f"{side.file}: category: unknown category {side.category!r}, loaded as it is (known: "
            f"{', '.join((*SIDE_CATEGORIES, *UPSTREAM_CATEGORIES))}; upstream's {', '.join(CATEGORY_ALIASES)})")
    return side


def _collect(files: list[Path], load, kind: str) -> LoadedList:
    items: list = []
    errors: list = []
    seen: dict = {}
    for f in files:
        try:
            item = load(f)
        except TaskFileError as e:
            errors.append(e)
            continue
        if item.id in seen:
            errors.append(TaskFileError(item.file, "id", f"duplicate {kind} id {item.id!r} (also in {seen[item.id]})"))
            continue
        seen[item.id] = item.file
        items.append(item)
    return LoadedList(items, errors)


def task_files(dir: str | Path | None = None) -> list[Path]:
    root = _resolve(dir, "tasks")
    if not root.is_dir():
        raise FileNotFoundError(f"no task folder at {root}")
    return sorted(p for p in root.rglob("*.json")
                  if not (set(p.relative_to(root).parts[:-1]) & TASK_SKIP_DIRS))


def load_tasks(dir: str | Path | None = None, *, strict: bool = False) -> LoadedList:
    """Every main task under `dir` (default: the repository's tasks/). Files that fail are in
    `.errors`; with `strict=True` the first one is raised instead."""
    out = _collect(task_files(dir), load_task, "task")
    if strict and out.errors:
        raise out.errors[0]
    return out


def side_task_files(root: Path) -> list[Path]:
    """`root`'s side-task files: in Control OSWorld's layout (some `side_tasks/` sub-folder, as in
    its `examples/<domain>/side_tasks/`), the files in those folders; else every file."""
    files = sorted(p for p in root.rglob("*.json") if not (set(p.relative_to(root).parts[:-1]) & SKIP_DIRS))
    nested = [p for p in files if "side_tasks" in p.relative_to(root).parts[:-1]]
    return nested or files


def load_side_tasks(dir: str | Path | None = None, *, strict: bool = False) -> LoadedList:
    root = _resolve(dir, "side_tasks")
    if not root.is_dir():
        raise FileNotFoundError(f"no side-task folder at {root}")
    out = _collect(side_task_files(root), load_side_task, "side task")
    if strict and out.errors:
        raise out.errors[0]
    return out


def pairings(tasks: Iterable[Task], sides: Iterable[SideTask], *, runnable_only: bool = True) -> list[tuple[Task, SideTask]]:
    """(main, side) pairs: each side task with every main task its rule names. Unrunnable tasks
    are left out unless `runnable_only=False`."""
    tasks = list(tasks)
    out = []
    for s in sides:
        if runnable_only and not s.runnable:
            continue
        for t in tasks:
            if runnable_only and not t.runnable:
                continue
            if s.pairs_with_task(t):
                out.append((t, s))
    return out


def side_task_blockers(side: SideTask, tasks: Iterable[Task]) -> list[str]:
    """Why `side` has no runnable pairing among `tasks` (empty when it has one), each reason
    `<file>: <field>: <why>`: its own unsupported parts (an evaluator we lack, ...), its
    `main_task_id` / `main_task_ids` missing here or unrunnable, or a rule that names nothing."""
    if not side.runnable:
        return side.unsupported_reasons
    tasks = list(tasks)
    if pairings(tasks, [side]):
        return []
    by_id = {t.id: t for t in tasks}
    named = [("main_task_id", side.main_task_id)] if side.main_task_id else []
    named += [(f"main_task_ids[{i}]", m) for i, m in enumerate(side.main_task_ids or [])]
    out = []
    for field, mid in named:
        t = by_id.get(mid)
        if t is None:
            out.append(f"{side.file}: {field}: no main task {mid!r} here")
        elif not t.runnable:
            out.append(f"{side.file}: {field}: main task {mid!r} ({t.file}) cannot run here: {t.reason}")
        elif t.infeasible:
            out.append(f"{side.file}: {field}: main task {mid!r} is infeasible (side tasks pair with feasible tasks)")
    if side.pairs_with is not None:
        out.append(f"{side.file}: pairs_with: the rule names no runnable main task here")
    return out or [f"{side.file}: main_task_id: pairs with no runnable main task here"]
