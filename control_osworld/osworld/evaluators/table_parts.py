"""The parts of a workbook that `compare_table`'s object rules compare: charts, pivot tables,
row / column dimensions, data validations and the printed (CSV-exported) sheet. Our
implementations of upstream OSWorld's desktop_env/evaluators/metrics/utils.py loaders
(`load_charts`, `load_pivot_tables`, `load_rows_or_cols`) and of metrics/table.py's
`_load_sheet` for a CSV export and its `data_validation` rule; each function cites the one it
follows and says where it differs on purpose.

All read openpyxl worksheets (`openpyxl.load_workbook(path)`, as upstream: charts and pivot
tables are kept by openpyxl's reader) or, for the printed sheet, the CSV file next to the book.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from control_osworld.osworld.evaluators.metrics import match_value_to_rule


def _title(title: Any) -> Any:
    """upstream: `title.tx.rich.p[0].r[0].t`, None when any part is missing."""
    try:
        return title.tx.rich.p[0].r[0].t
    except Exception:
        return None


def _ref(data: Any) -> str:
    """A series' value or category reference: numRef.f, else strRef.f, else ""."""
    for kind in ("numRef", "strRef"):
        ref = getattr(data, kind, None)
        if ref is not None and getattr(ref, "f", None) is not None:
            return str(ref.f)
    return ""


def load_charts(ws: Any, **options) -> dict[str, Any]:
    """Follows metrics/utils.py:load_charts: the sheet's charts keyed by their data source
    (each series "values,categories", series joined by ";"), each with the `chart_props` asked
    for: title, legend (position), anchor ([editAs, from.col, to.row, to.col, to.row], upstream's
    order, which repeats to.row), width, height, type (the chart's XML tag: barChart,
    lineChart, ...), direction (barDir), xtitle / ytitle / ztitle. A missing sheet (ws None)
    has none ({}). Charts with the same data source collapse to the last, as upstream.

    Where ours differs: upstream's `hasattr(ser.val, "numRef")` is true for a numRef of None,
    whose missing `.f` then raises; ours falls through to strRef / "" instead. An anchor part
    that does not exist (a one-cell or absolute anchor has no `to`; upstream raises) is None."""
    if ws is None:
        return {}
    props = set(options.get("chart_props", []))
    out: dict[str, Any] = {}
    for ch in ws._charts:
        series = ";".join(f"{_ref(s.val)},{_ref(s.cat)}" for s in ch.series)
        info: dict[str, Any] = {}
        if "title" in props:
            info["title"] = _title(ch.title)
        if "legend" in props:
            info["legend"] = ch.legend.position if ch.legend is not None else None
        if "anchor" in props:
            a = ch.anchor
            frm, to = getattr(a, "_from", None), getattr(a, "to", None)
            info["anchor"] = [getattr(a, "editAs", None), getattr(frm, "col", None), getattr(to, "row", None),
                              getattr(to, "col", None), getattr(to, "row", None)]
        if "width" in props:
            info["width"] = ch.width
        if "height" in props:
            info["height"] = ch.height
        if "type" in props:
            info["type"] = ch.tagname
        if "direction" in props:
            info["direction"] = getattr(ch, "barDir", None)
        for axis in ("x", "y", "z"):
            if f"{axis}title" in props:
                ax = getattr(ch, f"{axis}_axis", None)
                info[f"{axis}title"] = _title(getattr(ax, "title", None))
        out[series] = info
    return out


_PIVOT_ATTRS = {"name": "name", "show_total": "visualTotals", "show_empty_row": "showEmptyRow",
                "show_empty_col": "showEmptyCol", "show_headers": "showHeaders", "location": "location"}
"""`pivot_props` read as they are from the pivot table definition (upstream's names -> openpyxl's)."""


