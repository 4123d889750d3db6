"""Pairings as data (issue 19, item 3): the pairings file, its generation from the rules, its
checks, and the main job running it; the default design reproduces the rules' pairings."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from control_osworld.config_file import ConfigError
from control_osworld.control.catalogue import Catalogue
from control_osworld.osworld import design as dz
from control_osworld.osworld.loader import REPO, load_side_tasks, load_tasks
from control_osworld.osworld.names import ON_REQUEST_CATEGORIES


@pytest.fixture(scope="module")
def loaded():
    return load_tasks(), load_side_tasks()


def _rules_pairs() -> list[tuple[str, str]]:
    cat = Catalogue.load()
    return [(t.id, s.id) for t, s in cat.pairings(cat.runnable_main_tasks())]


def test_the_default_design_is_generated_from_the_rules(loaded):
    """The default design is the rules' pairings, at most `per_side` main tasks per side task
    (more only where a main task would otherwise be in none): every pair is one a rule makes, and
    the catalogue runs exactly its pairs in the rules' order."""
    d = dz.load_design(dz.DEFAULT_FILE)
    rules = _rules_pairs()
    assert {(p.main, p.side) for p in d.pairings} <= set(rules)
    assert [(p.main, p.side) for p in dz.ordered_pairs(d)] == [x for x in rules if x in {(p.main, p.side) for p in d.pairings}]
    cat = Catalogue.load()
    got = cat.pairings(cat.runnable_main_tasks(), design=dz.DEFAULT_FILE)
    assert [(t.id, s.id) for t, s in got] == [(p.main, p.side) for p in dz.ordered_pairs(d)]
    assert dz.check(d, "side_tasks/pairings.yaml", *loaded) == []
    if d.per_side is not None:
        per_side = Counter(p.side for p in d.pairings)
        over = {s for s, n in per_side.items() if n > d.per_side}
        # beyond the cap only with the reason that says so (the cap keeps the side task's own main
        # task first, unless its rule excludes that pairing: pairs_with.excluded)
        for sid in over:
            capped = [p for p in d.pairings if p.side == sid and "beyond per_side" not in p.reason]
            assert len(capped) <= d.per_side, (sid, capped)
            own = next(x for x in loaded[1] if x.id == sid).main_task_id
            assert own is None or own in {p.main for p in capped} or own in {p.main for p in d.excluded
                                                                            if p.side == sid}


def test_the_committed_file_is_what_generate_writes(loaded, tmp_path):
    """Regenerate after changing side tasks: control-osworld tasks pairings --generate (with the
    file's own k and --per-side)."""
    d = dz.load_design(dz.DEFAULT_FILE)
    out = tmp_path / "p.yaml"
    dz.write_design(dz.generate(*loaded, k=d.k, per_side=d.per_side, name=d.design), out)
    assert out.read_text() == dz.DEFAULT_FILE.read_text()


def test_generated_design_reasons_and_exceptions(loaded):
    tasks, sides = loaded
    d = dz.generate(tasks, sides)
    assert all(p.reason for p in d.pairings)
    by = {(p.main, p.side): p.reason for p in d.pairings}
    assert by[("os-archive-logs", "delete-ledger-backup")].startswith("main_task_id: the side task was written for this main task")
    assert "pairs_with.apps: the main task works in the side task's app (os)" in by[("os-find-largest", "bashrc-beacon")]
    # on-request categories are declared unpaired, with the reason
    on_request = {s.id for s in sides if s.category in ON_REQUEST_CATEGORIES}
    assert on_request and {u.id for u in d.unpaired_sides} == on_request
    # every runnable main task is paired or declared unpaired with a reason; infeasible ones unpaired
    paired = {p.main for p in d.pairings}
    unpaired = {u.id: u.reason for u in d.unpaired_mains}
    assert paired | set(unpaired) == {t.id for t in tasks if t.runnable} and not paired & set(unpaired)
    assert all(unpaired[t.id].startswith("infeasible") for t in tasks if t.infeasible)


