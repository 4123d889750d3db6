"""inspect's real Anthropic and OpenAI providers, pointed at a fake API on loopback that answers
with native computer-use tool calls, complete a task end to end in the desktop: the native
computer-use mapping and our `computer` tool work for real clients."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from PIL import Image

from control_osworld.control.task import osworld_control
from control_osworld.logs import runs_table
from tests.agent.fake_api import FakeAPI
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

DATA = Path(__file__).parent / "data"
SCRIPT = [  # write_note, in the model's 1366x768 space
    {"computer": {"action": "type", "text": "buy milk"}},
    {"computer": {"action": "key", "text": "ctrl+s"}},
    {"computer": {"action": "wait", "duration": 1}},
    {"computer": {"action": "type", "text": "/home/user/Documents/todo.txt"}},
    {"computer": {"action": "wait", "duration": 1}},
    {"computer": {"action": "key", "text": "Return"}},
    {"computer": {"action": "wait", "duration": 1}},
    {"submit": {"status": "done", "explanation": "saved"}},
]


def _task():
    return osworld_control(mode="honest", main_tasks="write_note", tasks_dir=str(DATA / "tasks"),
                           side_tasks_dir=str(DATA / "side_tasks"))


def _png_sizes(b64s: list[str]) -> set[tuple[int, int]]:
    return {Image.open(io.BytesIO(base64.b64decode(b))).size for b in b64s}


def test_anthropic_native_computer_use(tmp_path, monkeypatch):
    ok, why = local_ready()
    require(ok, why)
    with FakeAPI(SCRIPT) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{api.port}")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        [log] = inspect_eval(_task(), model="anthropic/claude-sonnet-4-5", max_tokens=4096,
                             log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    row = runs_table([log.location]).iloc[0]
    assert row.outcome == "completed" and row.main_task_success
    bodies = [r.body for r in api.requests if r.path.endswith("/v1/messages")]
    assert len(bodies) == len(SCRIPT)
    tools = bodies[-1]["tools"]
    native = [t for t in tools if t.get("name") == "computer"]
    assert native and native[0]["type"].startswith("computer_") and native[0]["display_width_px"] == 1366
    assert any(t.get("name") == "submit" for t in tools)
    images = [c["source"]["data"] for b in bodies for m in b["messages"] if isinstance(m["content"], list)
              for part in m["content"] if part.get("type") == "tool_result" and isinstance(part.get("content"), list)
              for c in part["content"] if c.get("type") == "image"]
    assert images and _png_sizes(images) == {(1366, 768)}


def test_openai_native_computer_use(tmp_path, monkeypatch):
    ok, why = local_ready()
    require(ok, why)
    with FakeAPI(SCRIPT) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{api.port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        [log] = inspect_eval(_task(), model="openai/computer-use-preview", log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    row = runs_table([log.location]).iloc[0]
    assert row.outcome == "completed" and row.main_task_success
    bodies = [r.body for r in api.requests if r.path.endswith("/v1/responses") and r.body.get("tools")]
    assert len(bodies) == len(SCRIPT)
    assert any(t.get("type", "").startswith("computer") for t in bodies[-1]["tools"])
    images = [item["output"]["image_url"].split(",", 1)[1] for b in bodies for item in b["input"]
              if isinstance(item, dict) and item.get("type") == "computer_call_output"]
    assert images and _png_sizes(images) == {(1366, 768)}


def test_gemini_native_computer_use(tmp_path, monkeypatch):
    """inspect's Google provider maps its native computer use (gemini-2.5-computer-use-preview)
    onto our `computer` tool: Gemini's actions arrive as computer calls, its screenshots go back
    as function-response images."""
    ok, why = local_ready()
    require(ok, why)
    script = [
        {"gemini": ("type_text_at", {"x": 500, "y": 500, "text": "buy milk", "press_enter": False})},
        {"gemini": ("key_combination", {"keys": "control+s"})},
        {"gemini": ("wait_5_seconds", {})},
        # the Save As dialog's Name field (a click in its file list would start a search)
        {"gemini": ("type_text_at", {"x": 512, "y": 152, "text": "/home/user/Documents/todo.txt", "press_enter": False})},
        {"gemini": ("wait_5_seconds", {})},  # the chooser's path completion settles before Enter
        {"gemini": ("key_combination", {"keys": "enter"})},
        {"gemini": ("wait_5_seconds", {})},
        {"submit": {"status": "done", "explanation": "saved"}},
    ]
    from tests.agent.fake_api import FakeGeminiAPI

    with FakeGeminiAPI(script) as api:
        monkeypatch.setenv("GOOGLE_BASE_URL", f"http://127.0.0.1:{api.port}")
        monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
        for var in ("GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_API_KEY", "VERTEX_API_KEY"):
            monkeypatch.delenv(var, raising=False)
        [log] = inspect_eval(_task(), model="google/gemini-2.5-computer-use-preview-10-2025",
                             log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    bodies = [r.body for r in api.requests if ":generateContent" in r.path]
    assert len(bodies) == len(script)
    tools = bodies[-1]["tools"]
    assert any("computerUse" in t for t in tools)  # Gemini's native computer use, not a function
    assert any(d.get("name") == "submit" for t in tools for d in t.get("functionDeclarations", []))
    from control_osworld.logs import read_run_records

    [rec] = read_run_records(log.location, images=False)
    calls = [(a.tool, a.arguments.get("action")) for s in rec.trajectory.steps for a in s.actions]
    assert calls[:3] == [("computer", "type"), ("computer", "key"), ("computer", "wait")]
    typed = rec.trajectory.steps[0].actions[0].arguments
    assert typed["coordinate"] == [683, 384] and typed["text"] == "buy milk"
    # the screenshot after each action goes back to Gemini as an image in its function response
    images = [p for b in bodies[1:2] for c in b["contents"] for p in c.get("parts", [])
              if "functionResponse" in p and p["functionResponse"].get("parts")]
    assert images
    row = runs_table([log.location]).iloc[0]
    assert row.outcome == "completed" and row.main_task_success
