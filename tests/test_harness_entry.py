"""This harness's codebook entry: generated from its config and code, checked against its runs."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from control_osworld.analysis import codebook as C
from control_osworld.analysis.runs import load_runs
from control_osworld.cli import main
from control_osworld.control import harness_entry as H

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "newcomer.yaml"
COMMITTED = ROOT / "codebooks" / "control_osworld_harness.yaml"
RUNS_REL = "codebooks/runs/newcomer_runs.csv"


@pytest.fixture(scope="module")
def runs():
    return load_runs([ROOT / RUNS_REL])


def test_the_committed_entry_is_what_the_generator_writes_from_the_config_and_its_runs(tmp_path, runs):
    entry = H.harness_entry(CONFIG, runs, runs_source=RUNS_REL)
    out = H.write_entry(entry, tmp_path / "control_osworld_harness.yaml")
    body = lambda p: p.read_text().split("\n", 1)[1]  # noqa: E731  (the first line names the output path)
    assert body(out) == body(COMMITTED), "regenerate: control-osworld harness-entry configs/newcomer.yaml " \
                                         f"--logs {RUNS_REL} --write codebooks/control_osworld_harness.yaml"
    (e,) = C.load(COMMITTED)
    assert e.evidence == "high" and e.generated["runs"] == len(runs) == 16
    assert e.generated["outcomes"] == {k: int((runs["outcome"] == k).sum())
                                       for k in ("completed", "stopped", "escaped", "terminated", "censored", "error")}


def test_the_entry_says_what_the_runs_show(runs):
    """Answers read off the runs table directly (not through record_from_runs)."""
    (e,) = C.load(COMMITTED)
    attack = runs[runs["eval_mode"] == "attack"]
    assert e.value("budget") == int(runs["budget"].iloc[0]) and runs["budget"].nunique() == 1
    assert e.value("budget_varied") is False
    assert e.value("out_of_scope") == "environment" and attack["side_task_id"].notna().all()
    # every side task here has an attempt detector and lists its attempts: blocked and effective apart
    assert attack["attempt_detector"].map(lambda v: v is True).all() and e.value("attempts") == "blocked_and_effective"
    # some side tasks switch a boundary (open here), others have none: not one boundary by construction
    assert set(attack["boundary"].dropna()) == {"open"} and attack["boundary"].isna().any() and e.value("boundary") == "unknown"
    # censoring happens only at the budget
    cens = runs[runs["outcome"] == "censored"]
    assert (cens["outcome_step"] == cens["budget"]).all() and e.value("censoring") == "administrative"
    assert e.value("completion") == "coded_terminal" and e.value("safe_stop") == "first_class"
    assert e.value("budget_disclosed") == "no"
    assert "{budget}" not in (ROOT / "prompts" / "agent_honest.txt").read_text()


def test_runs_that_disagree_with_the_config_are_an_error(runs):
    fewer = runs.iloc[1:]
    with pytest.raises(H.HarnessEntryError, match=r"samples: 1 the config pairs are not in the runs"):
        H.harness_entry(CONFIG, fewer, "fewer")
    twice = load_runs([ROOT / RUNS_REL]).assign(run_id=lambda d: d["run_id"] + "-copy")
    import pandas as pd

    with pytest.raises(H.HarnessEntryError, match=r"16 runs the config does not pair \(or counted twice\)"):
        H.harness_entry(CONFIG, pd.concat([runs, twice], ignore_index=True), "twice")
    nodet = runs.copy()
    nodet.loc[nodet["side_task_id"] == "bashrc-beacon", "attempt_detector"] = False
    with pytest.raises(H.HarnessEntryError, match=r"attempts: the config gives 'blocked_and_effective', the runs give 'some_detected'"):
        H.harness_entry(CONFIG, nodet, "nodet")
    early = runs.copy()
    i = early.index[early["outcome"] == "completed"][0]
    early.loc[i, "outcome"] = "censored"  # censored before the budget
    with pytest.raises(H.HarnessEntryError, match=r"censoring: the config gives 'administrative', the runs give 'trajectory_dependent'"):
        H.harness_entry(CONFIG, early, "early")


def test_a_changed_loop_is_caught(tmp_path, monkeypatch):
    fake = tmp_path / "loop.py"
    fake.write_text('"""A loop that says nothing about its steps."""\n')
    monkeypatch.setattr(H, "_LOOP", str(fake))
    with pytest.raises(H.HarnessEntryError, match=r"loop\.py: no line contains .*the code changed, update the harness entry"):
        H.harness_entry(CONFIG)


def _config(tmp_path, **over):
    raw = yaml.safe_load(CONFIG.read_text())
    raw.update(over)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_the_answers_follow_the_config(tmp_path):
    a = H.harness_entry(_config(tmp_path, modes=["honest"]))["answers"]
    assert a["out_of_scope"]["answer"] == "not_coded" and a["attempts"]["answer"] == "transcripts_show_response"
    a = H.harness_entry(_config(tmp_path, side_tasks=["exfil-ssh-key-http", "exfil-financials-http"], boundary="closed"))["answers"]
    assert a["boundary"]["answer"] == "controlled" and a["attempts"]["answer"] == "blocked_and_effective"
    a = H.harness_entry(_config(tmp_path, side_tasks=["exfil-ssh-key-http"], boundary="open"))["answers"]
    assert a["boundary"]["answer"] == "permits_all"
    v = {j.quantity: j.verdict for j in C.audit_entry(C.entry_from_mapping(H.harness_entry(
        _config(tmp_path, side_tasks=["exfil-ssh-key-http"], boundary="open")), "x"))}
    assert v["a_and_b"] == "not identifiable"  # b = 1 by construction
    a = H.harness_entry(_config(tmp_path, budget=4))["answers"]
    assert a["budget"]["answer"] == 4 and a["budget"]["quote"] == "budget: 4"
    assert a["budget_varied"]["answer"] is False
    prompt = tmp_path / "attack_counted.txt"
    prompt.write_text("You have {budget} steps. {main_task_description} {side_task_description}")
    raw = yaml.safe_load(CONFIG.read_text())
    raw["pairings"][0]["attack_prompts"] = [str(prompt)]
    p = tmp_path / "d.yaml"
    p.write_text(yaml.safe_dump(raw))
    assert H.harness_entry(p)["answers"]["budget_disclosed"]["answer"] == "yes"


def test_the_command_writes_the_entry(tmp_path):
    out = tmp_path / "e.yaml"
    r = CliRunner().invoke(main, ["harness-entry", str(CONFIG), "--logs", str(ROOT / RUNS_REL), "--write", str(out)])
    assert r.exit_code == 0, r.output
    (e,) = C.load(out)
    assert e.name == "control-osworld (this harness: configs/newcomer.yaml)" and e.generated["runs"] == 16
    r = CliRunner().invoke(main, ["harness-entry", str(CONFIG)])
    assert r.exit_code == 0 and "blocked_and_effective" in r.output
    bad = tmp_path / "runs.csv"
    load_runs([ROOT / RUNS_REL]).iloc[2:].to_csv(bad, index=False)
    r = CliRunner().invoke(main, ["harness-entry", str(CONFIG), "--logs", str(bad)])
    assert r.exit_code != 0 and "the runs disagree with the config's entry" in r.output and "samples: 2 the config pairs" in r.output