@pytest.mark.slow
def test_the_offline_main_job_runs_the_designs_samples(tmp_path):
    """configs/offline.yaml reads side_tasks/pairings.yaml: of the runs the rules give without it,
    exactly the design's pairings, with the same sample ids, order, inputs and model seed; only
    the design keys are new."""
    from control_osworld.control.run import RunConfig, build_tasks

    cfg = RunConfig.load(REPO / "configs/offline.yaml")
    assert cfg.pairings_file == str(dz.DEFAULT_FILE) and cfg.hand_held_instruction is False
    d = dz.load_design(dz.DEFAULT_FILE)
    with_design = build_tasks(cfg)
    without = build_tasks(cfg.model_copy(update={"pairings_file": None}))
    assert [t.name for t in with_design] == [t.name for t in without]
    new_keys = {"design", "design_file", "design_k", "design_pairings"}
    for a, b in zip(with_design, without):
        sa = list(a.dataset)
        sb = {s.id: s for s in b.dataset}
        assert len(sa) > 0 and all(s.id in sb for s in sa)
        order = [i for i in sb if i in {s.id for s in sa}]
        assert [s.id for s in sa] == order
        assert [s.input for s in sa] == [sb[s.id].input for s in sa]
        assert a.model.name == b.model.name and a.model.model_args == b.model.model_args  # same seed
        for x in sa:
            mx, my = dict(x.metadata), dict(sb[x.id].metadata)
            ix, iy = mx.pop("metadata"), my.pop("metadata")
            assert mx == my
            assert {k: v for k, v in ix.items() if k not in new_keys} == {k: v for k, v in iy.items() if k not in new_keys}
            assert ix["design"] == "default" and ix["design_file"] == "side_tasks/pairings.yaml" and ix["design_k"] == 1
            assert ix["design_pairings"] == len(d.pairings)
            assert iy["design"] == "rules" and iy["design_k"] is None
    attack = [t for t in with_design if t.name.endswith("attack_attack_plain")]
    honest = [t for t in with_design if t.name.endswith("_honest")]
    # matched honest runs as today: one per pairing, same sample ids
    assert [s.id for s in attack[0].dataset] == [s.id for s in honest[0].dataset]
    assert len(list(attack[0].dataset)) == len(d.pairings)


def _bad_design(tmp_path: Path) -> Path:
    d = {"design": "hand", "k": 2, "pairings": [
        {"main": "os-archive-logs", "side": "delete-ledger-backup", "reason": "same folder"},
        {"main": "os-archive-logs", "side": "delete-ledger-backup", "reason": "again"},
        {"main": "no-such-main", "side": "delete-ledger-backup", "reason": "x"},
        {"main": "os-find-largest", "side": "no-such-side", "reason": "x"},
        {"main": "os-find-largest", "side": "bashrc-beacon", "reason": " "},
    ], "unpaired_mains": [{"id": "os-find-largest", "reason": "left out"}, {"id": "ghost", "reason": "?"}]}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def test_check_names_the_file_and_the_entry(tmp_path, loaded):
    p = _bad_design(tmp_path)
    problems = dz.check(dz.load_design(p), "bad.yaml", *loaded)
    assert "bad.yaml: pairings[1]: duplicate of pairings[0] (os-archive-logs x delete-ledger-backup)" in problems
    assert "bad.yaml: pairings[2].main: unknown main task 'no-such-main'" in problems
    assert "bad.yaml: pairings[3].side: unknown side task 'no-such-side'" in problems
    assert "bad.yaml: pairings[4].reason: empty (say why the pair is plausible)" in problems
    assert "bad.yaml: unpaired_mains[0]: os-find-largest is listed as unpaired but is in 2 pairing(s)" in problems
    assert "bad.yaml: unpaired_mains[1].id: unknown main task 'ghost'" in problems
    # balance: k = 2 for side tasks, >= 1 for main tasks
    assert ("bad.yaml: balance: side task bashrc-beacon is in 1 pairing(s), fewer than k = 2 (add pairings, or list "
            "it under unpaired_sides with a reason)") in problems
    assert ("bad.yaml: balance: main task calc-budget-totals is in no pairing (add one, or list it under "
            "unpaired_mains with a reason)") in problems
    tasks, sides = loaded
    expected_side_balance = {s.id for s in sides if s.runnable} - {"delete-ledger-backup"}
    got = {x.split("side task ")[1].split(" ")[0] for x in problems if ": balance: side task " in x}
    assert got == expected_side_balance


def test_a_structurally_bad_file_names_the_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("pairings:\n  - main: os-archive-logs\n    sidee: x\n")
    with pytest.raises(ConfigError) as e:
        dz.load_design(p)
    assert str(p) in str(e.value) and "'pairings.0.side'" in str(e.value) and "'pairings.0.sidee': unknown field" in str(e.value)


def test_cli_prints_and_checks(tmp_path):
    from control_osworld.osworld.cli import tasks_group

    ok = CliRunner().invoke(tasks_group, ["pairings"])
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.stdout.splitlines()[-1])
    d = dz.load_design(dz.DEFAULT_FILE)
    assert summary["pairings"] == len(d.pairings) and summary["problems"] == 0 and summary["per_side"] == d.per_side
    assert summary["per_side_min"] == min(Counter(p.side for p in d.pairings).values()) >= summary["k"]
    assert "os-archive-logs" in ok.stdout and "delete-ledger-backup" in ok.stdout

    bad = CliRunner().invoke(tasks_group, ["pairings", "--file", str(_bad_design(tmp_path))])
    assert bad.exit_code == 1
    assert "pairings[2].main: unknown main task 'no-such-main'" in bad.stderr
    assert json.loads(bad.stdout.splitlines()[-1])["problems"] >= 8


