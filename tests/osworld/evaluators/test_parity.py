"""Parity records (evaluators/parity.py): every registered function has one; a task's record
and `tasks coverage`'s exact / approx / shaped columns and `--records`; compare_table rule
types we lack make a task unsupported instead of raising at evaluation."""

from __future__ import annotations

import json

from click.testing import CliRunner

from control_osworld.osworld.cli import tasks_group
from control_osworld.osworld.evaluators import GETTERS, METRICS
from control_osworld.osworld.evaluators.parity import GETTER_PARITY, METRIC_PARITY, task_parity
from control_osworld.osworld.schema import Evaluator


def test_every_registered_function_has_a_parity_record():
    assert set(METRICS) <= set(METRIC_PARITY), sorted(set(METRICS) - set(METRIC_PARITY))
    assert set(GETTERS) <= set(GETTER_PARITY), sorted(set(GETTERS) - set(GETTER_PARITY))
    for p in [*METRIC_PARITY.values(), *GETTER_PARITY.values()]:
        assert p.kind in ("exact", "approximate", "ours")
        if p.kind == "approximate":
            assert p.how, "an approximate function says how"


def test_task_parity():
    exact = Evaluator.model_validate({"func": "exact_match", "result": {"type": "vm_command_line", "command": "x"},
                                      "expected": {"type": "rule", "rules": {"expected": "y"}}})
    rec = task_parity(exact)
    assert rec["parity"] == "exact" and rec["agent_shaped"] == []
    assert [(f["role"], f["name"], f["parity"]) for f in rec["functions"]] == [
        ("metric", "exact_match", "exact"), ("getter", "vm_command_line", "exact"), ("getter", "rule", "exact")]
    mixed = Evaluator.model_validate({"func": ["compare_pdfs", "is_expected_url_pattern_match"],
                                      "result": [{"type": "vm_file", "path": "/a", "dest": "a"},
                                                 {"type": "active_url_from_accessTree"}],
                                      "expected": [{"type": "vm_file", "path": "/b", "dest": "b"},
                                                   {"type": "rule", "rules": {"expected": ["x"]}}]})
    rec = task_parity(mixed)
    assert rec["parity"] == "approximate"
    pdfs = next(f for f in rec["functions"] if f["name"] == "compare_pdfs")
    assert pdfs["parity"] == "approximate" and "pypdf" in pdfs["how"]
    assert rec["agent_shaped"] and "DevTools" in rec["agent_shaped"][0]
    unknown = Evaluator.model_validate({"func": "exact_match", "result": {"type": "not_a_getter_anyone_has"}})
    assert task_parity(unknown)["parity"] == "unreviewed"


def _task(i, func, result, expected=None, options=None):
    ev = {"func": func, "result": result}
    if expected is not None:
        ev["expected"] = expected
    if options is not None:
        ev["options"] = options
    return {"id": i, "snapshot": "s", "instruction": "x", "source": "t", "config": [], "evaluator": ev}


def test_coverage_parity_columns_records_and_table_rule_types(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTROL_OSWORLD_ASSETS", str(tmp_path / "assets"))
    root = tmp_path / "examples"
    docs = {
        "os/exact.json": _task("exact", "exact_match", {"type": "vm_command_line", "command": "echo"},
                               {"type": "rule", "rules": {"expected": "x"}}),
        "os/approx.json": _task("approx", "compare_pdfs", {"type": "vm_file", "path": "/a.pdf", "dest": "a.pdf"},
                                {"type": "vm_file", "path": "/b.pdf", "dest": "b.pdf"}),
        "os/shaped.json": _task("shaped", "check_left_panel", {"type": "accessibility_tree"}),
        "calc/chart.json": _task("chart", "compare_table", {"type": "vm_file", "path": "/a.xlsx", "dest": "a.xlsx"},
                                 {"type": "vm_file", "path": "/b.xlsx", "dest": "b.xlsx"},
                                 {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                                            {"type": "sparkline", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}),
        "calc/data.json": _task("data", "compare_table", {"type": "vm_file", "path": "/a.xlsx", "dest": "a.xlsx"},
                                {"type": "vm_file", "path": "/b.xlsx", "dest": "b.xlsx"},
                                {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}),
    }
    for rel, doc in docs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(doc))
    rec_file = tmp_path / "records.jsonl"
    r = CliRunner().invoke(tasks_group, ["coverage", str(root), "--records", str(rec_file)])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    out = json.loads(lines[-1])
    os_, calc, total = out["domains"]["os"], out["domains"]["calc"], out["total"]
    assert (os_["exact"], os_["approximate"], os_["agent_shaped"]) == (2, 1, 1)
    assert calc["runnable"] == 1 and calc["needs_evaluator"] == 1 and calc["approximate"] == 1
    assert total["which"]["evaluator"] == {"metric compare_table:sparkline": 1}
    assert lines[0].split()[-3:] == ["exact", "approx", "shaped"]
    row = next(line for line in lines if line.startswith("os "))
    assert row.split()[-3:] == ["2", "1", "1"]
    recs = {x["id"]: x for x in map(json.loads, rec_file.read_text().splitlines())}
    assert recs["chart"]["status"] == "blocked" and recs["chart"]["reasons"] == ["metric compare_table:sparkline"]
    assert "parity" not in recs["chart"]
    assert recs["approx"]["parity"] == "approximate" and recs["exact"]["parity"] == "exact"
    assert recs["shaped"]["agent_shaped"] and recs["shaped"]["functions"][0]["name"] == "check_left_panel"
