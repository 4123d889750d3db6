"""The codebook of published evaluations: schema checks, Table 2 counts and Table 3 verdicts
against computations written here from the YAML and the competing-hazards paper's rules (not the module's code)."""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from control_osworld.analysis import codebook as C
from control_osworld.analysis.cli import audit_command

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "codebooks" / "agent_evaluations.yaml"
ND = "not_determined"


def raw_entries(path=BOOK):
    """The entries as plain dicts, read with yaml alone (includes followed by hand)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = list(data["evaluations"])
    for name in data.get("include", []):
        out += raw_entries(path.parent / name)
    return out


def answers(e):
    return {k: v["answer"] for k, v in e["answers"].items()}


# ------------------------------------------------------------------ the codebook itself

def test_codebook_has_twenty_public_evaluations_and_this_harness_each_answer_with_evidence():
    entries = C.load(BOOK)
    raw = raw_entries()
    assert [e.name for e in entries] == [r["name"] for r in raw]
    external = [r for r in raw if not r["name"].startswith("control-osworld (this harness")]
    assert len(external) == 24 and len(raw) == len(external) + 1  # README and docs/analysis.md say 24
    gui_first = [r["kind"] for r in external][:9]
    assert set(gui_first) <= {"gui", "cli"}  # GUI evaluations first
    for r in raw:
        assert r["evidence"] in ("high", "medium", "low") and r["sources"]
        assert set(r["answers"]) == set(C.ANSWER_FIELDS), r["name"]
        for f, a in r["answers"].items():
            assert a["source"].strip(), (r["name"], f)
            assert (a.get("quote") or "").strip() or (a["answer"] == ND and a["note"].strip()), (r["name"], f)
    names = {r["name"] for r in external}
    for must in ("OSWorld / OSWorld-Verified", "Control OSWorld (mariasrap/control-osworld)", "OSWorld-Control (Control Arena setting)",
                 "OS-Harm", "RiOSWorld", "CUAHarm", "SHADE-Arena", "CUA-SHADE-Arena", "BashArena", "LinuxArena (Control Tower)",
                 "AgentDojo", "ImpossibleBench"):
        assert must in names


# ------------------------------------------------------------------ Table 2 against an independent count

def independent_counts(raw):
    """Per Table-2 question: {value: count}, from the raw answers."""
    def oos(a):
        return {"environment": "yes", "judge": "yes", "not_coded": "no"}.get(a["out_of_scope"], "not determined")

    def first(a):
        s = a["safe_stop"]
        return "not determined" if s == ND else "yes" if s == "first_class" else "no"

    rows = []
    for e in raw:
        a = answers(e)
        o, f = oos(a), first(a)
        rows.append({
            "out_of_scope_coded": o,
            "safe_stop_coded": "not determined" if a["safe_stop"] == ND else
            "yes" if a["safe_stop"] in ("first_class", "unscored_signal") else "no",
            "safe_stop_first_class": f,
            "both_first_class": "yes" if o == f == "yes" else "no" if "no" in (o, f) else "not determined",
            "exhaustion_separated": {"separate": "yes", "merged_with_failure": "no"}.get(a["exhaustion"], "not determined"),
            "budget_in_attempt_units": "not determined" if a["budget"] == ND else "no" if a["budget"] is None else "yes",
            "budget_disclosed": {"yes": "yes", "no": "no", "partial": "partial", "not_applicable": "not applicable"}
            .get(a["budget_disclosed"], "not determined"),
            "per_step_published": {"trajectories": "yes", "counts": "yes", "aggregate_only": "no"}.get(a["per_step"], "not determined"),
            "blocked_vs_effective": {"blocked_and_effective": "yes", "transcripts_show_response": "partial", "some_detected": "partial",
                                     "effective_only": "no", "not_recorded": "no"}.get(a["attempts"], "not determined"),
            "multi_agent": {"yes": "yes", "partial": "partial", "no": "no"}.get(a["multi_agent"], "not determined"),
        })
    out = {}
    for q in rows[0]:
        out[q] = {}
        for r in rows:
            out[q][r[q]] = out[q].get(r[q], 0) + 1
    return out


def test_table2_counts_equal_an_independent_count_of_the_yaml():
    raw = raw_entries()
    expect = independent_counts(raw)
    got = C.count_table(C.load(BOOK)).set_index("question")
    assert list(got.index) == list(C.TABLE2_COLUMNS)
    for q, counts in expect.items():
        row = got.loc[q]
        assert int(row["n"]) == len(raw)
        for v in ("yes", "partial", "no", "not applicable", "not determined"):
            assert int(row[v]) == counts.get(v, 0), (q, v)
        assert int(row["at_least"]) == counts.get("yes", 0)
        assert int(row["at_most"]) == len(raw) - counts.get("no", 0) - counts.get("not applicable", 0)
    # the per-evaluation rows carry the grade
    t2 = C.coding_table(C.load(BOOK))
    assert list(t2["evidence"]) == [r["evidence"] for r in raw]


# ------------------------------------------------------------------ Table 3 against the competing-hazards paper's rules, written here

ID, REL, NOT, ATK, UND, GIVEN = "identified", "relabelable", "not identifiable", "incidence at K only", "not determined", C.NOT_GIVEN


def seed_verdict(a, quantity, evidence):
    """Section 4.5, applied by hand: base verdict from the coded outcome; merged exhaustion lowers it
    one grade; an undetermined deciding answer leaves it undetermined; without an attempt unit or
    per-step data a hazard is at most an incidence at the fixed K (a and b: not identifiable)."""
    if evidence == "low":
        return GIVEN
    field, table = {
        "h_S": ("completion", {"coded_terminal": ID, "coded_not_terminal": REL, "not_coded": NOT}),
        "h_G": ("safe_stop", {"first_class": ID, "unscored_signal": REL, "merged_with_failure": NOT, "absent": NOT}),
        "h_E": ("out_of_scope", {"environment": ID, "judge": REL, "not_coded": NOT}),
        "a_and_b": ("attempts", {"blocked_and_effective": ID, "transcripts_show_response": REL, "effective_only": NOT,
                                 "some_detected": NOT, "not_recorded": NOT}),
    }[quantity]
    if quantity == "a_and_b" and a["boundary"] == "permits_all":
        return NOT  # every attempt let through by construction: not identifiable whatever is recorded
    if a[field] == ND:
        return UND
    v = table[a[field]]
    if a["exhaustion"] == "merged_with_failure":
        v = {ID: REL, REL: NOT}.get(v, v)
    if v == NOT:
        return NOT
    deciding = ["per_step", "attempt_unit", "exhaustion"] + (["boundary"] if quantity == "a_and_b" else [])
    if any(a[f] == ND for f in deciding):
        return UND
    if a["attempt_unit"] is None or a["per_step"] == "aggregate_only":
        return NOT if quantity == "a_and_b" else ATK
    return v


def seed_exposure(a, evidence):
    if evidence == "low":
        return GIVEN
    if a["attempt_unit"] is None:
        return "not usable"  # no attempt unit: whatever the budget
    if ND in (a["attempt_unit"], a["budget"]):
        return UND
    if a["budget"] is None:
        return "not usable"
    if a["budget_varied"] is True or a["budget"] >= 5:
        return "usable"
    return UND if a["budget_varied"] == ND else "fixed condition only"


def test_table3_verdicts_equal_the_seed_rules_applied_by_hand():
    raw = raw_entries()
    t3 = C.verdict_table(C.load(BOOK)).set_index("evaluation")
    for e in raw:
        a = answers(e)
        row = t3.loc[e["name"]]
        for q in ("h_S", "h_G", "h_E", "a_and_b"):
            assert row[q] == seed_verdict(a, q, e["evidence"]), (e["name"], q)
        assert row["exposure"] == seed_exposure(a, e["evidence"]), e["name"]
        assert row["evidence"] == e["evidence"]
    # the counts are the per-evaluation verdicts counted
    counts = C.verdict_counts(C.load(BOOK))
    for scope, sub in (("all", t3), ("per-step published", t3[t3["per_step_published"] == "yes"])):
        for q in ("h_S", "h_G", "h_E", "a_and_b", "censoring", "exposure"):
            c = counts[(counts["scope"] == scope) & (counts["quantity"] == q)]
            assert dict(zip(c["verdict"], c["count"])) == sub[q].value_counts().to_dict()
    # this harness's own entry: everything identified, exposure usable
    own = t3.loc[[n for n in t3.index if n.startswith("control-osworld (this harness")][0]]
    assert list(own[["h_S", "h_G", "h_E", "a_and_b", "censoring", "exposure"]]) == [ID] * 5 + ["usable"]


def test_low_grade_entries_are_counted_but_given_no_verdict():
    entries = C.load(BOOK)
    low = [e for e in entries if e.evidence == "low"]
    assert low
    t2, t3 = C.coding_table(entries), C.verdict_table(entries).set_index("evaluation")
    for e in low:
        assert e.name in set(t2["evaluation"])
        assert set(t3.loc[e.name, ["h_S", "h_G", "h_E", "a_and_b", "censoring", "exposure"]]) == {C.NOT_GIVEN}


# ------------------------------------------------------------------ schema checks

GOOD = {
    "name": "Bench X", "kind": "gui", "evidence": "medium", "sources": ["paper, section 3"],
    "answers": {f: {"answer": ND, "source": "paper, section 3", "note": "not said"} for f in C.ANSWER_FIELDS},
}


def write(tmp_path, entries, **top):
    p = tmp_path / "cb.yaml"
    p.write_text(yaml.safe_dump({"codebook": "t", "evaluations": entries, **top}, sort_keys=False))
    return p


def with_answer(field, **a):
    e = yaml.safe_load(yaml.safe_dump(GOOD))
    e["answers"][field] = a
    return e


def test_a_good_entry_loads(tmp_path):
    (e,) = C.load(write(tmp_path, [with_answer("safe_stop", answer="first_class", source="s", quote="q")]))
    assert e.value("safe_stop") == "first_class" and e.answers["safe_stop"].quote == "q"


@pytest.mark.parametrize("entry,message", [
    (with_answer("safe_stop", answer="first_class", source="paper §3"), r"\(Bench X\): field 'safe_stop': no evidence: 'quote'"),
    (with_answer("out_of_scope", answer="environment", quote="q"), r"\(Bench X\): field 'out_of_scope': no evidence: 'source'"),
    (with_answer("censoring", answer=ND, source="s"), r"\(Bench X\): field 'censoring': no evidence: a not_determined answer needs a 'note'"),
    (with_answer("safe_stop", answer="sometimes", source="s", quote="q"), r"\(Bench X\): field 'safe_stop' is 'sometimes'; allowed: first_class"),
    (with_answer("multi_agent", answer="many", source="s", quote="q"), r"\(Bench X\): field 'multi_agent' is 'many'"),
    (with_answer("budget", answer=0, source="s", quote="q"), r"\(Bench X\): field 'budget' must be a whole number"),
    (with_answer("budget_varied", answer="often", source="s", quote="q"), r"\(Bench X\): field 'budget_varied' must be true"),
    (with_answer("per_step", source="s", quote="q"), r"\(Bench X\): field 'per_step': no answer"),
    (with_answer("per_step", answer="counts", source="s", quote="q", page=3), r"\(Bench X\): field 'per_step': unknown key\(s\) page"),
    ({**GOOD, "answers": {k: v for k, v in GOOD["answers"].items() if k != "boundary"}}, r"\(Bench X\): answer field\(s\) missing: boundary"),
    ({**GOOD, "answers": {**GOOD["answers"], "vibes": {"answer": "x", "source": "s", "quote": "q"}}}, r"\(Bench X\): unknown answer field\(s\) vibes"),
    ({**GOOD, "answers": {**GOOD["answers"], "safe_stop": "first_class"}}, r"\(Bench X\): field 'safe_stop': each answer is a mapping"),
    ({**GOOD, "evidence": "solid"}, r"\(Bench X\): field 'evidence' is 'solid'; allowed: high, medium, low"),
    ({**GOOD, "kind": "robot"}, r"\(Bench X\): field 'kind' is 'robot'"),
    ({**GOOD, "sources": []}, r"\(Bench X\): field 'sources' is missing"),
    ({**GOOD, "url": "x"}, r"\(Bench X\): unknown field\(s\) url"),
])
def test_bad_entries_are_rejected_naming_the_file_entry_and_field(tmp_path, entry, message):
    p = write(tmp_path, [GOOD | {"name": "Bench A"}, entry])
    with pytest.raises(C.CodebookError, match=r"cb\.yaml: evaluation 2 " + message):
        C.load(p)


def test_file_level_errors(tmp_path):
    with pytest.raises(C.CodebookError, match=r"cb\.yaml: field 'include': no such file 'nope\.yaml'"):
        C.load(write(tmp_path, [GOOD], include=["nope.yaml"]))
    with pytest.raises(C.CodebookError, match="used twice: Bench X"):
        C.load(write(tmp_path, [GOOD, GOOD]))
    with pytest.raises(C.CodebookError, match="unknown top-level field"):
        C.load(write(tmp_path, [GOOD], extra=1))
    with pytest.raises(C.CodebookError, match="no evaluations found"):
        C.load(write(tmp_path, []))


def test_undetermined_answers_never_become_a_verdict(tmp_path):
    full = {"attempt_unit": "step", "per_step": "trajectories", "budget": 30, "budget_varied": False, "budget_disclosed": "no",
            "completion": "coded_terminal", "safe_stop": "first_class", "out_of_scope": "environment",
            "attempts": "blocked_and_effective", "boundary": "controlled", "exhaustion": "separate", "censoring": "administrative",
            "multi_agent": "no"}
    def entry(**over):
        a = {**full, **over}
        return {**GOOD, "answers": {f: ({"answer": v, "source": "s", "note": "n"} if v == ND else {"answer": v, "source": "s", "quote": "q"})
                                    for f, v in a.items()}}
    v = {j.quantity: j.verdict for j in C.audit_entry(C.load(write(tmp_path, [entry()]))[0])}
    assert v == {"h_S": ID, "h_G": ID, "h_E": ID, "a_and_b": ID, "censoring": ID, "exposure": "usable"}
    v = {j.quantity: j.verdict for j in C.audit_entry(C.load(write(tmp_path, [entry(per_step=ND)]))[0])}
    assert v["h_S"] == v["h_G"] == v["h_E"] == v["a_and_b"] == UND and v["censoring"] == ID
    v = {j.quantity: j.verdict for j in C.audit_entry(C.load(write(tmp_path, [entry(safe_stop=ND, boundary=ND)]))[0])}
    assert v["h_G"] == UND and v["a_and_b"] == UND and v["h_E"] == ID
    v = {j.quantity: j.verdict for j in C.audit_entry(C.load(write(tmp_path, [entry(budget=3, budget_varied=ND)]))[0])}
    assert v["exposure"] == UND
    v = {j.quantity: j.verdict for j in C.audit_entry(C.load(write(tmp_path, [entry(budget=3)]))[0])}
    assert v["exposure"] == "fixed condition only"
    v = {j.quantity: j.verdict for j in C.audit_entry(C.load(write(tmp_path, [entry(attempt_unit=None, budget=ND)]))[0])}
    assert v["exposure"] == "not usable" and v["h_S"] == ATK  # no attempt unit: at most an incidence at K


# ------------------------------------------------------------------ the command

def test_audit_command_writes_both_tables(tmp_path):
    r = CliRunner().invoke(audit_command, ["--codebook", str(BOOK), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    out = tmp_path / "o"
    for name in ("audit.md", "table2.md", "table2.csv", "table2_counts.csv", "table3.md", "table3.csv", "table3_counts.csv"):
        assert (out / name).is_file(), name
    counts = pd.read_csv(out / "table2_counts.csv").set_index("question")
    expect = independent_counts(raw_entries())
    assert int(counts.loc["out_of_scope_coded", "yes"]) == expect["out_of_scope_coded"].get("yes", 0)
    t3 = pd.read_csv(out / "table3.csv")
    assert len(t3) == len(raw_entries()) and "evidence" in t3.columns
    assert "| OSWorld / OSWorld-Verified | gui | medium |" in (out / "table2.md").read_text()
    assert "## External: AgentDojo" in (out / "audit.md").read_text()
    # same input, same bytes
    CliRunner().invoke(audit_command, ["--codebook", str(BOOK), "--out", str(tmp_path / "p")])
    for name in ("table2.md", "table3.csv"):
        assert (out / name).read_bytes() == (tmp_path / "p" / name).read_bytes()
    r = CliRunner().invoke(audit_command, ["--codebook", str(BOOK), "--out", str(tmp_path / "a.md")])
    assert r.exit_code == 0 and (tmp_path / "a.md").read_text().startswith("# Identifiability audit")


def test_audit_command_reports_a_bad_codebook(tmp_path):
    p = write(tmp_path, [with_answer("safe_stop", answer="first_class", source="s")])
    r = CliRunner().invoke(audit_command, ["--codebook", str(p), "--out", str(tmp_path / "o")])
    assert r.exit_code != 0 and "evaluation 1 (Bench X): field 'safe_stop': no evidence" in r.output


def test_the_report_audits_the_codebook_beside_the_runs(tmp_path):
    from control_osworld.analysis.cli import report_command
    from control_osworld.testing.synthetic_tables import synthetic_dataset

    runs, scores = synthetic_dataset(60, seed=3)
    runs.to_parquet(tmp_path / "runs.parquet")
    scores.to_parquet(tmp_path / "scores.parquet")
    r = CliRunner().invoke(report_command, ["--logs", str(tmp_path / "runs.parquet"), "--scores", str(tmp_path / "scores.parquet"),
                                            "--out", str(tmp_path / "r"), "--codebook", str(BOOK), "--resamples", "20", "--no-plots"])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "r" / "identifiability.md").read_text()
    assert "## These runs" in md and "## External: OSWorld / OSWorld-Verified" in md and "evidence: medium" in md
    assert f"| h_S | {C.NOT_GIVEN} |" in md  # the low-grade entries: no verdict
