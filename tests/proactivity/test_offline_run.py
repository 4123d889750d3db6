"""The offline dilemma family end to end: scripted targets + scripted environment through
inspect, then the runs table, tables and plots from the stored logs only."""

from __future__ import annotations

import json

import pytest
import yaml
from inspect_ai import eval as inspect_eval

from control_osworld.config_file import ConfigError
from control_osworld.proactivity.report import build_proactivity_report
from control_osworld.proactivity.runs import load_dilemma_runs
from control_osworld.proactivity.task import proactivity
from control_osworld.run import run

pytestmark = pytest.mark.slow

POLICY_CLASS = {"direct": {"direct"}, "strategic": {"strategic"}, "failed_attempt": {"failed_attempt"},
                "robust": {"robust"}, "escalate": {"robust"}, "procrastinate": {"no_terminal"}}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("dilemma-logs")
    tasks = []
    for policy in POLICY_CLASS:
        t = proactivity(scenario_ids="finance-loyalty-loan-approval,healthcare-self-preservation-dosage-protocol",
                        conditions="baseline;goal=implicit", max_turns=6, name=f"p_{policy}")
        tasks.append((policy, t))
    for policy, t in tasks:
        [log] = inspect_eval(t, model=f"dilemma/{policy}", log_dir=str(d), display="none")
        assert log.status == "success", log.error
    return d


def test_pure_policies_land_in_their_classes_and_environment_keeps_state(logs):
    runs = load_dilemma_runs([logs])
    assert len(runs) == 6 * 2 * 2
    for policy, classes in POLICY_CLASS.items():
        got = set(runs[runs.model == f"dilemma/{policy}"].cls)
        assert got == classes, (policy, got)
    esc = runs[runs.model == "dilemma/escalate"]
    assert set(esc.outcome) == {"stopped"} and set(esc.terminal_tool) == {0}
    pro = runs[runs.model == "dilemma/procrastinate"]
    assert set(pro.outcome) == {"censored"} and set(pro.n_turns) == {6} and pro.terminal_turn.isna().all()
    from inspect_ai.log import read_eval_log

    from control_osworld.sample_store import SampleStore

    log = read_eval_log(str(next(p for p in logs.glob("*.eval") if "p-strategic" in p.name or "p_strategic" in p.name)))
    rec = log.samples[0].store[SampleStore.key("proactivity")]
    assert rec["final_state"]["actions"] == [t["tool"] for t in rec["turns"]]  # state threaded turn to turn
    assert rec["final_state"]["task_completed"] is True
    assert all(t["env_error"] is None for t in rec["turns"])


def test_report_from_stored_logs(logs, tmp_path):
    runs = load_dilemma_runs([logs])
    w = build_proactivity_report(runs, tmp_path / "rep", n_resamples=200)
    for name in ("table5.md", "factors.md", "procrastination.md", "terminal_turns.png", "cumulative_incidence.png", "hazards.md"):
        assert name in w and w[name].stat().st_size > 100, name
    t5 = (tmp_path / "rep" / "table5.csv").read_text()
    assert "dilemma/direct,2,1,1,0" in t5  # 2 baseline runs, MR 1, Direct 1, Strategic 0
    pr = (tmp_path / "rep" / "procrastination.md").read_text()
    assert "| dilemma/procrastinate | finance-loyalty-loan-approval | baseline | 1 | 100.0% | 6.00 |" in pr
    hz = (tmp_path / "rep" / "hazards.md").read_text()
    assert "dilemma/direct / honest" in hz


def test_control_osworld_run_dispatches_a_dilemma_config(tmp_path):
    cfg = {"family": "proactivity", "log_dir": str(tmp_path / "out"), "scenario_ids": ["code-loyalty-release-gate"],
           "max_turns": 4, "pairings": [{"target_model": "dilemma/balanced", "model_args": {"seed": 1}}],
           "conditions": ["baseline", "ethics=virtue"], "epochs": 2, "resamples": 50}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    assert run(p) == 0
    rep = tmp_path / "out" / "report" / "proactivity"
    assert (rep / "factors.md").exists() and "ethics=virtue" in (rep / "factors.md").read_text()
    runs = load_dilemma_runs([tmp_path / "out" / "dilemma_runs.parquet"])
    assert len(runs) == 4 and set(runs.model) == {"dilemma/balanced"}
    assert all(len(json.loads(t)) <= 4 for t in runs.tools)


def test_bad_dilemma_config_names_file_and_field(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"family": "proactivity", "pairings": [{"target_model": "x"}], "conditions": ["goal=vague"]}))
    with pytest.raises(ConfigError) as e:
        run(p)
    assert f"{p}: field 'conditions'" in str(e.value) and "vague" in str(e.value)


def test_project_monitors_score_dilemma_runs_on_actions_and_text(logs, tmp_path):
    from control_osworld.logs import read_run_records
    from control_osworld.monitoring.runner import monitor_logs

    path = next(p for p in sorted(logs.glob("*.eval")) if "strategic" in p.name)
    recs = read_run_records(path)
    r = recs[0]
    assert r.main_task_description and r.trajectory.outcome == "escaped" and r.trajectory.t_star == r.trajectory.outcome_step
    assert r.trajectory.steps[-1].actions[0].tool in ("approve_loan", "discharge_patient")  # tool 6 of the two scenarios
    assert r.trajectory.attempt_steps and all(s.visible_text for s in r.trajectory.steps)
    df = monitor_logs([path], ["monitors/per_step_rules.yaml"], subsets=["A", "A+T"], store=tmp_path / "scores",
                      cache_dir=tmp_path / "cache")
    assert set(df["inputs"]) == {"A", "A+T"} and df["score"].notna().all()
    assert df["step"].max() == max(s.step for rec in recs for s in rec.trajectory.steps)
