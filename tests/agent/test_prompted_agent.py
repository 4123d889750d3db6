"""OSWorld's prompt agent (`-T policy=prompted`) with inspect's real OpenAI-compatible provider
(`openai-api/<server>/<model>`, as for a vLLM server) pointed at a loopback Chat Completions fake
that answers in OSWorld's formats, malformed replies included: in `pyautogui` with each
observation type, and in `computer_13`, the task is done end to end on the embedded desktop."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from PIL import Image

from control_osworld.agent import a11y
from control_osworld.control.task import osworld_control
from control_osworld.logs import read_run_records, runs_table
from tests.agent.fake_api import FakeChatAPI
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

DATA = Path(__file__).parent / "data"
NO_CODE = "I should type the note now."
PYAUTOGUI = [
    "The editor is open.\n```python\npyautogui.write('buy milk')\n```",
    NO_CODE,  # malformed: no code block; the parser's message goes back, the turn counts
    "```python\npyautogui.hotkey('ctrl', 's'\n```",  # code that does not parse: a tool error
    "Save it.\n```python\npyautogui.hotkey('ctrl', 's')\ntime.sleep(3)\n"
    "pyautogui.write('/home/user/Documents/todo.txt')\ntime.sleep(0.5)\npyautogui.press('enter')\ntime.sleep(2)\n```",
    "Saved.\n```DONE```",
]
COMPUTER_13 = [
    '```json\n{"action_type": "TYPING", "parameters": {"text": "buy milk"}}\n```',
    "Let me think about which key to press.",  # malformed
    '```json\n{"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "s"]}}\n```',
    '```json\n[{"action_type": "WAIT"}, {"action_type": "TYPING", "parameters": {"text": "/home/user/Documents/todo.txt"}},'
    ' {"action_type": "PRESS", "parameters": {"key": "enter"}}, {"action_type": "WAIT"}]\n```',
    "DONE",
]


def _run(tmp_path, monkeypatch, replies, **task_args):
    ok, why = local_ready()
    require(ok, why)
    with FakeChatAPI(replies) as api:
        monkeypatch.setenv("FAKEVLLM_BASE_URL", f"http://127.0.0.1:{api.port}/v1")
        monkeypatch.setenv("FAKEVLLM_API_KEY", "test-key")
        task = osworld_control(mode="honest", main_tasks="write_note", tasks_dir=str(DATA / "tasks"),
                               side_tasks_dir=str(DATA / "side_tasks"), policy="prompted", budget=10, **task_args)
        # a model name per test: inspect caches a model (and its client's base URL) by name
        name = f"open-weights-{task_args.get('action_space')}-{task_args.get('observation', 'screenshot')}"
        [log] = inspect_eval(task, model=f"openai-api/fakevllm/{name}", log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    return log, [r.body for r in api.requests if r.path.endswith("/chat/completions")]


def _parts(body, kind):
    last = body["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
    return [p for p in content if p["type"] == kind]


@pytest.mark.parametrize("observation", ["screenshot", "a11y_tree", "screenshot_a11y_tree", "som"])
def test_prompted_agent_in_pyautogui(tmp_path, monkeypatch, observation):
    replies = list(PYAUTOGUI)
    if observation == "som":  # the code may use tag_<i>, mark i's centre (upstream's som parsing)
        replies[0] = replies[0].replace("pyautogui.write('buy milk')",
                                        "pyautogui.write('buy milk')\nassert len(tag_1) == 2 and tag_1[0] >= 0")
    log, bodies = _run(tmp_path, monkeypatch, replies, action_space="pyautogui", observation=observation)
    [rec] = read_run_records(log.location)
    traj = rec.trajectory
    assert traj.outcome == "completed" and traj.submit_status == "done" and len(traj.steps) == len(PYAUTOGUI)
    row = runs_table([log.location]).iloc[0]
    assert row.main_task_success and row.action_space == "pyautogui" and row.observation == observation
    assert (row.policy, row.history) == ("prompted", 3)  # the runs table records the policy
    assert len(bodies) == len(PYAUTOGUI) and not any(b.get("tools") for b in bodies)  # a plain chat model
    assert bodies[0]["messages"][0]["role"] == "system" and "buy milk" in bodies[0]["messages"][0]["content"]
    first = traj.steps[0].actions[0]
    assert first.error is None and first.code == first.arguments["code"] and "tag_1=" not in first.code
    # step 2: no code -> the reply is recorded, its error goes back to the model in the next request
    assert [a.tool for a in traj.steps[1].actions] == ["reply"] and "no action found" in traj.steps[1].actions[0].error
    assert any("no action found in your reply" in p["text"] for p in _parts(bodies[2], "text"))
    assert traj.steps[1].visible_text == NO_CODE
    # step 3: code that does not parse -> a tool error, recorded, the run goes on
    assert traj.steps[2].actions[0].tool == "pyautogui" and traj.steps[2].actions[0].error
    assert traj.steps[3].actions[0].arguments["code"].startswith("pyautogui.hotkey('ctrl', 's')")
    assert traj.steps[-1].actions[-1].arguments == {"code": "DONE"}
    # history: at most 3 past turns (upstream's max_trajectory_length)
    assert sum(m["role"] == "assistant" for m in bodies[-1]["messages"]) == 3
    texts = "\n".join(p["text"] for p in _parts(bodies[0], "text"))
    images = _parts(bodies[0], "image_url")
    assert len(images) == (0 if observation == "a11y_tree" else 1)
    if observation in ("a11y_tree", "screenshot_a11y_tree"):
        assert a11y.TABLE_HEADER in texts
    if observation == "som":
        assert a11y.SOM_HEADER in texts
    # monitors' S: the raw screen as captured, whatever the agent was shown
    sizes = {Image.open(io.BytesIO(rec.images[i])).size for s in traj.steps
             for i in (s.screenshot_before_id, s.screenshot_after_id) if i}
    assert sizes == {(traj.screen_width, traj.screen_height)}


def test_prompted_agent_in_computer_13(tmp_path, monkeypatch):
    log, bodies = _run(tmp_path, monkeypatch, COMPUTER_13, action_space="computer_13")
    [rec] = read_run_records(log.location, images=False)
    traj = rec.trajectory
    assert traj.outcome == "completed" and runs_table([log.location]).iloc[0].main_task_success
    assert [a.tool for a in traj.steps[1].actions] == ["reply"]
    assert traj.steps[3].actions[1].arguments == {"action_type": "TYPING", "parameters": {"text": "/home/user/Documents/todo.txt"}}
    assert traj.steps[-1].actions[-1].arguments == {"action_type": "DONE"}
