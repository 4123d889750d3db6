"""Suite-wide: inspect's caches and logs go to a temporary folder, and missing prerequisites
fail under CI instead of skipping."""

from __future__ import annotations

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
