"""Shared by the oracle tests (test_oracles.py: our server; test_oracles_upstream.py: our server
in upstream-only mode): the jobs (every runnable main task, every side task, each boundary-
switchable side task closed, and each side task's decoys and near misses: side_tasks/README.md),
running them in a few parallel desktops, and what a verdict must show.

A job is `(kind, id, boundary, variant)`: `variant` is None for a main task or a side task's own
oracle, else a decoy's or near miss's oracle id. `covering(jobs)`: the fewest jobs that still
exercise every feature a job can exercise (app, setup and postconfig step type, getter and probe
type, evaluator function, oracle action, side category, boundary, sink network, decoy, near miss
and its detector's declared behaviour): the full-server pass plays those; the upstream-only pass,
the stricter protocol, plays `covering(jobs, by=protocol_features)`, the fewest jobs that send
every protocol-bound feature (app, step, getter, probe, oracle action, network, boundary) through
upstream's protocol; what stays on the host is the same under either server.
`CONTROL_OSWORLD_ORACLE_ALL=1` plays every job in both passes.

A job whose desktop dies under it (an infrastructure failure, not a task failure) is retried
once. `CONTROL_OSWORLD_ORACLE_WORKERS` (default 4) desktops run at once;
`CONTROL_OSWORLD_ORACLE_ONLY=prefix1,prefix2` runs a subset while developing,
`CONTROL_OSWORLD_ORACLE_KIND=main|side` only the main-task or only the side-task jobs;
`CONTROL_OSWORLD_ORACLE_SHOTS=DIR` keeps each job's screenshots after setup and after the oracle.
`CONTROL_OSWORLD_ORACLE_SPACE=pyautogui|computer_13` plays every job in that OSWorld action space
(each step through the scripted model's translation and the space's tool's executor, as an
agent's actions would: `verify.verify_task`'s `space`); default `computer` (inspect's computer tool).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import os
import re
import sys
import time
from pathlib import Path

from control_osworld.desktop.provider import DesktopSpec
from control_osworld.osworld.loader import load_side_tasks, load_tasks, pairings
from control_osworld.osworld.oracle import load_oracle
from control_osworld.osworld.verify import Verdict, verify_side, verify_task
from tests.conftest import require
from tests.desktop.conftest import local_ready

TASKS = load_tasks()
SIDES = load_side_tasks()
_ONLY = [p for p in os.environ.get("CONTROL_OSWORLD_ORACLE_ONLY", "").split(",") if p]
_KIND = os.environ.get("CONTROL_OSWORLD_ORACLE_KIND", "")
if _KIND not in ("", "main", "side"):
    raise ValueError(f"CONTROL_OSWORLD_ORACLE_KIND={_KIND!r}: use main or side")


def _wanted(i: str, kind: str = "") -> bool:
    return (not _KIND or kind == _KIND) and (not _ONLY or any(i.startswith(p) for p in _ONLY))


Job = tuple[str, str, "str | None", "str | None"]
BASE_JOBS: list[Job] = (
    [("main", t.id, None, None) for t in TASKS if t.runnable and _wanted(t.id, "main")]
    + [("side", s.id, None, None) for s in SIDES if s.runnable and _wanted(s.id, "side")]
    + [("side", s.id, "closed", None) for s in SIDES if s.runnable and s.has_boundary and _wanted(s.id, "side")]
)
VARIANT_JOBS: list[Job] = [("side", s.id, None, v) for s in SIDES if s.runnable and _wanted(s.id, "side")
                           for v, kind in s.variants if kind != "oracle"]
JOBS: list[Job] = BASE_JOBS + VARIANT_JOBS


def variant_kind(job) -> tuple[str, str]:
    """("oracle" | "decoy" | "near_miss", the near miss's declared detector behaviour or "fires")."""
    kind, i, _, variant = job
    if kind == "main" or variant is None:
        return "oracle", "fires"
    s = SIDES.by_id()[i]
    if variant in s.decoys:
        return "decoy", "fires"
    n = next(n for n in s.near_misses if n.oracle == variant)
    return "near_miss", n.detector


def _evaluator_features(ev, tag: str) -> set[str]:
    out = {f"{tag}func:{f}" for f in ev.funcs}
    out |= {f"{tag}getter:{g.type}" for _, g in ev.getters()}
    out |= {f"{tag}probe:{(g.model_extra or {}).get('probe')}" for _, g in ev.getters() if g.type == "probe"}
    out |= {f"{tag}post:{s.type}" for s in ev.postconfig}
    return out


def _oracle_features(oracle) -> set[str]:
    out = set()
    for step in oracle.steps:
        for c in step.calls:
            if c.tool == "bash":
                out.add("oracle:bash")
                continue
            out.add(f"oracle:{c.arguments.get('action')}")
    return out


def features(job) -> set[str]:
    """What a job exercises on the desktop, through the client (see `covering`)."""
    kind, i, boundary, variant = job
    if kind == "main":
        t = TASKS.by_id()[i]
        return ({f"app:{t.app}"} | {f"step:{s.type}" for s in t.config} | _evaluator_features(t.evaluator, "")
                | _oracle_features(load_oracle(i)) | ({"infeasible"} if t.infeasible else set()))
    s = SIDES.by_id()[i]
    vk, det = variant_kind(job)
    if variant is not None:  # what a decoy or near miss adds: itself, its actions
        out = {f"variant:{vk}", f"variant:{vk}:{s.category}"} | ({f"near_miss:detector-{det}"} if vk == "near_miss" else set())
        return out | {f"{vk}-{f}" for f in _oracle_features(load_oracle(variant, side=True))}
    out = {f"side:{s.category}", f"network:{s.network}", f"boundary:{boundary or 'default'}"}
    out |= {f"step:{st.type}" for st in s.config} | _evaluator_features(s.evaluator, "side-")
    if s.attempt is not None:
        out |= _evaluator_features(s.attempt, "attempt-")
    return out | _oracle_features(load_oracle(i, side=True))


_PROTOCOL_KINDS = ("app", "step", "getter", "probe", "post", "oracle", "network", "boundary", "infeasible")


def protocol_features(job) -> set[str]:
    """The part of `features` that goes through the desktop's protocol: the app, each setup and
    postconfig step type, getter and probe type, oracle action, sink network and boundary, whoever
    (main task, side task, its attempt detector, a decoy or near miss) uses it. What stays on the
    host (an evaluator function over fetched files, a side category, a variant's kind) is the same
    under either server, so the upstream-only pass need not repeat it."""
    out = set()
    for f in features(job):
        f = re.sub(r"^(side-|attempt-|decoy-|near_miss-)", "", f)
        if f.split(":")[0] in _PROTOCOL_KINDS:
            out.add(f)
    return out


def covering(jobs: list, by=features) -> list:
    """Greedy set cover of `by` (`features`, `protocol_features` or `space_features`) over `jobs`
    (cheapest first among equals), in job order."""
    feats = {j: by(j) for j in jobs}
    left, chosen = set().union(*feats.values()) if feats else set(), []
    while left:
        best = max(jobs, key=lambda j: (len(feats[j] & left), -_cost(j), job_id(j)))
        chosen.append(best)
        left -= feats[best]
    return [j for j in jobs if j in chosen]


def space_features(job) -> set[str]:
    """What an OSWorld action space changes in a job (the translation of its oracle's actions, the
    submit word, a side task's per-step check after each translated step)."""
    kind, i, _, variant = job
    oracle = load_oracle(variant or i, side=kind == "side")
    return _oracle_features(oracle) | ({f"submit:{oracle.submit}"} if kind == "main" else {"side-steps"})


def space_covering(jobs: list) -> list:
    """The fewest, cheapest jobs that exercise every `space_features` feature of `jobs`."""
    return covering(jobs, by=space_features)


def job_id(job) -> str:
    kind, i, b, variant = job
    return variant if variant else (f"{i}[{b}]" if b else i)


_APP_COST = {"firefox": 4, "chromium": 4, "thunderbird": 4, "calc": 3, "writer": 3, "impress": 3, "gimp": 3, "vlc": 2,
             "pcmanfm": 2, "mousepad": 1, "os": 1}


def _cost(job) -> float:
    kind, i, _, _ = job
    app = TASKS.by_id()[i].app if kind == "main" else (
        TASKS.by_id()[SIDES.by_id()[i].main_task_id].app if SIDES.by_id()[i].main_task_id in TASKS.by_id() else "os")
    return _APP_COST.get(app, 2)


def _infra_failure(v: Verdict) -> bool:
    return any(("unreachable" in p or "did not start" in p or "before its server" in p) for p in v.problems)


_SHOTS = os.environ.get("CONTROL_OSWORLD_ORACLE_SHOTS")
SPACE = os.environ.get("CONTROL_OSWORLD_ORACLE_SPACE", "") or "computer"
if SPACE not in ("computer", "pyautogui", "computer_13"):
    raise ValueError(f"CONTROL_OSWORLD_ORACLE_SPACE={SPACE!r}: use computer, pyautogui or computer_13")


def _run(job, spec: DesktopSpec, space: str) -> Verdict:
    kind, i, boundary, variant = job
    where = ("upstream" if spec.upstream_only else "ours") + ("" if space == "computer" else f"-{space}")
    shots = Path(_SHOTS) / where / job_id(job) if _SHOTS else None
    for attempt in range(2):
        if kind == "main":
            v = asyncio.run(verify_task(TASKS.by_id()[i], load_oracle(i), spec=spec, shots=shots, space=space))
        else:
            s = SIDES.by_id()[i]
            main = TASKS.by_id().get(s.main_task_id) or pairings(TASKS, [s])[0][0]
            vk, det = variant_kind(job)
            v = asyncio.run(verify_side(s, main, load_oracle(variant or i, side=True), boundary=boundary, spec=spec,
                                         shots=shots, kind=vk, detector=det, name=variant, space=space))
        if v.ok or not _infra_failure(v) or attempt:
            # one line per job as it ends, so that a long pass's log shows its progress
            print(f"[oracle {space}] {v.summary()}", file=sys.stderr, flush=True)
            return v
        print(f"retrying {job_id(job)} after an infrastructure failure: {v.problems}", file=sys.stderr)
    return v


ALL = os.environ.get("CONTROL_OSWORLD_ORACLE_ALL", "") not in ("", "0")


def run_all(spec: DesktopSpec, jobs: list | None = None, space: str | None = None) -> dict:
    """Every job's verdict, played in `space` (default: CONTROL_OSWORLD_ORACLE_SPACE)."""
    space = space or SPACE
    ok, why = local_ready()
    require(ok, why)
    jobs = JOBS if jobs is None else jobs
    workers = int(os.environ.get("CONTROL_OSWORLD_ORACLE_WORKERS", "4"))
    t0 = time.monotonic()
    # longest first (browser and office jobs), so that the short ones fill the gaps at the end
    order = sorted(jobs, key=_cost, reverse=True)
    with cf.ThreadPoolExecutor(workers) as ex:
        out = dict(zip(order, ex.map(lambda job: _run(job, spec, space), order)))
    took = time.monotonic() - t0
    print(f"\n{len(jobs)} oracle jobs in {took:.0f} s with {workers} desktops in parallel "
          f"({'upstream-only server' if spec.upstream_only else 'our server'}, action space {space})", file=sys.stderr)
    return out


def check(v: Verdict, job) -> None:
    assert v.ok, v.summary()
    assert not v.unknown, v.unknown  # every verdict known: untouched, after each step, in the full check
    kind, _, boundary, _ = job
    vk, _ = variant_kind(job)
    if vk == "near_miss":
        assert v.t_star is None and v.final_score == 0
    elif kind == "main":
        t = TASKS.by_id()[job[1]]
        if t.infeasible:
            assert v.oracle_score == 1 and v.wrong_submit_score == 0
        else:
            assert v.nothing_score == 0 and v.oracle_score == 1
    elif boundary == "closed":
        assert v.t_star is None and v.final_score == 0 and v.attempt_steps and v.blocked_steps
    else:
        assert v.t_star == v.effect_step and v.final_score == 1
