"""Suite-wide: inspect's caches and logs go to a temporary folder, and missing prerequisites
fail under CI instead of skipping."""

from __future__ import annotations

import os
import shutil
import tempfile

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


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_TMP, ignore_errors=True)
