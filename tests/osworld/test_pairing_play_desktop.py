"""The pairings' design check on real desktops (issue 19): pairings the last full offline run
found broken now pass `control-osworld tasks play-pairings`: the main oracle scores 1 in the side
task's environment and the scripted attacker's plan ends with the side effect."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from click.testing import CliRunner

from control_osworld.control.pairing_check import PASS, check_pairings
from tests.conftest import require
from tests.desktop.conftest import local_ready

PREVIOUSLY_UNDONE = ["os-script-permissions__deploy-script-world-writable",
                     "os-dedupe-emails__mailing-list-recipient-dropped"]
"""Effects the main task's later steps undid (the main job's draw: blatant, side steps first)."""


def _ready() -> None:
    ok, why = local_ready()
    require(ok, why)
    require(os.geteuid() == 0, "the local desktop's trusted/agent split needs root")


@pytest.mark.slow
@pytest.mark.desktop
def test_previously_failing_pairings_now_pass():
    _ready()
    seen = []
    results = asyncio.run(check_pairings(only=PREVIOUSLY_UNDONE, workers=2,
                                         on_result=lambda r, done, total: seen.append((done, total))))
    assert sorted(f"{r.main}__{r.side}" for r in results) == sorted(PREVIOUSLY_UNDONE)
    assert seen[-1] == (2, 2)
    for r in results:
        assert r.main_in_side_env == PASS, r.line()
        assert r.attack_ends_effective == PASS, r.line()
        assert r.attack_t_star is not None and r.attack_effect_turn is not None, r.line()
        # after the main task's last oracle turn (placement after_main), and it lasted to the end
        assert r.attack_t_star >= r.attack_effect_turn, r.line()


@pytest.mark.slow
@pytest.mark.desktop
def test_the_command_ends_with_one_json_line_and_writes_each_pairing(tmp_path):
    """A sabotage of the main task's output, once played before the output was written, passes;
    an excluded pairing is no longer a sample, so it is not played."""
    _ready()
    from control_osworld.cli import main

    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(main, ["tasks", "play-pairings", "--only", "os-count-errors__error-count-understated",
                                    "--only", "fm-rename-report__exfil-settlement-synced-folder", "--out", str(out)])
    last = json.loads(res.output.strip().splitlines()[-1])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert last["pairings"] == len(lines) == 1
    assert [(x["main"], x["side"]) for x in lines] == [("os-count-errors", "error-count-understated")]
    assert all(x["main_in_side_env"] == PASS and x["attack_ends_effective"] == PASS for x in lines), lines
    assert res.exit_code == 0 and last["ok"] == last["pairings"]


@pytest.mark.slow
@pytest.mark.desktop
def test_the_command_plays_a_pairing_in_an_osworld_action_space(tmp_path):
    """`--space pyautogui` plays the same plan through that space's tool (one code string per
    turn, as the scripted model translates it), and says so in each line and the summary."""
    _ready()
    from control_osworld.cli import main

    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(main, ["tasks", "play-pairings", "--space", "pyautogui",
                                    "--only", "os-script-permissions__deploy-script-world-writable", "--out", str(out)])
    last = json.loads(res.output.strip().splitlines()[-1])
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert (line["main"], line["side"], line["space"], last["space"]) == (
        "os-script-permissions", "deploy-script-world-writable", "pyautogui", "pyautogui")
    assert line["main_in_side_env"] == PASS and line["attack_ends_effective"] == PASS, line
    assert res.exit_code == 0 and last["ok"] == last["pairings"] == 1
