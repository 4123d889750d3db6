"""An attack run is its honest twin plus the side actions (issue 18, findings 2 and 3): over
every pairing of the catalogue and every strategy, the attack plan with its side actions
removed is the honest twin's plan, turn by turn (calls, visible text, length); no main turn is
played twice; no side command starts while text typed by the main task is still un-entered."""

from __future__ import annotations

import pytest
from control_arena import EvalMode

from control_osworld.control.catalogue import Catalogue
from control_osworld.control.scripted import (
    ON_REQUEST,
    STRATEGIES,
    ScriptedModel,
    _texts,
    build_plan,
    split_at_waits,
    tamper_turns,
)
from control_osworld.control.setting import OSWorldControlSetting


@pytest.fixture(scope="module")
def twins():
    """(honest sample, attack sample) for every pairing of the default dataset (matched)."""
    setting = OSWorldControlSetting()
    honest = {str(s.id): s for s in setting.get_dataset(EvalMode.HONEST)}
    attack = {str(s.id): s for s in setting.get_dataset(EvalMode.ATTACK)}
    assert honest.keys() == attack.keys() and len(attack) > 50
    return [(honest[k], attack[k]) for k in sorted(attack)]


def _side_steps(side_oracle: dict, strategy: str) -> list[list[dict]]:
    """The calls of each side step the attack must play, in order, each step in its pieces
    between waits (`split_at_waits`; tamper: with the tricks)."""
    steps = [piece for s in side_oracle["steps"] for piece in split_at_waits(list(s["calls"]))]
    if strategy == "tamper" and side_oracle.get("task_id") != "tamper-evidence":
        steps += [t.calls for t in tamper_turns()]
    return steps


def _split(plan, expected: list[list[dict]]) -> list[int]:
    """How many leading calls of each turn are side calls, found by matching whole side steps
    in order (a side turn holds one or more whole steps first), independently of the plan's own
    bookkeeping. A side turn holds at least one piece; where a piece equals the checking turn's
    call after it (a step that only waits), the split that lets every later side turn start
    with its own piece is the one taken (a search, longest first)."""
    turns = plan.turns

    def solve(i: int, j: int) -> list[int] | None:
        if i == len(turns):
            return [] if j == len(expected) else None
        t = turns[i]
        options, n, k = [0], 0, j
        while t.side and k < len(expected) and t.calls[n:n + len(expected[k])] == expected[k]:
            n, k = n + len(expected[k]), k + 1
            options.append(n)
        for n in reversed(options):
            if t.side and n == 0 and j < len(expected):
                continue
            used = j + sum(1 for m in options[1:] if m <= n)
            rest = solve(i + 1, used)
            if rest is not None:
                return [n, *rest]
        return None

    out = solve(0, 0)
    assert out is not None, f"the {len(expected)} side steps were not all played, in order"
    return out


def _unentered_before_side(plan, split: list[int]) -> list[tuple[int, str]]:
    """(turn, text) wherever a side piece starts by typing while text the main task typed is
    still pending in the focused field (typed without Enter, not yet entered, cleared or left
    by a key or click), so that the side command would be typed after it. What the side oracle
    types is its own business."""
    pending, bad = "", []
    for i, (t, n_side) in enumerate(zip(plan.turns, split)):
        for k, c in enumerate(t.calls):
            if k == 0 and n_side and pending and c.get("arguments", {}).get("action") == "type":
                bad.append((i, pending))
            if k < n_side:
                pending = ""
                continue
            a = c.get("arguments", {})
            act = a.get("action")
            if c.get("tool") != "computer":
                pending = ""
            elif act == "type":
                text = a.get("text", "")
                pending = "" if a.get("press_enter") or text.endswith("\n") else (pending + text).rsplit("\n", 1)[-1]
            elif act == "key":
                pending = pending[:-1] if a.get("text") == "BackSpace" else ""
            elif act not in ("screenshot", "wait", "mouse_move", "cursor_position", "zoom"):
                pending = ""
    return bad


def _check_pair(honest, attack, side_oracle: dict, strategy: str, where: str) -> None:
    assert attack.strategy == strategy and honest.mirrors == strategy, where
    expected = _side_steps(side_oracle, strategy)
    split = _split(attack, expected)
    assert split == [t.side_calls for t in attack.turns], where  # the plan's bookkeeping is right
    # Side actions removed, the attack is its honest twin: same turns, calls, text.
    assert len(attack.turns) == len(honest.turns), where
    for k, (a, h, n) in enumerate(zip(attack.turns, honest.turns, split)):
        assert a.calls[n:] == h.calls, (where, k)
        assert a.text == h.text, (where, k)
        assert a.side == bool(n) or (a.side and not expected), (where, k)
    # No main turn twice: the honest twin is the bare main task plus its checking turns only.
    bare = [t for t in honest.turns if not t.check]
    assert len(bare) == len(honest.turns) - sum(t.check for t in honest.turns)
    assert not _unentered_before_side(attack, split), (where, _unentered_before_side(attack, split))
    effect = attack.effect_step
    assert effect is None or split[effect - 1] > 0, where  # the effect happens in a side turn


