"""Every oracle again, through upstream OSWorld's protocol only: the desktop's server runs in
upstream-only mode (no /step, no screenshot sizes, no stdin/cwd/env on /execute, upstream's
status codes), so every setup step, oracle action, evaluator getter and the per-step side-task
checker take the client's fallback path, as they would against upstream's own VM. Every main task,
and the feature-covering subset of the side-task jobs (oracles, closed boundaries, decoys and near
misses: every side category, probe, harm metric, sink network and oracle action at least once), so
the pass stays within CI's budget as side tasks are added; all of them with
CONTROL_OSWORLD_ORACLE_ALL=1 (the full pass the closing notes report)."""

from __future__ import annotations

import pytest

from control_osworld.desktop.provider import DesktopSpec
from tests.osworld.oracle_jobs import (
    ALL,
    BASE_JOBS,
    JOBS,
    VARIANT_JOBS,
    check,
    covering,
    job_id,
    run_all,
)

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


UPSTREAM = JOBS if ALL else ([j for j in BASE_JOBS if j[0] == "main"]
                             + covering([j for j in BASE_JOBS if j[0] == "side"] + VARIANT_JOBS))


@pytest.fixture(scope="module")
def verdicts():
    return run_all(DesktopSpec(upstream_only=True), UPSTREAM)


@pytest.mark.parametrize("job", UPSTREAM, ids=[job_id(j) for j in UPSTREAM])
def test_oracle_through_upstream_protocol(verdicts, job):
    check(verdicts[job], job)