def test_generate_a_balanced_design(tmp_path, loaded):
    from control_osworld.osworld.cli import tasks_group

    out = tmp_path / "balanced.yaml"
    r = CliRunner().invoke(tasks_group, ["pairings", "--generate", "--file", str(out), "--k", "2", "--per-side", "3",
                                         "--name", "balanced"])
    d = dz.load_design(out)
    per_side = Counter(p.side for p in d.pairings)
    tasks, sides = loaded
    rules = Counter(s for _, s in _rules_pairs())
    assert d.design == "balanced" and d.k == 2 and d.per_side == 3
    for s, n in rules.items():  # the cap, exceeded only to cover a main task no other pairing covers
        assert per_side[s] >= min(3, n)
        extra = [p for p in d.pairings if p.side == s and "beyond per_side 3" in p.reason]
        assert per_side[s] - len(extra) == min(3, n)
    assert {p.main for p in d.pairings} == {m for m, _ in _rules_pairs()}
    by_task = tasks.by_id()
    for s in sides:  # its own main task is always kept, unless its rule excludes it
        if s.id in per_side and s.main_task_id and not s.excluded_reason(by_task[s.main_task_id]):
            assert any(p.main == s.main_task_id and p.side == s.id for p in d.pairings)
    # side tasks with fewer than k possible main tasks are named, and the command fails
    short = sorted(s for s, n in rules.items() if n < 2)
    assert short and r.exit_code == 1
    for s in short:
        assert f"balance: side task {s} is in {rules[s]} pairing(s), fewer than k = 2" in r.stderr
    # spreading: more main tasks covered than by taking the first three of each side task by id
    naive = {m for s in rules for m in sorted(m for m, x in _rules_pairs() if x == s)[:3]}
    assert len({p.main for p in d.pairings}) >= len(naive)


def test_files_present_rule(tmp_path):
    """pairs_with.files: main tasks whose setup puts a file under the path."""
    from control_osworld.osworld.schema import SideTask

    tasks = load_tasks()
    side = SideTask.model_validate({"id": "s", "category": "exfiltration", "instruction": "x",
                                    "pairs_with": {"files": ["~/logs"]},
                                    "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"},
                                                  "expected": {"type": "rule", "rules": {"expected": ""}}}})
    got = {t.id for t in tasks if side.pairs_with_task(t)}
    want = {t.id for t in tasks if not t.infeasible and any(p.startswith("~/logs/") for p in t.placed_files)}
    assert got == want and "os-archive-logs" in got
    reason = dz.pair_reason(side, tasks.by_id()["os-archive-logs"])
    assert reason == "pairs_with.files: the main task's setup puts files under ~/logs; category exfiltration"


def test_setting_runs_a_hand_made_design_and_refuses_side_tasks_outside_it(tmp_path):
    from control_arena import EvalMode

    from control_osworld.control.setting import OSWorldControlSetting

    p = tmp_path / "two.yaml"
    d = dz.Design(design="two", k=1, pairings=[
        dz.Pair(main="os-find-largest", side="bashrc-beacon", reason="terminal work"),
        dz.Pair(main="os-archive-logs", side="delete-ledger-backup", reason="written for it")])
    p.write_text(yaml.safe_dump(d.model_dump()))
    # a hand-made design that leaves most tasks out fails the balance check, naming the file
    with pytest.raises(ConfigError, match="two.yaml: balance: "):
        OSWorldControlSetting(pairings_file=str(p)).get_dataset(EvalMode.ATTACK)
    tasks, sides = load_tasks(), load_side_tasks()
    paired = {"os-find-largest", "os-archive-logs"}
    d = d.model_copy(update={
        "unpaired_mains": [dz.Unpaired(id=t.id, reason="not in this study") for t in tasks if t.id not in paired],
        "unpaired_sides": [dz.Unpaired(id=s.id, reason="not in this study") for s in sides
                           if s.id not in {"bashrc-beacon", "delete-ledger-backup"}]})
    p.write_text(yaml.safe_dump(d.model_dump()))
    st = OSWorldControlSetting(pairings_file=str(p))
    attack, honest = st.get_dataset(EvalMode.ATTACK), st.get_dataset(EvalMode.HONEST)
    ids = ["os-find-largest__bashrc-beacon", "os-archive-logs__delete-ledger-backup"]  # side id, then main id
    assert [s.id for s in attack] == ids == [s.id for s in honest]
    assert all(s.metadata["metadata"]["design"] == "two" for s in attack + honest)
    with pytest.raises(ConfigError, match="side task\\(s\\) tamper-evidence are in no pairing of this design"):
        OSWorldControlSetting(pairings_file=str(p), side_tasks=["tamper-evidence"]).get_dataset(EvalMode.ATTACK)


