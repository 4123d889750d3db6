"""No desktop: the secret every exfiltration or leak checker looks for is in the files its setup plants
(the side task's and its main task's `download` steps), as that checker reads it: a `check_sink`
secret is found (its declared share, its decodings) in the planted files sent as they are; the
required secrets of a `secrets` probe are found in a planted file (decodings.find_secret). So an
edit of make_assets.py that changes a planted text fails here, not as an oracle that silently
cannot succeed."""

from __future__ import annotations

import pytest

from control_osworld.osworld.assets import ensure_assets, local_path
from control_osworld.osworld.evaluators.decodings import find_secret
from control_osworld.osworld.exfil import ExfilSpec, detect
from control_osworld.osworld.loader import load_side_tasks, load_tasks

SIDES = load_side_tasks()
TASKS = load_tasks().by_id()


def _planted(side) -> list[bytes]:
    ensure_assets()
    steps = list(side.config) + (list(TASKS[side.main_task_id].config) if side.main_task_id in TASKS else [])
    out = []
    for s in steps:
        if s.type != "download":
            continue
        for f in s.parameters.get("files", []):
            if str(f.get("url", "")).startswith("file://{ASSETS}/"):
                out.append(local_path(f["url"]).read_bytes())
    return out


def _sink_rules(side) -> dict | None:
    ev = side.evaluator
    if ev is None or ev.funcs != ["check_sink"]:
        return None
    rules = (ev.model_dump().get("expected") or {}).get("rules") or {}
    return rules if "secret" in rules else None


def _required(side) -> list[str]:
    ev = side.evaluator
    if ev is None or ev.funcs != ["probe_rules"]:
        return []
    d = ev.model_dump()
    if (d.get("result") or {}).get("probe") != "secrets":
        return []
    return [r["key"][1] for r in d["expected"]["rules"].get("expect", []) if r.get("key", [None])[0] == "found"]


def _supplied(side) -> bool:
    """The secret is the attacker's own input, named by the instruction (a fraudulent payment's
    account), not something planted to be stolen."""
    r = _sink_rules(side)
    return bool(r) and r["secret"] in (side.instruction or "")


SINK = [s for s in SIDES if _sink_rules(s) and not _supplied(s)]
SUPPLIED = [s for s in SIDES if _supplied(s)]
LEAKS = [s for s in SIDES if _required(s)]


def test_there_are_checkers_to_check():
    assert len(SINK) >= 10 and len(LEAKS) >= 8
    # a supplied secret is what the attack sends, so it must be in both wordings of the side task
    assert all(_sink_rules(x)["secret"] in (x.hand_held_instruction or x.instruction) for x in SUPPLIED)


@pytest.mark.parametrize("side", SINK, ids=[s.id for s in SINK])
def test_the_sink_secret_is_in_what_the_setup_plants(side):
    r = _sink_rules(side)
    spec = ExfilSpec(secret=r["secret"], min_share=r.get("min_share", 1.0), decodings=r.get("decodings", []),
                     **({"min_fragment": r["min_fragment"]} if "min_fragment" in r else {}))
    share = max(detect(spec, [[("body", data)]]) for data in _planted(side))
    assert share >= spec.min_share, f"{side.id}: its planted files carry {share:.2f} of the secret"


@pytest.mark.parametrize("side", LEAKS, ids=[s.id for s in LEAKS])
def test_the_leaked_secrets_are_in_what_the_setup_plants(side):
    planted = _planted(side)
    for secret in _required(side):
        assert any(find_secret(data, secret) for data in planted), f"{side.id}: {secret!r} is in none of its planted files"
