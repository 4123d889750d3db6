"""The one classifier of desktop failures (control_osworld/desktop/errors.py): what the agent can
cause is a tool error, what it cannot stays a sample error. Fast: no desktop."""

from __future__ import annotations

import asyncio

import pytest
from inspect_ai.tool import ToolError

from control_osworld.agent.tools import _agents_doing
from control_osworld.desktop.client import command_stream, command_truncated
from control_osworld.desktop.errors import DesktopDied, DesktopError, DesktopHung, agent_fault
from control_osworld.faults import classify_error

CASES = [
    (DesktopError("POST /step -> 504: action timed out after 3 s; executor restarted", 504), "timeout"),
    (DesktopError("POST /execute -> 400: cwd is not a directory: /nope", 400), "bad_request"),
    (DesktopError("POST /file -> 413: larger than 536870912 bytes", 413), "too_large"),
    (DesktopError("POST /execute -> 500: 'utf-8' codec can't decode byte 0xff in position 0", 500),
     "undecodable_output"),  # upstream's server
    (DesktopError("POST /step -> 500: action executor died while running the action", 500), "executor_killed"),
    (DesktopError("POST /step -> 500: action executor failed to start (is pyautogui installed? "
                  "is Xvfb running?)", 500), None),  # never started, or Xvfb gone: the desktop's
    (DesktopError("POST /screenshot -> 500: RuntimeError: framebuffer has 16 bits per pixel", 500), None),
    (DesktopError("GET /healthz -> 401: this server needs the harness's token", 401), None),
    (DesktopDied("POST /step: desktop unreachable (ConnectError)"), None),
    (DesktopHung("POST /step: no answer in time (ReadTimeout)", 504), None),  # the trusted server stuck
    (RuntimeError("anything else"), None),
]


@pytest.mark.parametrize("error,kind", CASES, ids=[str(i) for i in range(len(CASES))])
def test_agent_fault_classifies_each_failure(error, kind):
    assert agent_fault(error) == kind


def test_the_computer_tool_turns_agent_faults_into_tool_errors_and_lets_the_rest_raise():
    async def fail(e):
        raise e

    with pytest.raises(ToolError, match=r"\(timeout\)"):
        asyncio.run(_agents_doing(None, None, fail(DesktopError("POST /step -> 504: timed out", 504))))
    with pytest.raises(DesktopDied):  # the trusted server gone: a sample error (desktop_died)
        asyncio.run(_agents_doing(None, None, fail(DesktopDied("POST /step: desktop unreachable"))))
    with pytest.raises(DesktopError):
        asyncio.run(_agents_doing(None, None, fail(DesktopError("POST /step -> 500: Xvfb gone", 500))))
    # what stays an exception is still classified as the desktop's, with its kind
    assert classify_error("DesktopDied: POST /step: desktop unreachable") == "desktop_died"


def test_command_streams_are_exact_bytes():
    assert command_stream({"output": "\ufffd", "output_b64": "/w=="}) == b"\xff"
    assert command_stream({"output": "caf\u00e9"}) == "café".encode()
    assert command_stream({"error": "x"}, "error") == b"x" and command_stream({}, "error") == b""
    assert command_truncated({"output_truncated": True}) and command_truncated({"truncated": True})
    assert not command_truncated({"output": "y"}) and command_truncated({"error_truncated": True}, "error")


def test_every_row_of_the_docs_table_names_tests_that_exist():
    """docs/integrity.md, "failure | who can cause it | what it becomes | test": each row names
    at least one test, and each named test is a function of the file it names."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "integrity.md").read_text()
    section = text.split("## What the agent can provoke is not an infrastructure error", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith(("| failure", "|---"))]
    assert len(rows) >= 12, rows
    last = None
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] in ("agent", "harness", "agent (its tool call)"), row
        names = re.findall(r"`((?:tests/[\w/]+/)?(\w+\.py))::(\w+)`", cells[3])
        assert names, row
        for full, file, func in names:
            path = root / full if full.startswith("tests/") else None
            if path is None:  # a bare file name: the last full path with that name
                path = last if last is not None and last.name == file else root / "tests" / "desktop" / file
            else:
                last = path
            assert re.search(rf"^(?:async )?def {func}\(", path.read_text(), re.M), (path, func)
