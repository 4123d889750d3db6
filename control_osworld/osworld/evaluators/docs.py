"""Document metrics (Writer): our implementations of a subset of upstream OSWorld's
desktop_env/evaluators/metrics/docs.py, with python-docx for .docx and odfpy for .odt text.
"""

from __future__ import annotations

import os
import re
from typing import Any

from control_osworld.osworld.evaluators.metrics import _ratio, match_value_to_rule


def _docx(path: str | None):
    if not path or not os.path.exists(path):
        return None
    from docx import Document

    try:
        return Document(path)
    except Exception:
        return None


def _paragraph_texts(path: str) -> list[str] | None:
    if path.endswith(".docx"):
        d = _docx(path)
        return None if d is None else [p.text for p in d.paragraphs]
    if path.endswith(".odt"):
        from odf import teletype, text
        from odf.opendocument import load

        try:
            doc = load(path)
        except Exception:
            return None
        return [teletype.extractText(p) for p in doc.getElementsByType(text.P)]
    return None


def compare_docx_files(file1: str | None, file2: str | None, **options) -> float:
    """Follows metrics/docs.py:compare_docx_files: compare the paragraphs' text of two .docx
    (or .odt) files. Options: `ignore_blanks` (default True: whitespace runs collapse, compare
    the whole text), `ignore_case`, `ignore_order`, `delete_empty_lines`, `content_only` /
    `fuzzy_match` (rapidfuzz's fuzz.ratio, computed in fuzz.py)."""
    if not file1 or not file2:
        return 0.0
    p1, p2 = _paragraph_texts(file1), _paragraph_texts(file2)
    if p1 is None or p2 is None:
        return 0.0
    if options.get("ignore_order", False):
        p1, p2 = sorted(p1), sorted(p2)
    if options.get("delete_empty_lines", False):
        p1, p2 = [p for p in p1 if p.strip()], [p for p in p2 if p.strip()]
    ic = options.get("ignore_case", False)
    if options.get("content_only", False) or options.get("ignore_blanks", True):
        t1 = re.sub(r"\s+", " ", "\n".join(p1)).strip()
        t2 = re.sub(r"\s+", " ", "\n".join(p2)).strip()
        if ic:
            t1, t2 = t1.lower(), t2.lower()
        if options.get("content_only", False) or options.get("fuzzy_match", False):
            return _ratio(t1, t2)
        return 1.0 if t1 == t2 else 0.0
    if len(p1) != len(p2):
        return 0.0
    for a, b in zip(p1, p2):
        if ic:
            a, b = a.lower(), b.lower()
        if a != b:
            return 0.0
    return 1.0


def compare_docx_tables(docx_file1: str | None, docx_file2: str | None) -> float:
    """Follows metrics/docs.py:compare_docx_tables: same number of tables, each with the same
    shape and the same (stripped) cell texts."""
    d1, d2 = _docx(docx_file1), _docx(docx_file2)
    if d1 is None or d2 is None or len(d1.tables) != len(d2.tables):
        return 0.0
    for t1, t2 in zip(d1.tables, d2.tables):
        if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
            return 0.0
        for i in range(len(t1.rows)):
            for j in range(len(t1.columns)):
                if t1.cell(i, j).text.strip() != t2.cell(i, j).text.strip():
                    return 0.0
    return 1.0


