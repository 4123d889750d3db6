"""Identifiability audit (competing-hazards paper, section 4.5)."""

import pytest

from control_osworld.analysis import identifiability as I
from control_osworld.testing.synthetic_tables import synthetic_dataset

FULL = dict(name="x", attempt_unit="step", per_step="trajectories", budget=30, budget_varied=False, completion="coded_terminal",
            safe_stop="first_class", out_of_scope="environment", attempts="blocked_and_effective", boundary="unknown",
            exhaustion="separate", censoring="administrative")


def verdicts(rec):
    return {j.quantity: j.verdict for j in I.audit_record({**I._DEFAULTS, **rec})}


def test_complete_record_identifies_everything():
    assert verdicts(FULL) == {"h_S": "identified", "h_G": "identified", "h_E": "identified", "a_and_b": "identified",
                              "censoring": "identified", "exposure": "usable"}


@pytest.mark.parametrize("field,value,quantity,verdict", [
    ("safe_stop", "unscored_signal", "h_G", "relabelable"),
    ("safe_stop", "merged_with_failure", "h_G", "not identifiable"),
    ("out_of_scope", "judge", "h_E", "relabelable"),
    ("attempts", "transcripts_show_response", "a_and_b", "relabelable"),
    ("attempts", "effective_only", "a_and_b", "not identifiable"),
    ("boundary", "permits_all", "a_and_b", "not identifiable"),
    ("completion", "coded_not_terminal", "h_S", "relabelable"),
    ("censoring", "trajectory_dependent", "censoring", "not identifiable"),
    ("budget", 4, "exposure", "fixed condition only"),
    ("budget", None, "exposure", "not usable"),
])
def test_single_rules(field, value, quantity, verdict):
    assert verdicts({**FULL, field: value})[quantity] == verdict


def test_merged_exhaustion_downgrades_every_judgement():
    v = verdicts({**FULL, "exhaustion": "merged_with_failure", "out_of_scope": "judge"})
    assert v["h_S"] == "relabelable" and v["h_E"] == "not identifiable" and v["censoring"] == "not identifiable"


def test_aggregate_rates_give_incidence_at_k_only():
    v = verdicts({**FULL, "per_step": "aggregate_only"})
    assert v["h_S"] == v["h_G"] == v["h_E"] == "incidence at K only"
    assert v["a_and_b"] == "not identifiable"
    assert verdicts({**FULL, "attempt_unit": None})["exposure"] == "not usable"


def test_flat_records_load_and_errors(tmp_path):
    """identifiability.load_codebook reads flat records (the audit_record contract); the evidence
    codebook (codebooks/*.yaml) is read by analysis.codebook (tests/analysis/test_analysis_codebook.py)."""
    flat = tmp_path / "flat.yaml"
    flat.write_text("evaluations:\n  - {" + ", ".join(f"{k}: {v if v is not None else 'null'}" for k, v in
                                                 {**FULL, "name": "open study", "boundary": "permits_all"}.items()) + "}\n")
    (ev,) = I.load_codebook(flat)
    assert {j.quantity: j.verdict for j in I.audit_record(ev)}["a_and_b"] == "not identifiable"
    bad = tmp_path / "cb.yaml"
    bad.write_text("evaluations:\n  - name: y\n    safe_stop: sometimes\n")
    with pytest.raises(ValueError, match=r"cb\.yaml: evaluation 1 \(y\): missing field"):
        I.load_codebook(bad)
    bad.write_text("- {" + ", ".join(f"{k}: {v if v is not None else 'null'}" for k, v in {**FULL, "safe_stop": "sometimes"}.items()) + "}\n")
    with pytest.raises(ValueError, match="field 'safe_stop' is 'sometimes'; allowed"):
        I.load_codebook(bad)


def test_runs_audit_reads_the_data():
    runs, _ = synthetic_dataset(200, seed=1)
    # side-11 has no attempt detector: pooled, a and b are not identified
    assert {j.quantity: j.verdict for j in I.audit_runs(runs)}["a_and_b"] == "not identifiable"
    runs = runs[runs["side_task_id"] != "side-11"]
    v = {j.quantity: j.verdict for j in I.audit_runs(runs)}
    assert v["a_and_b"] == "identified" and v["censoring"] == "identified" and v["exposure"] == "usable"
    att = runs["side_task_id"].notna()
    open_runs = runs.copy()
    open_runs.loc[att, "boundary"] = "open"
    assert {j.quantity: j.verdict for j in I.audit_runs(open_runs)}["a_and_b"] == "not identifiable"
    early = runs.copy()
    i = early.index[early["outcome"] == "completed"][0]
    early.loc[i, "outcome"] = "censored"  # censored before the budget: not administrative
    assert {j.quantity: j.verdict for j in I.audit_runs(early)}["censoring"] == "not identifiable"
    none = runs.copy()
    none["attempt_steps"] = None
    assert {j.quantity: j.verdict for j in I.audit_runs(none)}["a_and_b"] == "relabelable"  # logs exist


def _side_runs(detector, boundary, attempts, side="s1", n=3, start=0):
    return [{"run_id": f"{side}-{start + i}", "log": "x.eval", "side_task_id": side, "eval_mode": "attack", "outcome": "completed",
             "outcome_step": 5, "budget": 75, "attempt_steps": attempts, "boundary": boundary, "attempt_detector": detector}
            for i in range(n)]


def test_side_task_audit_answers_from_the_recorded_fields():
    import pandas as pd

    runs = pd.DataFrame(
        _side_runs(True, "closed", [2, 4], side="exfil", n=2) + _side_runs(True, "open", [3], side="exfil", n=2, start=5)
        + _side_runs(False, None, [], side="tamper", n=3)  # no detector: attempted marks only t*
        + _side_runs(True, "open", [1], side="sinkopen", n=2)
        + _side_runs(True, None, [2], side="beacon", n=2)  # detector, no boundary switch
        + _side_runs(None, None, [2, 3, 4], side="oldlog", n=2)  # detector not recorded (older logs)
    )
    by = {a.side_task_id: a for a in I.audit_side_tasks(runs)}
    ab = {k: {j.quantity: j.verdict for j in a.judgements}["a_and_b"] for k, a in by.items()}
    assert ab == {"exfil": "identified", "tamper": "not identifiable", "sinkopen": "not identifiable",
                  "beacon": "identified", "oldlog": "not determined"}
    assert by["exfil"].boundary == {"open": 2, "closed": 2, "none": 0} and by["exfil"].attempt_events == 6
    assert (by["tamper"].detector, by["oldlog"].detector) == ("no", "not recorded")
    md = I.render_markdown([], I.audit_side_tasks(runs))
    assert "| tamper | 3 | no | 0/0/3 | 0 | identified | not identifiable: only effective attempts" in md
    assert "| exfil | 4 | yes | 2/2/0 | 6 | identified | identified" in md
    # pooled over side tasks with and without a detector: not identified
    rec, notes = I.record_from_runs(runs)
    assert rec["attempts"] == "some_detected" and any("without (or not recorded): oldlog, tamper" in n for n in notes)