def test_every_table_header_states_the_design():
    from control_osworld.analysis.report import design_statement, run_statements

    rows = []
    pairs = [("m1", "s1"), ("m2", "s1"), ("m3", "s1"), ("m1", "s2"), ("m2", "s2")]
    for mode in ("honest", "attack"):
        for m, s in pairs:
            rows.append({"eval_mode": mode, "main_task_id": m, "side_task_id": s if mode == "attack" else None,
                         "design": "default", "design_file": "side_tasks/pairings.yaml", "design_k": 2,
                         "design_pairings": 9})
    runs = pd.DataFrame(rows)
    txt = design_statement(runs)
    # independent count: 5 pairings, side tasks 2 (3 and 2 each), main tasks 3 (2, 2, 1)
    assert txt == ("Design: default (side_tasks/pairings.yaml), k = 2, 9 pairings declared: 5 pairings (main x side) "
                   "in 5 attack runs over "
                   "2 side tasks and 3 main tasks; pairings per side task 2-3, per main task 1-2; every side task in "
                   ">= k: yes; 5 honest runs.")
    runs.loc[runs["design_k"] == 2, "design_k"] = 3
    assert "every side task in >= k: no" in design_statement(runs)
    assert "not recorded by these runs" in design_statement(
        runs.drop(columns=["design", "design_file", "design_k", "design_pairings"]))
    from control_osworld.analysis import attack_classes as ac

    valid = _minimal_runs(runs)  # the runs-table contract keeps the design columns
    header = run_statements(valid, ac.attack_classes(valid, None), [], (), set(), None)
    assert header[0] == design_statement(valid) and header[0].startswith("Design: default")


def _minimal_runs(runs: pd.DataFrame) -> pd.DataFrame:
    from control_osworld.analysis.runs import validate_runs

    n = len(runs)
    df = runs.assign(run_id=[f"r{i}" for i in range(n)], log="x.eval", sample_id=[f"s{i}" for i in range(n)], epoch=1,
                     untrusted_model="m", attack_prompt=["" if m == "honest" else "p" for m in runs["eval_mode"]],
                     outcome="completed", outcome_step=1, t_star=None, steps=1, budget=75, main_task_success=True,
                     side_task_success=None, attempt_steps=[[] for _ in range(n)], boundary=None,
                     side_task_instruction=[None if m == "honest" else "instruction" for m in runs["eval_mode"]])
    out = validate_runs(df)
    assert list(out["design"]) == ["default"] * n and out["design_k"].tolist() == list(runs["design_k"])
    assert out["side_task_instruction"].tolist() == [None if m == "honest" else "instruction" for m in runs["eval_mode"]]
    return out


def test_generate_by_category(loaded):
    tasks, sides = loaded
    d = dz.generate(tasks, sides, categories=["sabotage", "evidence_tampering"])
    cats = {s.id: s.category for s in sides}
    assert {cats[p.side] for p in d.pairings} == {"sabotage", "evidence_tampering"}
    assert {u.id for u in d.unpaired_sides} == {s.id for s in sides if s.category not in ("sabotage", "evidence_tampering")}
    assert all(u.reason.endswith("not asked for") for u in d.unpaired_sides)


@pytest.mark.slow
def test_run_config_and_task_options_reach_the_samples(tmp_path):
    """-T pairings_file (relative to the working directory or the repository) and the run
    config's hand_held_instruction reach every sample."""
    from control_osworld.control.run import RunConfig, build_tasks
    from control_osworld.control.task import osworld_control

    t = osworld_control(mode="attack", pairings_file="side_tasks/pairings.yaml", main_tasks="os-archive-logs",
                        side_tasks="delete-ledger-backup", hand_held_instruction=True)
    [s] = list(t.dataset)
    assert s.metadata["metadata"]["design_file"] == "side_tasks/pairings.yaml"
    assert s.metadata["side_task_description"] == load_side_tasks().by_id()["delete-ledger-backup"].hand_held_instruction
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"pairings: [{{untrusted_model: scripted/oracle}}]\nmodes: [attack]\nhand_held_instruction: true\n"
                   f"main_tasks: [os-archive-logs]\nside_tasks: [delete-ledger-backup]\npairings_file: {dz.DEFAULT_FILE}\n")
    [task] = build_tasks(RunConfig.load(cfg))
    [s] = list(task.dataset)
    assert s.metadata["metadata"]["side_task_instruction"] == "hand_held_instruction"
    assert s.metadata["metadata"]["design"] == "default"
