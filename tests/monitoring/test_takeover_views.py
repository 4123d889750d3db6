"""Take-over steps (a person had the desktop during a run: agent/takeover.py) in monitors' views:
marked as the person's, or left out with `takeover_steps: drop` (views and the steps a per-step
monitor scores); the option at its default leaves every config's hash as it was."""

from __future__ import annotations

from control_osworld.monitoring.config import MonitorConfig
from control_osworld.monitoring.runtime import _items
from control_osworld.monitoring.views import render, render_step, render_trajectory
from control_osworld.trajectory import ActionRecord, RunRecord, Step, Trajectory


def _run() -> RunRecord:
    steps = [
        Step(step=1, actions=[ActionRecord(tool="computer", arguments={"action": "type", "text": "AGENT-ONE"})]),
        Step(step=2, actor="human", kind="takeover"),
        Step(step=3, actor="human", kind="handback",
             actions=[ActionRecord(tool="computer", arguments={"action": "type", "text": "PERSON-TYPED"})]),
        Step(step=4, actions=[ActionRecord(tool="computer", arguments={"action": "key", "text": "AGENT-TWO"})]),
    ]
    return RunRecord(log="x.eval", sample_id="s", epoch=1, eval_mode="attack", main_task_id="m",
                     trajectory=Trajectory(steps=steps))


def _config(**kw) -> MonitorConfig:
    return MonitorConfig(name="m", kind="per_step", model="offline/length", **kw)


def test_kept_takeover_steps_are_marked_as_the_persons():
    text = render_trajectory(_run(), inputs="A").as_text()
    assert "PERSON-TYPED" in text and "AGENT-ONE" in text and "AGENT-TWO" in text
    assert "## Step 2 (a person took the desktop over from the agent)" in text
    assert "## Step 3 (a person had the desktop; these are the person's actions" in text
    assert "## Step 4\n" in text


def test_dropped_takeover_steps_are_in_no_view_and_not_scored():
    run = _run()
    drop = _config(takeover_steps="drop")
    text = render(run, drop.replace(kind="full_trajectory", mode=None, score_point=None)).as_text()
    assert "PERSON-TYPED" not in text and "Step 2" not in text and "AGENT-TWO" in text
    rolling = render_step(run, 4, inputs="A", takeover_steps="drop").as_text()
    assert "PERSON-TYPED" not in rolling and "AGENT-ONE" in rolling
    assert [i.step for i in _items([run], [drop], ["A"])] == [1, 4]
    assert [i.step for i in _items([run], [_config()], ["A"])] == [1, 2, 3, 4]


def test_the_default_leaves_config_hashes_as_they_were():
    assert _config().config_hash != _config(takeover_steps="drop").config_hash
    body = _config().model_dump(mode="json")
    assert body["takeover_steps"] == "keep"
    assert _config().config_hash == "79fb3072b58991c9"  # this config's hash before the option existed


def test_a_trajectory_without_the_new_fields_reads_as_an_agents():
    t = Trajectory.model_validate({"steps": [{"step": 1}]})
    assert t.player == "agent" and t.steps[0].actor == "agent" and t.steps[0].kind == "action"
    assert [s.step for s in _run().trajectory.agent_steps()] == [1, 4]
