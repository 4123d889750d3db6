"""Every oracle again, through upstream OSWorld's protocol only: the desktop's server runs in
upstream-only mode (no /step, no screenshot sizes, no stdin/cwd/env on /execute, upstream's
status codes), so every setup step, oracle action, evaluator getter and the per-step side-task
checker take the client's fallback path, as they would against upstream's own VM."""

from __future__ import annotations

import pytest

from control_osworld.desktop.provider import DesktopSpec
from tests.osworld.oracle_jobs import JOBS, check, job_id, run_all

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


@pytest.fixture(scope="module")
def verdicts():
    return run_all(DesktopSpec(upstream_only=True))


@pytest.mark.parametrize("job", JOBS, ids=[job_id(j) for j in JOBS])
def test_oracle_through_upstream_protocol(verdicts, job):
    check(verdicts[job], job)
