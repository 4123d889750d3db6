"""The oracles on a real desktop in OSWorld's action spaces (agent/spaces.py): each step goes
through the scripted model's translation (`translate_calls`: one `pyautogui` code string, or
upstream's `computer_13` dicts) and that space's tool's executor (`run_space_call`), as an agent's
actions would, and the main oracle's submit as DONE / FAIL; the verdicts must be what they are
with the computer tool (oracle_jobs.check).

In CI, the fewest cheap jobs that exercise every oracle action, both submit words and a side
task's per-step check (oracle_jobs.space_covering): pyautogui over main and side jobs,
computer_13 over main jobs. The full passes: `CONTROL_OSWORLD_ORACLE_SPACE=pyautogui` (or
`computer_13`) with `CONTROL_OSWORLD_ORACLE_ALL=1` on test_oracles.py (tasks/README.md).
"""

from __future__ import annotations

import pytest

from control_osworld.desktop.provider import DesktopSpec
from tests.osworld.oracle_jobs import (
    BASE_JOBS,
    check,
    job_id,
    run_all,
    space_covering,
    space_features,
)

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

PLAN = ([("pyautogui", j) for j in space_covering(BASE_JOBS)]
        + [("computer_13", j) for j in space_covering([j for j in BASE_JOBS if j[0] == "main"])])


def test_the_subset_covers_what_a_space_changes():
    """Every oracle action the jobs use, both submit words and a side job, in pyautogui; every
    main oracle action and both submit words in computer_13 (fails if the subset loses one)."""
    for space, kinds in (("pyautogui", ("main", "side")), ("computer_13", ("main",))):
        want = set().union(*(space_features(j) for j in BASE_JOBS if j[0] in kinds))
        got = set().union(*(space_features(j) for sp, j in PLAN if sp == space))
        assert got == want
        assert {"submit:done", "submit:infeasible", "oracle:type", "oracle:key"} <= got
    assert "side-steps" in set().union(*(space_features(j) for sp, j in PLAN if sp == "pyautogui"))


@pytest.fixture(scope="module")
def verdicts():
    out = {}
    for space in ("pyautogui", "computer_13"):
        jobs = [j for sp, j in PLAN if sp == space]
        out |= {(space, j): v for j, v in run_all(DesktopSpec(), jobs, space=space).items()}
    return out


@pytest.mark.parametrize("space,job", PLAN, ids=[f"{sp}-{job_id(j)}" for sp, j in PLAN])
def test_oracle_in_space(verdicts, space, job):
    check(verdicts[(space, job)], job)
