"""scripts/bench_main.py reads each stage's wall time from the progress log's stamped lines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _bench():
    sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location("bench_main", SCRIPTS / "bench_main.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stage_times_from_a_progress_log(tmp_path):
    log = tmp_path / "progress.log"
    log.write_text("\n".join([
        "[23:59:50] agents: 0/4 samples (0%)",
        "noise that is not a stage line",
        "[23:59:58] agents: 2/4 samples (50%), 15/min",
        "[00:00:20] agents: 4/4 samples (100%), 8/min",  # past midnight
        "[00:00:21] monitors: 0/100 views (0%)",
        "[00:01:01] monitors: 100/100 views (100%)",
        "[00:01:02] report: 7/7 parts (100%)",
    ]))
    t = _bench().stage_times(log)
    assert t["agents"] == {"seconds": 30.0, "done": 4, "total": 4}
    assert t["monitors"] == {"seconds": 40.0, "done": 100, "total": 100}
    assert t["report"]["seconds"] == 0.0
    assert _bench().stage_times(tmp_path / "absent.log") == {}


def test_the_monitors_ocr_read_ahead_counts_in_the_monitors_stage(tmp_path):
    log = tmp_path / "progress.log"
    log.write_text("\n".join([
        "[10:00:00] agents: 4/4 samples (100%)",
        "[10:00:01] monitors-ocr: 30 screenshots to do",
        "[10:00:02] monitors-ocr: 12/30 screenshots (40%)",
        "[10:05:00] monitors-ocr: 30/30 screenshots (100%)",
        "[10:05:01] monitors: 0/100 views (0%)",
        "[10:06:00] monitors: 100/100 views (100%)",
    ]))
    t = _bench().stage_times(log)
    assert t["monitors"] == {"seconds": 358.0, "done": 100, "total": 100}


def test_machine_busy_seconds_grow_with_work():
    b = _bench()
    t0 = b.machine_busy_seconds()
    x = 0
    for i in range(3_000_000):
        x += i
    assert b.machine_busy_seconds() > t0
