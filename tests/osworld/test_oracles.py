"""Every oracle on a real desktop: each main task's evaluator gives 0 before anything is done
and 1 after its oracle (infeasible tasks: submitting infeasible scores 1, done 0); each side
task's per-step checker gives t* equal to the oracle's effect step; with the boundary closed,
the effect never happens and the attempt is recorded.

All jobs run once, in a few parallel desktops (`CONTROL_OSWORLD_ORACLE_WORKERS`, default 4),
in a module fixture; one test per job reports its verdict. A job whose desktop dies under it
(an infrastructure failure, not a task failure) is retried once. Set
`CONTROL_OSWORLD_ORACLE_ONLY=prefix1,prefix2` to run a subset while developing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import os
import sys
import time

import pytest

from control_osworld.osworld.loader import load_side_tasks, load_tasks, pairings
from control_osworld.osworld.oracle import load_oracle
from control_osworld.osworld.verify import Verdict, verify_side, verify_task
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

TASKS = load_tasks()
SIDES = load_side_tasks()
_ONLY = [p for p in os.environ.get("CONTROL_OSWORLD_ORACLE_ONLY", "").split(",") if p]


def _wanted(i: str) -> bool:
    return not _ONLY or any(i.startswith(p) for p in _ONLY)


JOBS: list[tuple[str, str, str | None]] = (
    [("main", t.id, None) for t in TASKS if t.runnable and _wanted(t.id)]
    + [("side", s.id, None) for s in SIDES if s.runnable and _wanted(s.id)]
    + [("side", s.id, "closed") for s in SIDES if s.runnable and s.has_boundary and _wanted(s.id)]
)


def _job_id(job) -> str:
    kind, i, b = job
    return f"{i}[{b}]" if b else i


_APP_COST = {"firefox": 4, "chromium": 4, "calc": 3, "writer": 3, "vlc": 2, "pcmanfm": 2, "mousepad": 1, "os": 1}


def _cost(job) -> float:
    kind, i, _ = job
    app = TASKS.by_id()[i].app if kind == "main" else (
        TASKS.by_id()[SIDES.by_id()[i].main_task_id].app if SIDES.by_id()[i].main_task_id in TASKS.by_id() else "os")
    return _APP_COST.get(app, 2)


def _infra_failure(v: Verdict) -> bool:
    return any(("unreachable" in p or "did not start" in p or "before its server" in p) for p in v.problems)


def _run(job) -> Verdict:
    kind, i, boundary = job
    for attempt in range(2):
        if kind == "main":
            v = asyncio.run(verify_task(TASKS.by_id()[i], load_oracle(i)))
        else:
            s = SIDES.by_id()[i]
            main = TASKS.by_id().get(s.main_task_id) or pairings(TASKS, [s])[0][0]
            v = asyncio.run(verify_side(s, main, load_oracle(i, side=True), boundary=boundary))
        if v.ok or not _infra_failure(v) or attempt:
            return v
        print(f"retrying {_job_id(job)} after an infrastructure failure: {v.problems}", file=sys.stderr)
    return v


@pytest.fixture(scope="module")
def verdicts():
    ok, why = local_ready()
    require(ok, why)
    workers = int(os.environ.get("CONTROL_OSWORLD_ORACLE_WORKERS", "4"))
    t0 = time.monotonic()
    # longest first (browser and office jobs), so that the short ones fill the gaps at the end
    order = sorted(JOBS, key=_cost, reverse=True)
    with cf.ThreadPoolExecutor(workers) as ex:
        out = dict(zip(order, ex.map(_run, order)))
    took = time.monotonic() - t0
    print(f"\n{len(JOBS)} oracle jobs in {took:.0f} s with {workers} desktops in parallel", file=sys.stderr)
    return out


@pytest.mark.parametrize("job", JOBS, ids=[_job_id(j) for j in JOBS])
def test_oracle(verdicts, job):
    v = verdicts[job]
    assert v.ok, v.summary()
    kind, _, boundary = job
    if kind == "main":
        t = TASKS.by_id()[job[1]]
        if t.infeasible:
            assert v.oracle_score == 1 and v.wrong_submit_score == 0
        else:
            assert v.nothing_score == 0 and v.oracle_score == 1
    elif boundary == "closed":
        assert v.t_star is None and v.final_score == 0 and v.attempt_steps and v.blocked_steps
    else:
        assert v.t_star == v.effect_step and v.final_score == 1
