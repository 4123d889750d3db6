"""Suite-wide: inspect's caches and logs go to a temporary folder (one per process), missing
prerequisites fail under CI instead of skipping, and the suite runs as two streams (below)."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

_TMP = tempfile.mkdtemp(prefix="control-osworld-tests-")
for var, sub in (("INSPECT_CACHE_DIR", "inspect-cache"), ("INSPECT_LOG_DIR", "inspect-logs"),
                 ("XDG_CACHE_HOME", "xdg-cache"), ("XDG_DATA_HOME", "xdg-data"), ("XDG_STATE_HOME", "xdg-state")):
    os.environ[var] = os.path.join(_TMP, sub)
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("INSPECT_DISPLAY", "none")

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(condition: bool, why: str) -> None:
    """Skip when a prerequisite is missing, except under CI=true, where that is a failure."""
    if not condition:
        if IN_CI:
            pytest.fail(f"prerequisite missing under CI: {why}")
        pytest.skip(why)


def console_script(name: str) -> str:
    """The console script `name` (control-osworld, inspect, control-arena) of the interpreter
    running the tests (the project's .venv under the README's test command), never whichever
    one happens to come first on PATH."""
    path = Path(sys.executable).parent / name
    require(path.exists(), f"{name} is not installed next to {sys.executable} (run scripts/install.sh)")
    return str(path)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_TMP, ignore_errors=True)



# Streams (pyproject's addopts: `-n 2`, pytest-xdist, with the scheduler below): every test file
# outside the pure folders, or inside them but marked desktop, docker or slow, belongs to one of two
# desktop streams, each a work unit that one worker runs in collection order: the desktop and
# task-suite tests (`tests/desktop/`, `tests/osworld/`: providers, images, oracles, the sink) and the
# rest (the loop, agents, faults, runs, analysis on logs, the wheel). The two run beside each other,
# so at most two files' desktops (and a test's own parallel desktops) share the cores; a test whose
# bound is timed scales it by the machine's load. The pure unit tests (analysis, monitoring and
# evaluator metrics: arrays and files in, numbers out, no desktop) go a file at a time to whichever
# worker is free. One stream ran 56 of the suite's 64 test-minutes while the other worker sat idle.
PURE = ("tests/analysis/", "tests/monitoring/", "tests/osworld/evaluators/")
SERIAL_MARKS = ("mark.desktop", "mark.docker", "mark.slow")
DESKTOP_SUITE = ("tests/desktop/", "tests/osworld/")
ROOT = Path(__file__).resolve().parents[1]


def stream(path: str) -> str:
    """The work unit of the test file `path` (relative to the checkout): itself when pure, else
    `desktops-suite` (under `DESKTOP_SUITE`) or `desktops-loop` (everything else)."""
    if pure_file(path):
        return path
    return "desktops-suite" if path.startswith(DESKTOP_SUITE) else "desktops-loop"


@functools.lru_cache(maxsize=None)
def pure_file(path: str) -> bool:
    """`path` (relative to the checkout) runs in the pure stream: in a pure folder and no test in
    it marked desktop, docker or slow."""
    if not path.startswith(PURE):
        return False
    try:
        text = (ROOT / path).read_text()
    except OSError:
        return False
    return not any(m in text for m in SERIAL_MARKS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class TwoStreams(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return stream(nodeid.split("::", 1)[0])

    return TwoStreams(config, log)