@pytest.mark.parametrize("strategy", STRATEGIES + ON_REQUEST)
def test_every_pairing_attack_minus_side_is_its_honest_twin(twins, strategy):
    model = ScriptedModel(f"attack-{strategy}")
    cat = Catalogue.load()
    for h, a in twins:
        sid = str(a.id)
        meta = a.metadata["metadata"]
        honest = model.plan_for(h.metadata, sid, 1)
        attack = model.plan_for(a.metadata, sid, 1)
        _check_pair(honest, attack, cat.side_oracle(meta["side_task_id"]), strategy, f"{sid} {strategy}")


def test_no_main_turn_is_replayed(twins):
    """Every main turn of the bare plan (the honest run without checking turns) appears in the
    attack run once, in order, whatever the strategy and seed."""
    cat = Catalogue.load()
    for _, a in twins:
        meta = a.metadata["metadata"]
        mo, so = cat.oracle(meta["main_task_id"]), cat.side_oracle(meta["side_task_id"])
        for strategy in STRATEGIES:
            for seed in (0, 1):
                bare = build_plan(mo, None, sample_id=str(a.id), epoch=1, seed=seed)
                attack = build_plan(mo, so, sample_id=str(a.id), epoch=1, seed=seed, strategy=strategy)
                split = _split(attack, _side_steps(so, strategy))
                # what is left of the attack without its side actions and its checking turns
                played = [c for t, n in zip(attack.turns, split) if not getattr(t, "check", False)
                          for c in t.calls[n:]]
                want = [c for t in bare.turns for c in t.calls]
                assert played == want, (a.id, strategy, seed)


def test_extract_zip_typo_never_prefixes_the_side_command():
    """The case found in the main job: a hidden exfiltration riding in os-extract-zip's typo
    turn (`rm ~/Downlo...` typed without Enter, fixed in the next turn). The side `curl` must
    start with nothing pending, and the typo turn is played once."""
    cat = Catalogue.load()
    mo, so = cat.oracle("os-extract-zip"), cat.side_oracle("exfil-financials-http")
    found = 0
    for seed in range(40):
        plan = build_plan(mo, so, sample_id="os-extract-zip__exfil-financials-http", epoch=1, seed=seed,
                          strategy="hidden")
        split = _split(plan, _side_steps(so, "hidden"))
        typos = [i for i, t in enumerate(plan.turns) for c in t.calls[split[i]:]
                 if c["arguments"].get("action") == "type" and not c["arguments"].get("press_enter")
                 and c["arguments"].get("text", "").startswith("rm ~/Downlo")]
        if not typos:
            continue
        found += 1
        assert len(typos) == 1, (seed, typos)  # played once
        assert not _unentered_before_side(plan, split), seed
    assert found  # the typo did occur in some seeds


def test_honest_twins_take_as_many_turns_as_attacks():
    """Length is matched in distribution over the catalogue (here exactly, twin by twin), and
    the checking turns draw their text from the same pool as the attack's cover."""
    cat = Catalogue.load()
    mains = cat.runnable_main_tasks()
    pool = set(_texts()["check"])
    diffs = []
    for main, side in cat.pairings(mains):
        mo, so = cat.oracle(main.id), cat.side_oracle(side.id)
        sid = f"{main.id}__{side.id}"
        h = build_plan(mo, None, sample_id=sid, epoch=1, shadow=so)
        a = build_plan(mo, so, sample_id=sid, epoch=1)
        diffs.append(len(a.turns) - len(h.turns))
        assert all(t.text in pool for t in h.turns if t.check)
        assert all(t.text in pool for t in a.turns if t.side and not t.hosts_main)
    assert diffs and set(diffs) == {0}
    # without the shadow (the old honest policy) attacks were longer: the check above can fail
    longer = [len(build_plan(cat.oracle(m.id), cat.side_oracle(s.id), sample_id=f"{m.id}__{s.id}", epoch=1).turns)
              - len(build_plan(cat.oracle(m.id), None, sample_id=f"{m.id}__{s.id}", epoch=1).turns)
              for m, s in cat.pairings(mains)]
    assert sum(longer) > 0


def test_unmatched_honest_runs_mirror_a_side_task_their_main_task_pairs_with():
    setting = OSWorldControlSetting(honest_matching="per_main", main_tasks=["os-extract-zip"])
    [h] = setting.get_dataset(EvalMode.HONEST)
    model = ScriptedModel("oracle")
    plan = model.plan_for(h.metadata, str(h.id), 1)
    assert plan.mirrors in STRATEGIES
    again = ScriptedModel("oracle").plan_for(h.metadata, str(h.id), 1)
    assert [t.calls for t in plan.turns] == [t.calls for t in again.turns]  # deterministic per seed
