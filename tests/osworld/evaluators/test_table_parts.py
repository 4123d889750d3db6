"""compare_table's object rules (chart, pivot_table, row_props, col_props, data_validation,
sheet_print) on workbooks the tests write with openpyxl (charts, pivot tables built from
openpyxl's pivot objects and read back from the saved file, dimensions, validations) and CSV
exports written beside them; expected results follow upstream's definitions in
metrics/table.py and metrics/utils.py."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest
from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.worksheet.datavalidation import DataValidation

from control_osworld.osworld.evaluators import METRICS
from control_osworld.osworld.evaluators.metrics import match_value_to_rule
from control_osworld.osworld.evaluators.parity import unsupported_options
from control_osworld.osworld.evaluators.table_parts import (
    load_charts,
    load_pivot_tables,
    printed_sheet,
)

ROWS = [["Region", "Item", "Qty"], ["N", "a", 1], ["S", "b", 5], ["N", "b", 2]]
t = METRICS["compare_table"]


def _book(path: Path, rows=ROWS, chart: str | None = None, title: str | None = "Sales", cats: str = "A2:A4",
          hidden: tuple[int, ...] = (), dv: DataValidation | None = None, width: float | None = None) -> str:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    for r in rows:
        ws.append(r)
    if chart:
        ch = BarChart() if chart == "bar" else LineChart()
        ch.add_data(Reference(ws, min_col=3, min_row=1, max_row=len(rows)), titles_from_data=True)
        ch.set_categories(Reference(ws, range_string=f"Sheet1!{cats}"))
        if title:
            ch.title = title
        ws.add_chart(ch, "E2")
    for n in hidden:
        ws.row_dimensions[n].hidden = True
    if width is not None:
        ws.column_dimensions["B"].width = width
    if dv is not None:
        ws.add_data_validation(dv)
    wb.save(path)
    return str(path)


def _chart_rule(props):
    return {"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0", "chart_props": props}


def test_chart_rule_compares_data_source_type_and_title(tmp_path):
    gold = _book(tmp_path / "g.xlsx", chart="bar")
    same = _book(tmp_path / "s.xlsx", chart="bar")
    line = _book(tmp_path / "l.xlsx", chart="line")
    retitled = _book(tmp_path / "r.xlsx", chart="bar", title="Other")
    other_cats = _book(tmp_path / "c.xlsx", chart="bar", cats="B2:B4")
    none = _book(tmp_path / "n.xlsx")
    rule = _chart_rule(["type", "title"])
    assert t(same, gold, rules=[rule]) == 1
    assert t(line, gold, rules=[rule]) == 0  # lineChart != barChart
    assert t(retitled, gold, rules=[rule]) == 0
    assert t(retitled, gold, rules=[_chart_rule(["type"])]) == 1  # only the props asked for
    assert t(other_cats, gold, rules=[_chart_rule([])]) == 0  # keyed by the series' references
    assert t(none, gold, rules=[rule]) == 0
    assert t(none, _book(tmp_path / "n2.xlsx"), rules=[rule]) == 1  # no charts on either side: equal
    charts = load_charts(openpyxl.load_workbook(gold)["Sheet1"], chart_props=["type", "title", "direction", "xtitle"])
    assert charts == {"'Sheet1'!$C$2:$C$4,'Sheet1'!$A$2:$A$4": {"type": "barChart", "title": "Sales",
                                                               "direction": "col", "xtitle": None}}
    # a chart without a title reads None, as upstream's bare except
    untitled = load_charts(openpyxl.load_workbook(_book(tmp_path / "u.xlsx", chart="bar", title=None))["Sheet1"],
                           chart_props=["title"])
    assert list(untitled.values()) == [{"title": None}]


def test_object_rules_on_missing_sheets_and_formats(tmp_path):
    gold = _book(tmp_path / "g.xlsx", chart="bar")
    # a sheet the result lacks has no objects: equal to a chartless expected sheet, as upstream
    miss = {"type": "chart", "sheet_idx0": "RNNope", "sheet_idx1": "ENNope", "chart_props": ["type"]}
    assert t(gold, gold, rules=[miss]) == 1
    assert t(gold, gold, rules=[{**miss, "sheet_idx1": "EI0"}]) == 0
    # a csv result cannot hold charts (upstream's openpyxl load fails): 0
    csv = tmp_path / "r.csv"
    csv.write_text("Region,Item,Qty\nN,a,1\n")
    assert t(str(csv), gold, rules=[_chart_rule(["type"])]) == 0
    assert t(str(tmp_path / "absent.xlsx"), gold, rules=[_chart_rule(["type"])]) == 0


def _pivot_book(path: Path, row_field: int = 0, data_field: int = 2, subtotal: str = "sum",
                page: bool = False, hidden_item: bool = False, blank_first: bool = False) -> str:
    from openpyxl.pivot.cache import (
        CacheDefinition,
        CacheField,
        CacheSource,
        SharedItems,
        WorksheetSource,
    )
    from openpyxl.pivot.record import RecordList
    from openpyxl.pivot.table import (
        DataField,
        FieldItem,
        Location,
        PageField,
        PivotField,
        RowColField,
        TableDefinition,
    )

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Data"
    for r in ROWS:
        ws.append(r)
    out = wb.create_sheet("Sheet2")
    cache = CacheDefinition(
        cacheSource=CacheSource(type="worksheet", worksheetSource=WorksheetSource(ref="A1:C4", sheet="Data")),
        cacheFields=[CacheField(name=n, sharedItems=SharedItems()) for n in ROWS[0]])
    cache.records = RecordList()
    items = [[FieldItem(x=0, h=True if hidden_item else None), FieldItem(x=1), FieldItem(t="default")],
             [FieldItem(x=0), FieldItem(x=1), FieldItem(t="default")], []]
    if blank_first:
        items[0] = []
    fields = [PivotField(items=i) for i in items]
    pt = TableDefinition(name="Pivot1", cacheId=1, dataCaption="Values",
                         location=Location(ref="A3:B6", firstHeaderRow=1, firstDataRow=1, firstDataCol=1),
                         pivotFields=fields, rowFields=[RowColField(x=row_field)],
                         pageFields=[PageField(fld=1)] if page else [],
                         dataFields=[DataField(fld=data_field, subtotal=subtotal, name="Sum - Qty")])
    pt.cache = cache
    out.add_pivot(pt)
    wb.save(path)
    return str(path)


def test_pivot_table_rule(tmp_path):
    props = ["col_fields", "filter", "row_fields", "data_fields"]
    rule = {"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2", "pivot_props": props}
    gold = _pivot_book(tmp_path / "g.xlsx")
    assert t(_pivot_book(tmp_path / "s.xlsx"), gold, rules=[rule]) == 1
    assert t(_pivot_book(tmp_path / "r.xlsx", row_field=1), gold, rules=[rule]) == 0
    assert t(_pivot_book(tmp_path / "a.xlsx", subtotal="average"), gold, rules=[rule]) == 0
    assert t(_pivot_book(tmp_path / "p.xlsx", page=True), gold, rules=[rule]) == 0  # filter fields differ
    assert t(_pivot_book(tmp_path / "h.xlsx", hidden_item=True), gold, rules=[rule]) == 0  # selection differs
    assert t(_pivot_book(tmp_path / "h2.xlsx", hidden_item=True), gold,
             rules=[{**rule, "pivot_props": ["row_fields", "data_fields"]}]) == 1
    assert t(_book(tmp_path / "plain.xlsx"), gold, rules=[rule]) == 0  # no pivot (and no Sheet2)
    # upstream's key: the source narrowed by the item-less fields at both ends, indices shifted
    ws = openpyxl.load_workbook(gold)["Sheet2"]
    got = load_pivot_tables(ws, pivot_props=props + ["name", "data_fields_name"])
    assert got == {"worksheet;(1, 1):(4, 2);Data": {
        "name": "Pivot1", "selection": [{(None, 0), (None, 1)}, {(None, 0), (None, 1)}], "filter_fields": set(),
        "col_fields": [], "row_fields": [0], "data_fields": ["2;Sum - Qty;sum;normal"]}}
    shifted = load_pivot_tables(openpyxl.load_workbook(_pivot_book(tmp_path / "b.xlsx", row_field=1, blank_first=True))
                                ["Sheet2"], pivot_props=["row_fields", "data_fields", "ordered", "selection"])
    assert shifted == {"worksheet;(1, 2):(4, 2);Data": {"row_fields": [0], "data_fields": ["1;;sum;normal"],
                                                       "selection": [[(None, 0), (None, 1)]]}}


def test_row_and_col_props(tmp_path):
    rule = {"type": "row_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["hidden"]}
    gold = _book(tmp_path / "g.xlsx", hidden=(3,))
    assert t(_book(tmp_path / "s.xlsx", hidden=(3,)), gold, rules=[rule]) == 1
    assert t(_book(tmp_path / "n.xlsx"), gold, rules=[rule]) == 0
    assert t(_book(tmp_path / "w.xlsx", hidden=(2,)), gold, rules=[rule]) == 0
    assert t(_book(tmp_path / "x.xlsx", hidden=(2, 3)), gold, rules=[rule]) == 0
    col = {"type": "col_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["width"]}
    wide = _book(tmp_path / "c.xlsx", width=30)
    assert t(_book(tmp_path / "c2.xlsx", width=30), wide, rules=[col]) == 1
    assert t(_book(tmp_path / "c3.xlsx", width=12), wide, rules=[col]) == 0


def _dv(sqref="D2:D29", formula='"Pass,Fail,Held"', kind="list") -> DataValidation:
    dv = DataValidation(type=kind, formula1=formula)
    dv.add(sqref)
    return dv


DV_PROPS = [{"ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D2:D1048576"]},
             "type": {"method": "eq", "ref": "list"},
             "formula1": {"method": "str_set_eq", "ref": ["Pass", "Fail", "Held"]}}]


@pytest.mark.parametrize("dv, score", [
    (_dv(), 1), (_dv("D2:D1048576"), 1), (_dv(formula='"Held,Pass,Fail"'), 1),
    (_dv("D2:D20"), 0),  # does not cover the subset
    (_dv("C2:D29"), 0),  # goes beyond the superset
    (_dv(formula='"Pass,Fail"'), 0), (_dv(kind="whole", formula="1"), 0), (None, 0),
])
def test_data_validation_rule(tmp_path, dv, score):
    book = _book(tmp_path / "b.xlsx", dv=dv)
    rule = {"type": "data_validation", "sheet_idx": 0, "dv_props": DV_PROPS}
    assert t(book, None, rules=[rule]) == score
    assert t(book, None, rules=[{**rule, "sheet_idx": "RNMissing"}]) == 0


def test_data_validation_every_validation_must_match_a_pattern(tmp_path):
    path = tmp_path / "two.xlsx"
    wb = openpyxl.Workbook()
    wb.active.add_data_validation(_dv())
    wb.active.add_data_validation(_dv("F2:F9", kind="whole", formula="1"))
    wb.save(path)
    assert t(str(path), None, rules=[{"type": "data_validation", "sheet_idx": 0, "dv_props": DV_PROPS}]) == 0


def test_match_rules_of_upstream_on_strings_and_ranges():
    assert match_value_to_rule('"a,b"', {"method": "str_list_eq", "ref": ["a", "b"]})
    assert not match_value_to_rule('"b,a"', {"method": "str_list_eq", "ref": ["a", "b"]})
    assert match_value_to_rule('"b,a"', {"method": "str_set_eq", "ref": ["a", "b"]})
    assert match_value_to_rule(["b", "a"], {"method": "str_set_eq", "ref": ["a", "b"]})
    assert not match_value_to_rule(None, {"method": "str_set_eq", "ref": ["a"]})
    assert match_value_to_rule("A1:A5 C1", {"method": "spreadsheet_range", "ref": ["A1:A3", "A1:C9"]})
    assert not match_value_to_rule("A2:A5", {"method": "spreadsheet_range", "ref": ["A1:A3", "A1:C9"]})
    assert not match_value_to_rule(None, {"method": "spreadsheet_range", "ref": ["A1", "A1:C9"]})


def test_sheet_print_compares_the_csv_exports(tmp_path):
    r = _book(tmp_path / "Result.xlsx")
    g = _book(tmp_path / "Gold.xlsx")
    rule = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
    (tmp_path / "Gold-Sheet1.csv").write_text("Region,Qty\nN,1.00\nS,5.00\n")
    assert t(r, g, rules=[rule]) == 0  # the result's export is missing
    (tmp_path / "Result-Sheet1.csv").write_text("Region,Qty  \n  N,1.00\nS,5.00\n\n\n")  # strips, trailing blanks
    assert t(r, g, rules=[rule]) == 1
    assert t(r, g, rules=[{**rule, "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]) == 1
    (tmp_path / "Result-Sheet1.csv").write_text("region,QTY\nN,1.00\nS,5.00\n")
    assert t(r, g, rules=[rule]) == 0
    assert t(r, g, rules=[{**rule, "ignore_case": True}]) == 1
    (tmp_path / "Result-Sheet1.csv").write_text("Region,Qty\nN,1\nS,5.00\n")  # printed value differs
    assert t(r, g, rules=[rule]) == 0
    (tmp_path / "Result-Sheet1.csv").write_bytes("Région,Qty\n".encode("latin-1"))  # not UTF-8: read as Latin-1
    assert printed_sheet(r, "Sheet1") == ["Région,Qty"]
    assert t(r, g, rules=[{**rule, "sheet_idx0": 5}]) == 0  # no such sheet index
    assert t(r, None, rules=[rule]) == 0  # no expected book


def test_only_unimplemented_rule_types_are_unsupported():
    rules = [{"type": k} for k in ("chart", "pivot_table", "row_props", "col_props", "data_validation", "sheet_print",
                                   "sparkline", "filter")]
    assert unsupported_options("compare_table", {"rules": rules}) == ["compare_table:sparkline", "compare_table:filter"]


@pytest.fixture(scope="module")
def lo_books(tmp_path_factory):
    """Books as LibreOffice writes them (what upstream's tasks compare: the agent's file saved by
    Calc, the gold made with Calc): openpyxl-made books converted by `soffice --headless`."""
    import shutil
    import subprocess

    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("lo")
    books = {
        "bar": _book(src / "bar.xlsx", chart="bar", hidden=(3,), dv=_dv()),
        "bar2": _book(src / "bar2.xlsx", chart="bar", hidden=(3,), dv=_dv("D2:D1048576")),
        "line": _book(src / "line.xlsx", chart="line", hidden=(2,), dv=_dv(formula='"Pass,Fail"')),
        "pivot": _pivot_book(src / "pivot.xlsx"),
        "pivot2": _pivot_book(src / "pivot2.xlsx"),
        "pivot_other": _pivot_book(src / "pivot_other.xlsx", row_field=1),
    }
    soffice = shutil.which("soffice") or shutil.which("libreoffice")
    assert soffice, "LibreOffice (soffice) is not installed"
    subprocess.run([soffice, "--headless", "--norestore", f"-env:UserInstallation=file://{out}/profile",
                    "--convert-to", "xlsx:Calc MS Excel 2007 XML", "--outdir", str(out), *books.values()],
                   check=True, capture_output=True, timeout=180)
    return {k: str(out / f"{k}.xlsx") for k in books}


@pytest.mark.slow
def test_object_rules_on_libreoffice_written_books(lo_books):
    b = lo_books
    chart = _chart_rule(["type", "title"])
    rows = {"type": "row_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["hidden"]}
    assert t(b["bar2"], b["bar"], rules=[{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}, chart, rows]) == 1
    assert t(b["line"], b["bar"], rules=[chart]) == 0
    assert t(b["line"], b["bar"], rules=[rows]) == 0
    # Calc keeps the validation's range and list
    dv = {"type": "data_validation", "sheet_idx": 0, "dv_props": DV_PROPS}
    assert t(b["bar"], None, rules=[dv]) == 1 and t(b["bar2"], None, rules=[dv]) == 1
    assert t(b["line"], None, rules=[dv]) == 0
    pivot = {"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2",
             "pivot_props": ["col_fields", "filter", "row_fields", "data_fields"]}
    assert t(b["pivot2"], b["pivot"], rules=[pivot]) == 1
    assert t(b["pivot_other"], b["pivot"], rules=[pivot]) == 0
    got = load_pivot_tables(openpyxl.load_workbook(b["pivot"])["Sheet2"], pivot_props=["row_fields", "data_fields"])
    assert list(got.values()) == [{"row_fields": [0], "data_fields": ["2;;sum;normal"]}]


def test_sheet_print_through_the_engine_with_upstreams_multi_file_getters(tmp_path):
    """Upstream's shape (libreoffice_calc/4f07fbe9...): `multi` vm_file getters fetch each book
    and its CSV export into the cache; the rule finds the export beside the book."""
    import asyncio

    from control_osworld.osworld.evaluators.engine import evaluate
    from tests.osworld.fakes import FakeClient

    book = Path(_book(tmp_path / "src.xlsx")).read_bytes()
    files = {"/home/user/P.xlsx": book, "/home/user/P-Sheet1.csv": "a,1.00\nb,2.00\n",
             "/gold/P_gold.xlsx": book, "/gold/P_gold-Sheet1.csv": "a,1.00\nb,2.00\n\n"}

    def ev(csv_path: str) -> dict:
        return {"func": "compare_table",
                "result": {"type": "vm_file", "multi": True, "path": ["/home/user/P.xlsx", csv_path],
                           "dest": ["P.xlsx", "P-Sheet1.csv"]},
                "expected": {"type": "vm_file", "multi": True, "path": ["/gold/P_gold.xlsx", "/gold/P_gold-Sheet1.csv"],
                             "dest": ["P_gold.xlsx", "P_gold-Sheet1.csv"]},
                "options": {"rules": [{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}]}}

    c = FakeClient(files=files)
    assert asyncio.run(evaluate(c, ev("/home/user/P-Sheet1.csv"))) == 1.0
    assert asyncio.run(evaluate(c, ev("/home/user/absent.csv"))) == 0.0  # the export is missing
    files["/home/user/P-Sheet1.csv"] = "a,1\nb,2.00\n"
    assert asyncio.run(evaluate(FakeClient(files=files), ev("/home/user/P-Sheet1.csv"))) == 0.0