def is_first_line_centered(docx_file: str | None) -> float:
    """Follows metrics/docs.py:is_first_line_centered: the first paragraph is centred."""
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    d = _docx(docx_file)
    if d is None or not d.paragraphs:
        return 0.0
    return 1.0 if d.paragraphs[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER else 0.0


def compare_font_names(docx_file: str | None, rules: dict) -> float:
    """Follows metrics/docs.py:compare_font_names: every run's font is rules["font_name"]."""
    d = _docx(docx_file)
    if d is None:
        return 0.0
    want = rules["font_name"]
    for p in d.paragraphs:
        for r in p.runs:
            if r.text.strip() and _run_font(d, p, r) != want:
                return 0.0
    return 1.0


def contains_page_break(docx_file: str | None, rules: dict | None = None) -> float:
    """Follows metrics/docs.py:contains_page_break: some run holds `<w:br w:type="page"/>`;
    we also accept a paragraph with `pageBreakBefore` (how LibreOffice often saves one)."""
    d = _docx(docx_file)
    if d is None:
        return 0.0
    w = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
    for el in d.element.body.iter():
        if el.tag == f"{w}br" and el.get(f"{w}type") == "page":
            return 1.0
        if el.tag == f"{w}pageBreakBefore" and el.get(f"{w}val", "true") not in ("0", "false"):
            return 1.0
    return 0.0


def _effective(d, p, r, attr: str) -> Any:
    """A run's font attribute, falling back to its paragraph style's, then the style chain."""
    v = getattr(r.font, attr)
    if v is not None:
        return v
    style = p.style
    while style is not None:
        v = getattr(style.font, attr, None)
        if v is not None:
            return v
        style = style.base_style
    return None


def _run_font(d, p, r) -> str | None:
    return _effective(d, p, r, "name")


def _paragraph_attrs(d, p) -> dict:
    runs = [r for r in p.runs if r.text.strip()]
    align = p.paragraph_format.alignment
    if align is None and p.style is not None and p.style.paragraph_format is not None:
        align = p.style.paragraph_format.alignment
    size = None
    sizes = {(_effective(d, p, r, "size").pt if _effective(d, p, r, "size") is not None else None) for r in runs}
    if len(sizes) == 1:
        size = sizes.pop()
    return {
        "text": p.text,
        "style": p.style.name if p.style is not None else None,
        "alignment": (align.name.lower() if hasattr(align, "name") and align is not None else None),
        "bold": bool(runs) and all(bool(_effective(d, p, r, "bold")) for r in runs),
        "italic": bool(runs) and all(bool(_effective(d, p, r, "italic")) for r in runs),
        "underline": bool(runs) and all(bool(_effective(d, p, r, "underline")) for r in runs),
        "font_size": size,
        "font_name": (lambda names: names.pop() if len(names) == 1 else None)({_run_font(d, p, r) for r in runs}),
    }


def check_docx(docx_file: str | None, rules: dict) -> float:
    """Ours (in the spirit of docs.py's per-property checks such as is_first_line_centered and
    check_italic_font_size_14): `rules["paragraphs"]` is a list of
    `{"match": regex or "index": i, <attr>: value or {method, ref}}` with attrs `text`, `style`,
    `alignment` (left|center|right|justify), `bold`, `italic`, `underline`, `font_size`,
    `font_name`; the first paragraph matching `match` (or at `index`) must satisfy all. Also
    `rules["tables"]` (minimum number of tables) and `rules["contains"]` / `rules["absent"]`
    (strings that must / must not be in the text)."""
    d = _docx(docx_file)
    if d is None:
        return 0.0
    paragraphs = d.paragraphs
    full = "\n".join(p.text for p in paragraphs)
    for t in d.tables:
        for row in t.rows:
            full += "\n" + "\t".join(c.text for c in row.cells)
    if not all(s in full for s in rules.get("contains", [])):
        return 0.0
    if any(s in full for s in rules.get("absent", [])):
        return 0.0
    if len(d.tables) < int(rules.get("tables", 0)):
        return 0.0
    for want in rules.get("paragraphs", []):
        if "index" in want:
            i = int(want["index"])
            if i >= len(paragraphs):
                return 0.0
            p = paragraphs[i]
        else:
            p = next((p for p in paragraphs if re.search(want["match"], p.text)), None)
            if p is None:
                return 0.0
        attrs = _paragraph_attrs(d, p)
        for k, v in want.items():
            if k in ("index", "match"):
                continue
            got = attrs.get(k)
            if isinstance(v, dict) and "method" in v:
                if not match_value_to_rule(got, v):
                    return 0.0
            elif got != v:
                return 0.0
    return 1.0