def load_pivot_tables(ws: Any, **options) -> dict[str, Any]:
    """Follows metrics/utils.py:load_pivot_tables: the sheet's pivot tables keyed by their
    source, "type;(row1, col1):(row2, col2);sheet" with the source range narrowed by the
    leading and trailing pivot fields that select no item (left / right bias), each with the
    `pivot_props` asked for: name, show_total (visualTotals), show_empty_row, show_empty_col,
    show_headers, location, selection / filter (per field, the set of (hidden, item index)
    pairs, or lists with "ordered"), filter_fields (the page fields' indices), col_fields,
    row_fields (field indices less the left bias), data_fields ("index;name;subtotal;showDataAs",
    the name only with "data_fields_name"). A missing sheet has none ({}).

    Where ours differs: a pivot whose cache is not a worksheet range (a named range, an external
    source), on which upstream raises, is keyed by "type;name;sheet" of its source, so it equals
    only a pivot of the same kind."""
    if ws is None:
        return {}
    from openpyxl.utils import coordinate_to_tuple

    props = set(options.get("pivot_props", []))
    out: dict[str, Any] = {}
    for pvt in ws._pivots:
        raw = [[(itm.h, itm.x) for itm in (f.items or []) if itm.x is not None] for f in pvt.pivotFields]
        trimmed = list(itertools.dropwhile(lambda r: len(r) == 0, raw))
        left = len(raw) - len(trimmed)
        selection = list(itertools.dropwhile(lambda r: len(r) == 0, reversed(trimmed)))[::-1]
        right = len(trimmed) - len(selection)
        src = pvt.cache.cacheSource
        wsrc = getattr(src, "worksheetSource", None)
        if wsrc is not None and wsrc.ref and ":" in wsrc.ref:
            a, b = wsrc.ref.split(":")
            r1, c1 = coordinate_to_tuple(a)
            r2, c2 = coordinate_to_tuple(b)
            source = f"{src.type};{(r1, c1 + left)}:{(r2, c2 - right)};{wsrc.sheet}"
        else:
            source = f"{src.type};{getattr(wsrc, 'name', None)};{getattr(wsrc, 'sheet', None)}"
        info: dict[str, Any] = {k: getattr(pvt, attr) for k, attr in _PIVOT_ATTRS.items() if k in props}
        if "filter" in props or "selection" in props:
            info["selection"] = selection if "ordered" in props else [set(r) for r in selection]
        if "filter" in props:
            info["filter_fields"] = {f.fld for f in pvt.pageFields}
        if "col_fields" in props:
            info["col_fields"] = [f.x - left for f in pvt.colFields]
        if "row_fields" in props:
            info["row_fields"] = [f.x - left for f in pvt.rowFields]
        if "data_fields" in props:
            named = "data_fields_name" in props
            info["data_fields"] = [f"{f.fld - left:d};{f.name if named else ''};{f.subtotal};{f.showDataAs}"
                                   for f in pvt.dataFields]
        out[source] = info
    return out


def load_rows_or_cols(ws: Any, obj: str, **options) -> dict[Any, dict[str, Any]]:
    """Follows metrics/utils.py:load_rows_or_cols: for every row (`obj="row"`) or column
    (`obj="column"`) dimension the sheet's XML records, the `props` asked for (rows: hidden,
    collapsed, height, ...; columns: width, auto_size, hidden, collapsed, min, max). A missing
    sheet has none ({})."""
    if ws is None:
        return {}
    dims = getattr(ws, f"{obj}_dimensions")
    props = list(dict.fromkeys(options.get("props", [])))
    return {no: {p: getattr(d, p) for p in props} for no, d in list(dims.items())}


def data_validations_match(ws: Any, dv_props: list[dict]) -> bool:
    """Follows metrics/table.py:compare_table's `data_validation` rule: the sheet has at least
    as many data validations as `dv_props` patterns, and every validation matches one pattern
    (`{attribute: {method, ref}}` over ranges (sqref), type, formula1, formula2, operator,
    allowBlank, showDropDown, showInputMessage, showErrorMessage, error, errorTitle,
    errorStyle, prompt, promptTitle, imeMode)."""
    dvs = list(ws.data_validations.dataValidation)
    if len(dvs) < len(dv_props):
        return False
    return all(any(all(match_value_to_rule(getattr(dv, attr), rule) for attr, rule in pattern.items())
                   for pattern in dv_props)
               for dv in dvs)


def read_lines(path: str) -> list[str]:
    """Follows metrics/table.py:_safe_read_file: the file's lines as UTF-8, else Latin-1 (which
    reads any bytes; upstream's later encodings are never reached)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.splitlines()


def printed_sheet(book_path: str, sheet: str) -> list[str] | None:
    """Follows metrics/table.py:_load_sheet for a book given as a path: the CSV export of
    `sheet` that the task's postconfig wrote beside the book ("<book without extension>-<sheet>.csv",
    LibreOffice's name for a per-sheet export), its lines stripped, trailing empty lines dropped
    (returned last line first, as upstream; only equality is compared). None when the file is
    missing or unreadable."""
    name = f"{os.path.splitext(book_path)[0]}-{sheet}.csv"
    try:
        lines = read_lines(name)
    except OSError:
        return None
    return list(itertools.dropwhile(lambda line: len(line) == 0, (line.strip() for line in reversed(lines))))
