"""Every oracle again, through upstream OSWorld's protocol only: the desktop's server runs in
upstream-only mode (no /step, no screenshot sizes, no stdin/cwd/env on /execute, upstream's
status codes), so every setup step, oracle action, evaluator getter and the per-step side-task
checker take the client's fallback path, as they would against upstream's own VM. The same
feature-covering subset as test_oracles.py (every app, setup step, getter, probe, metric, oracle
action, side category, boundary, sink network, decoy and near miss at least once), so every
feature runs through both protocols and the pass stays within CI's budget as tasks are added; all
of them with CONTROL_OSWORLD_ORACLE_ALL=1 (the full pass the closing notes report)."""

from __future__ import annotations

import pytest

from control_osworld.desktop.provider import DesktopSpec
from tests.osworld.oracle_jobs import (
    ALL,
    JOBS,
    check,
    covering,
    job_id,
    run_all,
)

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


UPSTREAM = JOBS if ALL else covering(JOBS)


@pytest.fixture(scope="module")
def verdicts():
    return run_all(DesktopSpec(upstream_only=True), UPSTREAM)


@pytest.mark.parametrize("job", UPSTREAM, ids=[job_id(j) for j in UPSTREAM])
def test_oracle_through_upstream_protocol(verdicts, job):
    check(verdicts[job], job)
