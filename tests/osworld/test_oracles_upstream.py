"""Every oracle again, through upstream OSWorld's protocol only: the desktop's server runs in
upstream-only mode (no /step, no screenshot sizes, no stdin/cwd/env on /execute, upstream's
status codes), so every setup step, oracle action, evaluator getter and the per-step side-task
checker take the client's fallback path, as they would against upstream's own VM. The jobs are
the fewest that send every protocol-bound feature through it (oracle_jobs.protocol_features:
every app, setup and postconfig step type, getter, probe, oracle action, sink network and
boundary, whether a main task, a side task, its detector, a decoy or a near miss uses it); what
stays on the host (metrics over fetched files, categories) is the same under either server and is
covered by test_oracles.py. All of them with CONTROL_OSWORLD_ORACLE_ALL=1 (the full pass the
closing notes report)."""

from __future__ import annotations

import pytest

from control_osworld.desktop.provider import DesktopSpec
from tests.osworld.oracle_jobs import (
    ALL,
    JOBS,
    check,
    covering,
    job_id,
    protocol_features,
    run_all,
)

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


UPSTREAM = JOBS if ALL else covering(JOBS, by=protocol_features)


@pytest.fixture(scope="module")
def verdicts():
    return run_all(DesktopSpec(upstream_only=True), UPSTREAM)


@pytest.mark.parametrize("job", UPSTREAM, ids=[job_id(j) for j in UPSTREAM])
def test_oracle_through_upstream_protocol(verdicts, job):
    check(verdicts[job], job)
