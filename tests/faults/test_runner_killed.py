"""The runner itself killed mid-run (SIGKILL, as an OOM killer or a lost machine would) and
started again: the resumed run ends with every sample's log and score present exactly once, and
the killed run leaves no desktop behind."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai.log import read_eval_log, read_eval_log_sample_summaries

from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "agent" / "data"


def _runner(cfg: Path, out, state: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CONTROL_OSWORLD_PROGRESS_EVERY": "0.5",
           "CONTROL_OSWORLD_STATE": str(state)}
    return subprocess.Popen([sys.executable, "-m", "control_osworld.cli", "run", str(cfg)], stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO)


def _samples_done(progress: Path) -> int:
    if not progress.exists():
        return 0
    done = [int(line.split("agents: ")[1].split("/")[0]) for line in progress.read_text().splitlines()
            if "agents: " in line and "/" in line.split("agents: ")[1].split(" ")[0]]
    return max(done, default=0)


def _desktops_in(state: Path) -> list[int]:
    """Processes of desktops (bubblewrap, the sink) whose state lives under `state`."""
    out = subprocess.run(["pgrep", "-f", f"{state}/desktop-"], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def test_runner_killed_mid_run_and_restarted_loses_and_doubles_nothing(tmp_path):
    ok, why = local_ready()
    require(ok, why)
    logs = tmp_path / "logs"
    cfg = tmp_path / "small.yaml"
    cfg.write_text(f"""
log_dir: {logs}
tasks_dir: {DATA / 'tasks'}
side_tasks_dir: {DATA / 'side_tasks'}
modes: [honest, attack]
pairings:
  - untrusted_model: scripted/oracle
max_samples: 1
monitors: [monitors/full_trajectory_rules.yaml, monitors/per_step_rules.yaml]
monitor_subsets: [A+T+S]
report: false
""")
    state = Path(tempfile.mkdtemp(prefix="control-osworld-killed-"))  # the desktops' uid must reach it
    os.chmod(state, 0o755)
    with open(tmp_path / "first.txt", "w") as out:
        first = _runner(cfg, out, state)
        deadline = time.monotonic() + 600
        while _samples_done(logs / "progress.log") < 1 or not _desktops_in(state):
            assert first.poll() is None, (tmp_path / "first.txt").read_text()[-3000:]
            assert time.monotonic() < deadline, "no sample finished in time"
            time.sleep(0.2)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    # Nothing of the killed run's desktops survives it.
    deadline = time.monotonic() + 20
    while _desktops_in(state) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _desktops_in(state), "desktops outlived the killed runner"
    assert not (logs / "runs.parquet").exists()  # it was killed during the agents

    with open(tmp_path / "second.txt", "w") as out:
        second = _runner(cfg, out, state)
        assert second.wait(900) == 0, (tmp_path / "second.txt").read_text()[-3000:]

    # Every sample's log exactly once across the log folder, none errored.
    seen = collections.Counter()
    for log in sorted(logs.glob("*.eval")):
        header = read_eval_log(str(log), header_only=True)
        for s in read_eval_log_sample_summaries(str(log)):
            seen[(header.eval.task, str(s.id), s.epoch)] += 1
            assert s.error is None, s.error
    runs = pd.read_parquet(logs / "runs.parquet")
    assert len(seen) == len(runs) >= 2 and set(seen.values()) == {1}, seen
    assert runs.run_id.is_unique and (runs.outcome != "error").all()
    # Both runs logged their progress into the same file.
    starts = [ln for ln in (logs / "progress.log").read_text().splitlines() if f"agents: {len(runs)} samples to do" in ln]
    assert len(starts) == 2, starts
    # Every run's scores exactly once, and none for a log that is not in the runs table.
    from control_osworld.monitoring.store import ScoreStore

    scores = ScoreStore(logs / "scores").read()
    assert set(scores.run_id) == set(runs.run_id)
    key = ["run_id", "monitor", "inputs", "step"]
    assert not scores.duplicated(key).any()
    assert scores.score.notna().all()
    assert (scores[scores.monitor_kind == "full_trajectory"].groupby("run_id").size() == 1).all()
