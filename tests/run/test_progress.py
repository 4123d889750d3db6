"""Progress of every stage of the main job: plain lines (done/total, rate, ETA) on stderr when it
is not a terminal, and in `<log_dir>/progress.log`."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from control_osworld.progress import StageProgress, progress_log
from tests.conftest import require
from tests.desktop.conftest import local_ready

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "agent" / "data"
LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] (?P<stage>[\w ]+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) \(\d+%\), "
                  r"(?P<rate>[\d.]+/(?:min|s)), ETA (?P<eta>\w+), elapsed \w+")


def test_plain_lines_carry_done_total_rate_and_eta(tmp_path):
    stream = io.StringIO()
    with progress_log(tmp_path / "progress.log"):
        with StageProgress("monitors", 10, "views", done=2, every=0.05, stream=stream) as p:
            time.sleep(0.12)
            for _ in range(4):
                p.advance()
            p.error()
            time.sleep(0.12)
    lines = stream.getvalue().splitlines()
    assert "monitors: 10 views to do, 2 done already" in lines[0]
    m = [LINE.match(line) for line in lines]
    last = [x for x in m if x][-1]
    assert (last["done"], last["total"], last["unit"]) == ("6", "10", "views")
    assert lines[-1].endswith("1 errored - finished")
    # The log file has the same lines, whatever the stream is.
    assert (tmp_path / "progress.log").read_text().splitlines() == lines
    # Before anything is done there is no rate to speak of, and no ETA.
    assert any("rate -, ETA -" in line for line in lines[1:3])


def test_no_lines_on_a_stream_when_switched_off(tmp_path):
    stream = io.StringIO()
    with StageProgress("agents", 3, "samples", plain=False, bar=False, stream=stream, every=0.01) as p:
        p.advance(3)
    assert stream.getvalue() == ""


@pytest.mark.desktop
@pytest.mark.slow
def test_main_job_with_output_to_a_file_prints_progress_of_every_stage(tmp_path):
    ok, why = local_ready()
    require(ok, why)
    cfg = tmp_path / "small.yaml"
    cfg.write_text(f"""
log_dir: {tmp_path / 'logs'}
tasks_dir: {DATA / 'tasks'}
side_tasks_dir: {DATA / 'side_tasks'}
modes: [honest, attack]
honest_matching: per_main
pairings:
  - untrusted_model: scripted/oracle
max_samples: 2
monitors: [monitors/full_trajectory_rules.yaml, monitors/per_step_rules.yaml]
monitor_subsets: [A, A+T+S]
report: true
""")
    out = tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CONTROL_OSWORLD_PROGRESS_EVERY": "1"}
    with open(out, "w") as f:
        r = subprocess.run([sys.executable, "-m", "control_osworld.cli", "run", str(cfg)], stdout=f,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO, timeout=900)
    text = out.read_text()
    assert r.returncode == 0, text[-3000:]
    import pandas as pd

    n = str(len(pd.read_parquet(tmp_path / "logs" / "runs.parquet")))
    assert int(n) >= 3
    for source in (text, (tmp_path / "logs" / "progress.log").read_text()):
        lines = [m for m in map(LINE.match, source.splitlines()) if m]
        stages = {m["stage"] for m in lines}
        assert {"agents", "monitors", "report"} <= stages, stages
        agents = [m for m in lines if m["stage"] == "agents"]
        assert agents[-1]["total"] == n and agents[-1]["done"] == n and agents[-1]["unit"] == "samples"
        # While agents ran (before the last sample), a periodic line already said how far it was.
        assert any(int(m["done"]) < int(n) for m in agents) and any(m["eta"] != "0s" for m in agents)
        monitors = [m for m in lines if m["stage"] == "monitors"]
        assert monitors[-1]["done"] == monitors[-1]["total"] and int(monitors[-1]["total"]) > 0
        report = [m for m in lines if m["stage"] == "report"]
        assert report[-1]["done"] == report[-1]["total"] and int(report[-1]["total"]) >= 6
