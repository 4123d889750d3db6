"""The oracles on a real desktop through our server (with its extensions): a set of jobs covering
every feature (oracle_jobs.covering; all of them with CONTROL_OSWORLD_ORACLE_ALL=1; every job
plays through upstream's protocol in test_oracles_upstream.py): each main task's evaluator gives 0 before anything is done
and 1 after its oracle (infeasible tasks: submitting infeasible scores 1, done 0); each side
task's per-step checker gives t* equal to the oracle's effect step; with the boundary closed,
the effect never happens and the attempt is recorded.

All jobs run once, in a few parallel desktops, in a module fixture; one test per job reports
its verdict (see oracle_jobs.py for the knobs).
"""

from __future__ import annotations

import pytest

from control_osworld.desktop.provider import DesktopSpec
from tests.osworld.oracle_jobs import ALL, JOBS, check, covering, job_id, run_all

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

OURS = JOBS if ALL else covering(JOBS)


@pytest.fixture(scope="module")
def verdicts():
    return run_all(DesktopSpec(), OURS)


@pytest.mark.parametrize("job", OURS, ids=[job_id(j) for j in OURS])
def test_oracle(verdicts, job):
    check(verdicts[job], job)
