"""Take-over during a run (`live_view="control"`), in a real headless Chromium: the person
presses "Take over", types into the agent's editor, presses "Hand back"; the trajectory has the
take-over and the hand-back as steps of their own (`actor: human`, the person's typing as a
`type` action), the agent's steps after them, and input sent before the take-over (the gate
closed) never reached the desktop."""

from __future__ import annotations

import re
import threading
import time

import pytest

from control_osworld.control.task import osworld_control
from control_osworld.desktop.human_input import read_events
from control_osworld.logs import read_run_records, runs_table
from control_osworld.progress import progress_log
from tests.desktop.cdp import Browser
from tests.desktop.test_human_run import DIRS, press
from tests.desktop.test_live_view import _require_view_tools
from tests.desktop.test_takeover import type_text, wait_for


def accepting(b: Browser, button: str) -> bool:
    return bool(b.eval(f"(() => {{ const s = window.pageState; return !!(s && s.accepting.includes('{button}') "
                       "&& window.vncConnected); })()"))


@pytest.mark.slow
@pytest.mark.desktop
def test_a_person_takes_over_and_hands_back_during_a_run(tmp_path):
    _require_view_tools()
    from inspect_ai import eval as inspect_eval

    from control_osworld.desktop.liveview import VIEW_BASE

    result: dict = {}

    def run() -> None:
        try:
            with progress_log(tmp_path / "progress.log"):
                [result["log"]] = inspect_eval(
                    osworld_control(mode="honest", main_tasks="write_note", live_view="control", **DIRS),
                    model="scripted/oracle", log_dir=str(tmp_path / "logs"), display="none")
        except BaseException as e:
            result["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    desk, url = wait_for(lambda: (m := re.search(r"take-over page of sample \S+ \(desktop (\S+)\): (\S+)",
                                                 (tmp_path / "progress.log").read_text()
                                                 if (tmp_path / "progress.log").exists() else "")) and m.groups(),
                         timeout=180, what=lambda: f"the take-over URL in the progress log ({result.get('error')!r})")
    b = Browser(width=1280, height=800)
    try:
        b.call("Page.enable")
        b.call("Page.navigate", url=url)
        wait_for(lambda: accepting(b, "take_over"), timeout=60, what="the Take over button")
        # before the take-over the gate is closed: a page that sends keys anyway reaches nothing
        b.eval("window.rfb.viewOnly = false; window.rfb.focus(); true")
        type_text(b, "zzz")
        press(b, "take-over")
        wait_for(lambda: accepting(b, "hand_back"), timeout=120, what="the loop's take-over (Hand back button)")
        time.sleep(0.6)  # the page lets input through once it has the desktop
        b.eval("window.rfb.focus(); true")
        type_text(b, "hello ")
        time.sleep(0.5)
        # the trusted side's record: the keys sent before the take-over were dropped (never
        # injected), the person's were not
        [record] = list(VIEW_BASE.glob(f"{desk}-*/events.jsonl"))
        keys = [(e["name"], bool(e.get("dropped"))) for e in read_events(record) if e["type"] == "key" and e["down"]]
        assert [k for k in keys if k[0] == "z"] == [("z", True)] * 3, keys
        assert [k for k in keys if k[0] in ("h", "e", "l", "o")] == [(c, False) for c in "hello"], keys
        press(b, "hand-back")
        th.join(300)
        assert not th.is_alive() and "error" not in result, result.get("error")
    finally:
        b.close()
    log = result["log"]
    assert log.status == "success", log.error
    [rec] = read_run_records(log.location)
    traj = rec.trajectory
    kinds = [(s.step, s.actor, s.kind) for s in traj.steps]
    assert [s.step for s in traj.steps] == list(range(1, len(kinds) + 1))
    k = next(i for i, s in enumerate(traj.steps) if s.kind == "takeover")  # before the agent's next turn
    assert kinds[k:k + 2] == [(k + 1, "human", "takeover"), (k + 2, "human", "handback")], kinds
    assert all(x[1:] == ("agent", "action") for x in kinds[:k] + kinds[k + 2:]) and len(kinds) > 3
    hand = traj.steps[k + 1]
    assert [a.arguments for a in hand.actions] == [{"action": "type", "text": "hello "}]
    assert hand.actions[0].code and hand.screenshot_after_id in rec.images
    assert traj.player == "agent" and len(traj.agent_steps()) == len(kinds) - 2
    assert traj.outcome == "completed" and traj.outcome_step == kinds[-1][0]
    typed = next(m for m in log.samples[0].messages if "A person took over the desktop" in (m.text or ""))
    assert "type hello" in typed.text  # the agent is told, with the screen after
    assert not list(VIEW_BASE.glob(f"{desk}-*"))  # the view ended with the sample
    row = runs_table([log.location]).iloc[0]
    assert row.player == "agent" and row.takeover_steps == 2 and row.steps == len(kinds)
