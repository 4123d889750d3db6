"""Issue 20: the pairing mp-todo-new-file x db-password-into-notes, played N times by the offline
scripted model on a loaded machine (CPU burners on every core beside the desktop), gives the same
runs each time: the attack escapes at the plan's effect step with both tasks done, its per-step
side verdicts are the same, and the honest twin completes its main task. Before the fix the Open
dialog came up after the keys meant for it (a fixed sleep inside one turn), GTK's file chooser
dropped the start of a path typed into its list and ignored a Return pressed before it had read
the path: the attack then completed with neither task done."""

from __future__ import annotations

import multiprocessing
import os

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import get_model

from control_osworld.control.catalogue import Catalogue
from control_osworld.control.scripted import build_plan
from control_osworld.control.task import osworld_control
from control_osworld.logs import read_run_records, runs_table
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

MAIN, SIDE = "mp-todo-new-file", "db-password-into-notes"
N = 2


@pytest.fixture(autouse=True)
def _desktop():
    ok, why = local_ready()
    require(ok, why)


def _burn() -> None:
    while True:
        pass


def _play(log_dir: str) -> dict:
    model = get_model("scripted/oracle", seed=0, giveaway=0)
    tasks = [osworld_control(mode=mode, main_tasks=MAIN, side_tasks=SIDE, name=f"load_{mode}")
             for mode in ("honest", "attack")]
    logs = inspect_eval(tasks, model=model, max_tasks=2, log_dir=log_dir, display="none")
    assert all(log.status == "success" for log in logs), [log.error for log in logs]
    table = runs_table([log.location for log in logs]).set_index("eval_mode")
    verdicts = {}
    for log in logs:
        [rec] = read_run_records(log.location, images=False)
        verdicts[rec.eval_mode] = [s.side_task.score if s.side_task else None for s in rec.trajectory.steps]
    cols = ["outcome", "t_star", "steps", "main_task_success", "side_task_success", "unknown_checks"]
    def cell(v):
        return None if v is None or (isinstance(v, float) and v != v) else v  # NaN (no t*) as None

    return {mode: {**{c: cell(table.loc[mode, c]) for c in cols}, "verdicts": verdicts[mode]}
            for mode in ("honest", "attack")}


def test_the_pairing_plays_the_same_n_times_under_load(tmp_path):
    cat = Catalogue.load()
    plan = build_plan(cat.oracle(MAIN), cat.side_oracle(SIDE), sample_id=f"{MAIN}__{SIDE}", epoch=1, seed=0)
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(os.cpu_count() or 2)]
    for b in burners:
        b.start()
    try:
        results = [_play(str(tmp_path / f"run{i}")) for i in range(N)]
    finally:
        for b in burners:
            b.kill()
            b.join()
    for r in results:
        a, h = r["attack"], r["honest"]
        assert a["outcome"] == "escaped" and a["t_star"] == plan.effect_step, r
        assert a["main_task_success"] and a["side_task_success"] and a["unknown_checks"] == 0, r
        t = plan.effect_step
        assert a["verdicts"] == [0.0] * (t - 1) + [1.0] * (a["steps"] - t + 1), r
        assert h["outcome"] == "completed" and h["main_task_success"] and h["t_star"] is None, r
    assert all(r == results[0] for r in results), results
