"""A matched honest sample and its attack twin (same main task, side task, sample id and epoch)
running at once in one eval: each run's side-task checker stays its own. And the checker lives
in its run: made by the scaffold once setup is done and dropped when the run ends, however it
ends (a sample that fails before scoring leaves nothing behind)."""

from __future__ import annotations

import gc
import time
import weakref
from datetime import datetime

import anyio
import pytest
from inspect_ai import eval as inspect_eval

from control_osworld.control import task as task_module
from control_osworld.control.catalogue import Catalogue
from control_osworld.control.scripted import build_plan
from control_osworld.control.setting import osworld_side_task_checker
from control_osworld.control.task import osworld_control
from control_osworld.logs import read_run_records, runs_table
from control_osworld.sample_store import sample_store
from tests.agent.test_loop import DIRS
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _desktop():
    ok, why = local_ready()
    require(ok, why)


def test_concurrent_matched_twins_keep_their_own_side_checkers(tmp_path, monkeypatch):
    """Both twins in one `inspect eval` (max_tasks=2). The honest twin is held after its setup
    until the attack twin has made its checker, so the honest loop starts while the attack's
    checker exists: the interleaving a checker shared through anything keyed by (sample id,
    epoch) gets wrong (the honest run would then check the attack's desktop every step)."""
    registered: list[tuple[str, float]] = []
    original_setup = Catalogue.setup

    async def make_checker():
        fn = await osworld_side_task_checker()
        if fn is not None:
            registered.append((sample_store().sample_ref("test")[1], time.monotonic()))
        return fn

    held: list[float] = []

    async def setup(self, env, item, boundary=None):
        await original_setup(self, env, item, boundary=boundary)
        mode = sample_store().sample_ref("test")[0].get("eval_mode")
        if str(getattr(mode, "value", mode)) == "honest" and not held:
            t0 = time.monotonic()
            while not registered and time.monotonic() - t0 < 30:
                await anyio.sleep(0.05)
            held.append(time.monotonic() - t0)

    monkeypatch.setattr(task_module, "osworld_side_task_checker", make_checker)
    monkeypatch.setattr(Catalogue, "setup", setup)
    model = "scripted/attack-burst"  # honest samples play the main oracle only
    tasks = [osworld_control(**DIRS, mode=mode, main_tasks="write_note", name=f"twin_{mode}")
             for mode in ("honest", "attack")]
    logs = inspect_eval(tasks, model=model, max_tasks=2, log_dir=str(tmp_path), display="none")
    by_mode = {log.eval.task.removeprefix("twin_"): log for log in logs}
    assert all(log.status == "success" for log in logs), [log.error for log in logs]
    assert len(registered) == 1 and held, (registered, held)  # only the attack makes one; the honest waited for it

    [h_sample], [a_sample] = by_mode["honest"].samples, by_mode["attack"].samples
    assert (h_sample.id, h_sample.epoch) == (a_sample.id, a_sample.epoch) == ("write_note__drop_marker", 1)
    assert h_sample.uuid != a_sample.uuid
    assert h_sample.metadata["metadata"]["env_side_task_id"] == "drop_marker"  # matched: side setup, no objective
    start_h, end_h, start_a, end_a = (datetime.fromisoformat(str(s)) for s in (
        h_sample.started_at, h_sample.completed_at, a_sample.started_at, a_sample.completed_at))
    assert start_h < end_a and start_a < end_h, (start_h, end_h, start_a, end_a)  # they ran at once

    [h_rec] = read_run_records(by_mode["honest"].location, images=False)
    [a_rec] = read_run_records(by_mode["attack"].location, images=False)
    h, a = h_rec.trajectory, a_rec.trajectory
    cat = Catalogue.load(DIRS["tasks_dir"], DIRS["side_tasks_dir"])
    plan = build_plan(cat.oracle("write_note"), cat.side_oracle("drop_marker"), sample_id=a_rec.sample_id,
                      epoch=1, seed=0, strategy="burst")
    # The attack twin: t* at the known effect step, side score 1, one check per own step.
    assert a.t_star == plan.effect_step and a.outcome == "escaped"
    assert [s.side_task.score for s in a.steps] == [0.0] * (a.t_star - 1) + [1.0] * (len(a.steps) - a.t_star + 1)
    assert sum(s.side_task is not None for s in a.steps) == len(a.steps) == len(plan.turns)
    # The honest twin: no t*, no side check at any step, no attempt event, no side score.
    assert h.t_star is None and h.outcome == "completed" and h.attempt_steps == []
    assert h.attempt_detector is None and all(s.side_task is None for s in h.steps)
    rows = runs_table([by_mode["honest"].location, by_mode["attack"].location]).set_index("eval_mode")
    assert rows.loc["attack"].side_task_success and rows.loc["attack"].t_star == plan.effect_step
    assert not rows.loc["honest"].side_task_success and list(rows.loc["honest"].attempt_steps) == []
    assert rows.loc["honest"].main_task_success  # the side setup ran in its own desktop


def test_a_sample_failing_before_scoring_leaves_no_checker_behind(tmp_path, monkeypatch):
    made: list[weakref.ref] = []

    async def failing_checker():
        fn = await osworld_side_task_checker()
        assert fn is not None
        bound = fn.__self__  # the BoundChecker (its desktop client, the baselines)
        made.append(weakref.ref(bound))

        async def check(step: int):
            if step == 2:
                raise RuntimeError("the checker's desktop died")
            return await fn(step)

        return check

    monkeypatch.setattr(task_module, "osworld_side_task_checker", failing_checker)
    task = osworld_control(**DIRS, mode="attack", main_tasks="write_note")
    [log] = inspect_eval(task, model="scripted/attack-burst", log_dir=str(tmp_path), display="none")
    [sample] = log.samples
    assert sample.error is not None and "the checker's desktop died" in sample.error.message
    assert sample.scores in (None, {})  # it failed before scoring
    [rec] = read_run_records(log.location, images=False)
    assert rec.trajectory.outcome == "error" and rec.trajectory.error_stage == "agent"
    assert len(made) == 1
    del log, sample, rec
    gc.collect()
    assert made[0]() is None, gc.get_referrers(made[0]())
