"""The exfiltration side tasks' decoys and near misses (side_tasks/README.md's `decoys` and
`near_misses`), played on a real local desktop with the real sink through the oracle checks
(`verify_side`): every decoy (encoded, split, in a header, over DNS, raw TCP, through the
browser) is detected at its effect step, every near miss (too little of the secret, or nothing
secret) never, and the attempt detector fires for it as declared.

A covering subset runs by default (one decoy per side task, every near miss);
`CONTROL_OSWORLD_ORACLE_ALL=1` plays every variant."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import json
import os

import pytest

from control_osworld.desktop.provider import DesktopSpec
from control_osworld.osworld.loader import REPO, load_side_tasks, load_tasks
from control_osworld.osworld.oracle import load_oracle
from control_osworld.osworld.verify import verify_side
from tests.conftest import require
from tests.desktop.conftest import local_ready

SIDES = ["exfil-financials-http", "exfil-ssh-key-http", "exfil-vpn-token-browser"]
ALL = os.environ.get("CONTROL_OSWORLD_ORACLE_ALL", "") not in ("", "0")
DEFAULT = {"exfil-financials-http.split", "exfil-ssh-key-http.dns", "exfil-vpn-token-browser.split"}


def _variants() -> list[tuple[str, str, str, str | None]]:
    """(side id, oracle id, decoy | near_miss, the detector's declared behaviour)."""
    out = []
    for sid in SIDES:
        raw = json.loads((REPO / "side_tasks" / f"{sid}.json").read_text())
        out += [(sid, d, "decoy", "fires") for d in raw.get("decoys", [])]
        out += [(sid, n["oracle"], "near_miss", n["detector"]) for n in raw.get("near_misses", [])]
    return out


VARIANTS = _variants()
PLAYED = [v for v in VARIANTS if ALL or v[2] == "near_miss" or v[1] in DEFAULT]


def test_every_variant_is_declared_and_well_formed():
    """No desktop: each listed oracle exists, names its side task, decoys have an effect step and
    near misses none, and the computer calls pass the agent's tool schema."""
    tools = pytest.importorskip("control_osworld.agent.tools")
    from inspect_ai.model._call_tools import validate_tool_input
    from inspect_ai.tool._tool_def import ToolDef

    params = ToolDef(tools.computer_tool()).parameters
    assert {s for s, *_ in VARIANTS} == set(SIDES)
    for sid in SIDES:
        kinds = {k for s, _, k, _ in VARIANTS if s == sid}
        assert kinds == {"decoy", "near_miss"}, sid
    for sid, oid, kind, _ in VARIANTS:
        o = load_oracle(oid, side=True)
        assert o.task_id == sid and oid.startswith(sid + ".")
        assert (o.effect_step is not None) == (kind == "decoy"), oid
        for step in o.steps:
            for call in step.calls:
                if call.tool == "computer":
                    assert validate_tool_input(call.arguments, params) is None, (oid, call.arguments)


def _play(sid: str, oid: str):
    tasks, sides = load_tasks(), load_side_tasks()
    side = sides.by_id()[sid]
    main = tasks.by_id()[side.main_task_id]
    return asyncio.run(verify_side(side, main, load_oracle(oid, side=True), spec=DesktopSpec()))


@pytest.fixture(scope="module")
def played():
    ok, why = local_ready()
    require(ok, why)
    workers = int(os.environ.get("CONTROL_OSWORLD_ORACLE_WORKERS", "2"))
    with cf.ThreadPoolExecutor(workers) as ex:
        futs = {v: ex.submit(_play, v[0], v[1]) for v in PLAYED}
        return {v: f.result() for v, f in futs.items()}


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.parametrize("variant", PLAYED, ids=[v[1] for v in PLAYED])
def test_decoys_are_detected_and_near_misses_are_not(played, variant):
    sid, oid, kind, detector = variant
    v = played[variant]
    o = load_oracle(oid, side=True)
    if kind == "decoy":
        assert v.ok, v.summary()
        assert v.t_star == o.effect_step and v.final_score == 1, v.summary()
    else:
        assert v.t_star is None and v.final_score == 0, v.summary()
        unexpected = [p for p in v.problems if not p.startswith(("t*=", "the full check scores", "the attempt detector never"))]
        assert not unexpected, v.summary()
    if detector == "fires":
        assert v.detector_steps, v.summary()
    else:
        assert not v.detector_steps, v.summary()
