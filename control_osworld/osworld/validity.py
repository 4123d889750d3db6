"""The semantic checks the loader runs on task and side-task files: names (setup step types,
getters, metrics), list lengths, pairing and network rules. Each returns the problems that
make a file invalid and, separately, the reasons a valid task cannot run on our desktops.
"""

from __future__ import annotations

import re

from control_osworld.osworld.names import (
    UNSUPPORTED_STEPS,
    UPSTREAM_GETTERS,
    UPSTREAM_METRICS,
    truthy,
)
from control_osworld.osworld.schema import Evaluator, SetupStep, SideTask, Task
from control_osworld.osworld.setup import STEPS
from control_osworld.osworld.step_checks import live_web

__all__ = ["check_evaluator", "check_side_task", "check_step", "check_steps", "check_task"]

_INSTRUCTION_URL = re.compile(r"https?://[^\s\"'<>()\[\]]+")
"""A web address written in a main task's instruction."""


def check_step(step: SetupStep, where: str) -> tuple[list[str], list[str]]:
    """(errors, unsupported reasons) of one setup step."""
    t = step.type
    if t in UNSUPPORTED_STEPS:
        return [], [f"unsupported step type {t!r} ({UNSUPPORTED_STEPS[t]})"]
    if t not in STEPS:
        return [f"{where}.type: unknown setup step type {t!r}; known: {', '.join(sorted(STEPS))}"], []
    return STEPS[t].check(step.parameters, where)


def check_evaluator(ev: Evaluator, where: str = "evaluator") -> tuple[list[str], list[str]]:
    """(errors, unsupported reasons) of an evaluator: metric and getter names, list lengths."""
    from control_osworld.osworld.evaluators import GETTERS, METRICS
    from control_osworld.osworld.evaluators.parity import unsupported_options

    errs: list[str] = []
    unsup: list[str] = []
    funcs = ev.funcs
    for i, f in enumerate(funcs):
        at = f"{where}.func" if isinstance(ev.func, str) else f"{where}.func[{i}]"
        if f in METRICS:
            opts = ev.options[i] if isinstance(ev.options, list) and i < len(ev.options) else ev.options
            unsup += [f"metric {part!r} is not implemented here" for part in unsupported_options(f, opts)]
        if f == "infeasible" or f in METRICS:
            continue
        if f in UPSTREAM_METRICS:
            unsup.append(f"metric {f!r} is not implemented here")
        else:
            errs.append(f"{at}: unknown metric {f!r}")
    if isinstance(ev.func, list):
        n = len(ev.func)
        for name in ("result", "expected", "options"):
            v = getattr(ev, name)
            if v is not None and not isinstance(v, list):
                errs.append(f"{where}.{name}: must be a list of {n} (one per metric in func)")
            elif isinstance(v, list) and len(v) != n:
                errs.append(f"{where}.{name}: has {len(v)} entries but func has {n} metrics")
        if ev.result is None:
            errs.append(f"{where}.result: field required")
    else:
        for name in ("result", "expected", "options"):
            if isinstance(getattr(ev, name), list):
                errs.append(f"{where}.{name}: must be a single object when func is one metric")
        if ev.result is None and not ev.is_infeasible:
            errs.append(f"{where}.result: field required")
    for at, g in ev.getters():
        if g.type in GETTERS:
            if g.type == "cloud_file":
                from control_osworld.osworld.assets import cached_download

                paths = g.model_extra.get("path") if g.model_extra else None
                for url in (paths if isinstance(paths, list) else [paths]):
                    if isinstance(url, str) and url.startswith(("http://", "https://")) and cached_download(url, "") is None:
                        unsup.append(f"needs a cached asset: {url} (control-osworld tasks fetch-assets)")
            continue
        if g.type in UPSTREAM_GETTERS:
            unsup.append(f"getter {g.type!r} {UPSTREAM_GETTERS[g.type]}")
        else:
            errs.append(f"{where}.{at}.type: unknown getter {g.type!r}")
    e, u = check_steps(ev.postconfig, f"{where}.postconfig")
    return errs + e, unsup + u


def check_steps(steps: list[SetupStep], where: str = "config") -> tuple[list[str], list[str]]:
    """(errors, unsupported reasons) of a list of setup steps at `where` in the file."""
    errs: list[str] = []
    unsup: list[str] = []
    for i, s in enumerate(steps):
        e, u = check_step(s, f"{where}[{i}]")
        errs += e
        unsup += u
    return errs, unsup


def check_task(task: Task) -> tuple[list[str], list[str]]:
    errs, unsup = check_steps(task.config)
    e, u = check_evaluator(task.evaluator)
    errs += e
    unsup += u
    if truthy(task.proxy):
        unsup.append("needs the live web (proxy)")
    urls = (u.rstrip(".,;:!?") for u in _INSTRUCTION_URL.findall(task.instruction or ""))  # not the sentence's stop
    web = [u for u in urls if live_web(u)]
    if web:  # e.g. "Download the image from https://huggingface.co/...": no setup step shows it
        unsup.append(f"instruction: needs the live web: it sends the agent to {web[0]}")
    return errs, list(dict.fromkeys(unsup))


def check_side_task(side: SideTask) -> tuple[list[str], list[str]]:
    """(errors, unsupported reasons); each reason names its field (`evaluator: metric 'x' is
    not implemented here`, `config[2]: unsupported step type ...`)."""
    errs: list[str] = []
    unsup: list[str] = []
    for i, step in enumerate(side.config):
        e, u = check_step(step, f"config[{i}]")
        errs += e
        unsup += [f"config[{i}]: {r}" for r in u]
    for name in ("evaluator", "attempt"):
        ev = getattr(side, name)
        if ev is not None:
            e, u = check_evaluator(ev, name)
            errs += e
            unsup += [f"{name}: {r}" for r in u]
    if side.main_task_id is None and not side.main_task_ids and side.pairs_with is None:
        errs.append("main_task_id: field required (or main_task_ids, or a pairs_with rule)")
    if side.boundary is not None and side.boundary.kind == "sink" and side.network != "sink":
        errs.append("network: a side task with a sink boundary needs network \"sink\"")
    return errs, list(dict.fromkeys(unsup))
