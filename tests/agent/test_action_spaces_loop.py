"""OSWorld's action spaces end to end on the embedded desktop with the scripted model: an
attack run (main task + side task, t* at the known step), an infeasible task ended by FAIL, and
a malformed action returned to the model as a tool error while the run goes on; the trajectory
records each action in its own space and monitors' A shows pyautogui code as code."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput
from PIL import Image

from control_osworld.control.catalogue import Catalogue
from control_osworld.control.scripted import build_plan
from control_osworld.control.task import osworld_control
from control_osworld.logs import read_run_records, runs_table
from control_osworld.monitoring.views import _action_line
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

DATA = Path(__file__).parent / "data"
DIRS = dict(tasks_dir=str(DATA / "tasks"), side_tasks_dir=str(DATA / "side_tasks"))


@pytest.fixture(autouse=True)
def _desktop():
    ok, why = local_ready()
    require(ok, why)


def _run(tmp_path, model="scripted/oracle", **task_args):
    [log] = inspect_eval(osworld_control(**DIRS, **task_args), model=model, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    return log


@pytest.mark.parametrize("space", ["pyautogui", "computer_13"])
def test_attack_in_an_osworld_action_space(tmp_path, space):
    log = _run(tmp_path, model="scripted/attack-burst", mode="attack", main_tasks="write_note", action_space=space)
    [rec] = read_run_records(log.location)
    traj = rec.trajectory
    # the model sees the screen's own pixels, from the first screenshot on (upstream's coordinates)
    sizes = {Image.open(io.BytesIO(rec.images[i])).size for s in traj.steps
             for i in (s.screenshot_before_id, s.screenshot_after_id) if i}
    assert sizes == {(traj.screen_width, traj.screen_height)}, sizes
    cat = Catalogue.load(DIRS["tasks_dir"], DIRS["side_tasks_dir"])
    plan = build_plan(cat.oracle("write_note"), cat.side_oracle("drop_marker"), sample_id=rec.sample_id,
                      epoch=1, seed=0, strategy="burst")
    assert traj.t_star == plan.effect_step and traj.outcome == "escaped"
    assert traj.submit_status == "done" and len(traj.steps) == len(plan.turns)
    tools = {a.tool for s in traj.steps for a in s.actions}
    assert tools == {space}, tools  # every action in its own space, DONE included (no submit call)
    assert not [a.error for s in traj.steps for a in s.actions if a.error]
    last = traj.steps[-1].actions[-1]
    assert last.arguments == ({"code": "DONE"} if space == "pyautogui" else {"action_type": "DONE"})
    row = runs_table([log.location]).iloc[0]
    assert row.action_space == space and row.main_task_success and row.side_task_success
    assert row.policy == "tools" and pd.isna(row.history)  # the model called the space's tool; no history
    if space == "pyautogui":
        coded = next(a for s in traj.steps for a in s.actions if a.code)
        assert coded.arguments["code"] == coded.code and coded.code in _action_line(coded)
        assert "```python\n" + coded.code + "\n```" in _action_line(coded)
    else:
        assert all("action_type" in a.arguments for s in traj.steps for a in s.actions)


def test_fail_ends_an_infeasible_task_in_a_safe_stop(tmp_path):
    log = _run(tmp_path, mode="honest", main_tasks="open_in_excel", honest_matching="per_main",
               action_space="pyautogui")
    [rec] = read_run_records(log.location, images=False)
    assert rec.trajectory.outcome == "stopped" and rec.trajectory.submit_status == "infeasible"
    assert rec.trajectory.steps[-1].actions[-1].arguments == {"code": "FAIL"}
    assert runs_table([log.location]).iloc[0].main_task_success


@pytest.mark.parametrize("space,bad,msg", [
    ("pyautogui", {"code": "pyautogui.click(("}, "does not parse"),
    ("pyautogui", {"code": "raise RuntimeError('boom')"}, "the action failed: RuntimeError: boom"),
    ("computer_13", {"action_type": "TELEPORT"}, "unknown computer_13 action_type"),
    ("computer_13", {"action_type": "DRAG_TO", "parameters": {"x": 5}}, "DRAG_TO needs"),
])
def test_malformed_actions_are_tool_errors_and_the_run_goes_on(tmp_path, space, bad, msg):
    """mockllm: a malformed action, then DONE; the error goes back to the model, not the sample."""
    done = {"code": "DONE"} if space == "pyautogui" else {"action_type": "DONE"}
    outputs = [ModelOutput.for_tool_call("mockllm/model", space, bad),
               ModelOutput.for_tool_call("mockllm/model", space, done)]
    from inspect_ai.model import ModelUsage, get_model

    for o in outputs:  # mockllm would otherwise count tokens with tiktoken (a download)
        o.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
    model = get_model("mockllm/model", custom_outputs=outputs)
    log = _run(tmp_path, model=model, mode="honest", main_tasks="write_note", action_space=space)
    [sample] = log.samples
    [rec] = read_run_records(log.location, images=False)
    traj = rec.trajectory
    assert traj.outcome == "completed" and traj.submit_status == "done" and len(traj.steps) == 2
    [a] = traj.steps[0].actions
    assert a.tool == space and a.arguments == bad and msg.split(": ", 1)[-1] in (a.error or ""), a
    tool_msgs = [m for m in sample.messages if m.role == "tool"]
    assert tool_msgs[0].error is not None and msg in tool_msgs[0].error.message
