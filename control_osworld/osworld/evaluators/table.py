"""Table metrics for xlsx, ods and csv: our implementations of upstream OSWorld's
desktop_env/evaluators/metrics/table.py (`compare_table`, `compare_csv`).

Books are read with openpyxl (xlsx: values and styles) and pandas (values; ods through the
odfpy engine, csv through read_csv as a one-sheet book named after the file). Rules that need
openpyxl (styles, freeze panes, zoom) work on xlsx only and score 0 on other formats.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from control_osworld.osworld.evaluators import table_parts as parts
from control_osworld.osworld.evaluators.metrics import _ratio, match_value_to_rule


class Book:
    """One workbook, whatever its format: sheet names, a pandas frame per sheet (first row as
    header, as upstream's `pd.read_excel(book, sheet)`), openpyxl worksheets for xlsx."""

    def __init__(self, path: str):
        import pandas as pd

        self.path = path
        ext = Path(path).suffix.lower()
        self.kind = ext.lstrip(".")
        self.wb = None
        self.wb_values = None
        if ext == ".csv":
            self.sheet_names = [Path(path).stem]
            self._frames = {self.sheet_names[0]: pd.read_csv(path)}
            self._xl = None
        else:
            engine = "odf" if ext == ".ods" else None
            self._xl = pd.ExcelFile(path, engine=engine)
            self.sheet_names = list(self._xl.sheet_names)
            self._frames = {}
            if ext in (".xlsx", ".xlsm"):
                import openpyxl

                self.wb = openpyxl.load_workbook(path)
                self.wb_values = openpyxl.load_workbook(path, data_only=True)

    def frame(self, name: str):
        if name not in self._frames:
            import pandas as pd

            self._frames[name] = pd.read_excel(self._xl, name)
        return self._frames[name]

    def raw_frame(self, name: str):
        """The sheet without a header row (cell (0,0) is A1)."""
        import pandas as pd

        if self.kind == "csv":
            return pd.read_csv(self.path, header=None)
        return pd.read_excel(self._xl, name, header=None)

    def ws(self, name: str, values: bool = False):
        book = self.wb_values if values else self.wb
        return None if book is None or name not in book.sheetnames else book[name]

    def cell_value(self, name: str, coord: str) -> Any:
        """Follows metrics/utils.py:read_cell_value: numbers as float, text as str, None if empty."""
        ws = self.ws(name, values=True)
        if ws is not None:
            v = ws[coord].value
        else:
            from openpyxl.utils import coordinate_to_tuple

            row, col = coordinate_to_tuple(coord)
            df = self.raw_frame(name)
            try:
                v = df.iat[row - 1, col - 1]
            except IndexError:
                return None
            try:
                import pandas as pd

                if pd.isna(v):
                    return None
            except (TypeError, ValueError):
                pass
            if hasattr(v, "item"):
                v = v.item()
        if isinstance(v, bool):
            return v
        if isinstance(v, (int, float)):
            return float(v)
        return v


def _sheet(idx: Any, result: Book, expected: Book | None) -> tuple[Book | None, str]:
    """Follows table.py:_parse_sheet_idx: 0 / "RI0" / "RNname" (result), "EI0" / "ENname" (expected)."""
    def by_index(book: Book | None, i: int) -> str:
        if book is None or i >= len(book.sheet_names):
            return ""
        return book.sheet_names[i]

    if isinstance(idx, int):
        return result, by_index(result, idx)
    s = str(idx)
    if s.startswith("RI"):
        return result, by_index(result, int(s[2:]))
    if s.startswith("RN"):
        return result, s[2:]
    if s.startswith("EI"):
        return expected, by_index(expected, int(s[2:]))
    if s.startswith("EN"):
        return expected, s[2:]
    raise ValueError(f"unrecognized sheet index {idx!r}")


_STYLE = {
    "font_name": lambda c: c.font.name,
    "font_size": lambda c: c.font.size,
    "font_bold": lambda c: c.font.bold,
    "font_italic": lambda c: c.font.italic,
    "font_underline": lambda c: c.font.underline,
    "font_color": lambda c: c.font.color.rgb if c.font.color is not None else None,
    "bgcolor": lambda c: c.fill.fgColor.rgb if c.fill is not None and c.fill.fgColor is not None else None,
    "fgcolor": lambda c: c.fill.fgColor.rgb if c.fill is not None and c.fill.fgColor is not None else None,
    "fill_type": lambda c: c.fill.fill_type if c.fill is not None else None,
    "number_format": lambda c: c.number_format,
    "hyperlink": lambda c: c.hyperlink.target if c.hyperlink is not None else "",
    "horizontal_alignment": lambda c: c.alignment.horizontal,
}
"""Follows metrics/utils.py:_read_cell_style (the properties we support)."""


def _cell_style(prop: str, cell) -> Any:
    if prop not in _STYLE:
        raise NotImplementedError(f"cell style {prop!r}")
    return _STYLE[prop](cell)


def _frames_equal(a, b, precision: int) -> bool:
    a = a.round(precision) if hasattr(a, "round") else a
    b = b.round(precision) if hasattr(b, "round") else b
    return bool(a.equals(b))


def compare_table(result: str | None, expected: str | None = None, **options) -> float:
    """Follows metrics/table.py:compare_table: load the result (and expected) book and check
    `options["rules"]` in order, stopping at the first failure. Rule types: `sheet_name`,
    `sheet_data` (frames equal after rounding to `precision`, default 4), `sheet_fuzzy`
    (per-cell `exact_match` | `includes` | `included_by` | `fuzzy_match` over ranges, with
    upstream's normalisations), `check_cell` (`props`: value and styles, each a
    `{method, ref}` rule), `style` (listed `props` equal on every non-empty cell; xlsx),
    `freeze`, `zoom`, and the object rules of `table_parts` (xlsx): `chart`, `pivot_table`,
    `row_props`, `col_props` (each: the two sheets' objects equal), `data_validation`, and
    `sheet_print` (the CSV exports beside the books equal, `ignore_case` optional). A missing
    or unreadable result scores 0; a rule on a sheet the book lacks compares no objects ({}),
    as upstream, except `data_validation` and `sheet_print`, which score 0."""
    if result is None or not os.path.exists(result):
        return 0.0
    try:
        rb = Book(result)
    except Exception:
        return 0.0
    eb = Book(expected) if expected is not None else None
    for r in options.get("rules", []):
        t = r["type"]
        if t == "sheet_name":
            ok = eb is not None and rb.sheet_names == eb.sheet_names
        elif t == "sheet_data":
            b1, n1 = _sheet(r["sheet_idx0"], rb, eb)
            b2, n2 = _sheet(r["sheet_idx1"], rb, eb)
            if b1 is None or b2 is None or n1 not in b1.sheet_names or n2 not in b2.sheet_names:
                return 0.0
            ok = _frames_equal(b1.frame(n1), b2.frame(n2), int(r.get("precision", 4)))
        elif t == "sheet_fuzzy":
            ok = _sheet_fuzzy(r, rb, eb)
        elif t == "check_cell":
            b, n = _sheet(r["sheet_idx"], rb, eb)
            if b is None or n not in b.sheet_names:
                return 0.0
            ok = True
            for prop, rule in r["props"].items():
                if prop == "value":
                    val = b.cell_value(n, r["coordinate"])
                else:
                    ws = b.ws(n)
                    if ws is None:
                        return 0.0
                    val = _cell_style(prop, ws[r["coordinate"]])
                ok = ok and match_value_to_rule(val, rule)
        elif t == "style":
            b1, n1 = _sheet(r["sheet_idx0"], rb, eb)
            b2, n2 = _sheet(r["sheet_idx1"], rb, eb)
            ws1, ws2 = (b1.ws(n1) if b1 else None), (b2.ws(n2) if b2 else None)
            if ws1 is None or ws2 is None:
                return 0.0
            ok = _styles(ws1, r["props"]) == _styles(ws2, r["props"])
        elif t == "freeze":
            b1, n1 = _sheet(r["sheet_idx0"], rb, eb)
            b2, n2 = _sheet(r["sheet_idx1"], rb, eb)
            ws1, ws2 = (b1.ws(n1) if b1 else None), (b2.ws(n2) if b2 else None)
            if ws1 is None or ws2 is None:
                return 0.0
            ok = _freeze_key(ws1) == _freeze_key(ws2)
        elif t == "zoom":
            b, n = _sheet(r["sheet_idx"], rb, eb)
            ws = b.ws(n) if b else None
            if ws is None:
                return 0.0
            ok = match_value_to_rule(ws.sheet_view.zoomScale or 100.0, r)
        elif t in _OBJECTS:
            sides = []
            for key in ("sheet_idx0", "sheet_idx1"):
                b, n = _sheet(r[key], rb, eb)
                if b is None or b.wb is None:
                    return 0.0
                sides.append(_OBJECTS[t](b.ws(n), **{k: v for k, v in r.items() if k != "type"}))
            ok = sides[0] == sides[1]
        elif t == "data_validation":
            b, n = _sheet(r["sheet_idx"], rb, eb)
            ws = b.ws(n) if b else None
            if ws is None:
                return 0.0
            ok = parts.data_validations_match(ws, r["dv_props"])
        elif t == "sheet_print":
            printed = []
            for key in ("sheet_idx0", "sheet_idx1"):
                b, n = _sheet(r[key], rb, eb)
                lines = parts.printed_sheet(b.path, n) if b is not None and n else None
                if lines is None:
                    return 0.0
                printed.append([x.lower() for x in lines] if r.get("ignore_case", False) else lines)
            ok = printed[0] == printed[1]
        else:
            raise NotImplementedError(f"compare_table rule type {t!r} is not implemented here")
        if not ok:
            return 0.0
    return 1.0


_OBJECTS = {
    "chart": parts.load_charts,
    "pivot_table": parts.load_pivot_tables,
    "row_props": lambda ws, **r: parts.load_rows_or_cols(ws, obj="row", **r),
    "col_props": lambda ws, **r: parts.load_rows_or_cols(ws, obj="column", **r),
}
"""Rule type -> the loader of the objects both sheets must have equal (table_parts)."""


def _styles(ws, props: list[str]) -> dict:
    out = {}
    for row in ws.iter_rows():
        for c in row:
            if c.value is not None:
                out[c.coordinate] = [_cell_style(p, c) for p in props]
    return out


def _freeze_key(ws) -> tuple:
    pane = ws.sheet_view.pane
    if pane is None:
        return ("none",)
    state = (pane.state or "").lower()
    xs = int(pane.xSplit or 0)
    ys = int(pane.ySplit or 0)
    if state in ("frozen", "frozensplit"):
        return ("frozen", xs, ys)
    return ("other", xs, ys, pane.topLeftCell)


def _sheet_fuzzy(r: dict, rb: Book, eb: Book | None) -> bool:
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.cell_range import MultiCellRange

    b1, n1 = _sheet(r["sheet_idx0"], rb, eb)
    b2, n2 = _sheet(r["sheet_idx1"], rb, eb)
    if b1 is None or b2 is None:
        return False
    for rl in r["rules"]:
        for rng in MultiCellRange(" ".join(rl["range"]) if isinstance(rl["range"], list) else rl["range"]):
            for row, col in rng.cells:
                coord = f"{get_column_letter(col)}{row}"
                v1, v2 = str(b1.cell_value(n1, coord)), str(b2.cell_value(n2, coord))
                for a, b in rl.get("normalization", []):
                    v1, v2 = v1.replace(a, b), v2.replace(a, b)
                if "trim_leadings" in rl:
                    v1, v2 = v1.lstrip(rl["trim_leadings"]), v2.lstrip(rl["trim_leadings"])
                if "trim_trailings" in rl:
                    v1, v2 = v1.rstrip(rl["trim_trailings"]), v2.rstrip(rl["trim_trailings"])
                if "ignore_chars" in rl:
                    ig = set(rl["ignore_chars"])
                    v1 = "".join(ch for ch in v1 if ch not in ig)
                    v2 = "".join(ch for ch in v2 if ch not in ig)
                if rl.get("ignore_case", False):
                    v1, v2 = v1.lower(), v2.lower()
                kind = rl["type"]
                if kind == "includes":
                    ok = v2 in v1
                elif kind == "included_by":
                    ok = v1 in v2
                elif kind == "fuzzy_match":
                    ok = _ratio(v1, v2) * 100 >= rl.get("threshold", 85.0)
                elif kind == "exact_match":
                    ok = v1 == v2
                else:
                    raise NotImplementedError(f"sheet_fuzzy rule type {kind!r}")
                if not ok:
                    return False
    return True


def compare_csv(result: str | None, expected: str | list[str] | None, **options) -> float:
    """Follows metrics/table.py:compare_csv: the files' lines are equal (to any of several
    expected files); `strict=False` strips each line, `ignore_case` lowercases."""
    if result is None or not os.path.exists(result):
        return 0.0

    def lines(p: str) -> list[str]:
        for enc in ("utf-8-sig", "utf-8", "latin-1"):
            try:
                with open(p, encoding=enc) as f:
                    return f.read().splitlines()
            except UnicodeDecodeError:
                continue
        return []

    got = lines(result)
    for exp_file in ([expected] if isinstance(expected, str) else (expected or [])):
        if not exp_file or not os.path.exists(exp_file):
            continue
        a, b = got, lines(exp_file)
        if not options.get("strict", True):
            a, b = [x.strip() for x in a], [x.strip() for x in b]
        if options.get("ignore_case", False):
            a, b = [x.lower() for x in a], [x.lower() for x in b]
        if a == b:
            return 1.0
    return 0.0
