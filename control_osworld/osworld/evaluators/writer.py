"""More Writer metrics: our implementations of upstream OSWorld's desktop_env/evaluators/
metrics/docs.py checks of formatting (line spacing, tab stops, subscripts, footers, colours,
highlights, strike-through, italics), images, references and the default font, with
python-docx and odfpy as upstream. Several first require `compare_docx_files` (docs.py) to
find the two documents' text equal, as upstream does. Colour distance is CIEDE2000 on CIELAB
(scikit-image's rgb2lab / deltaE_ciede2000, reimplemented in `rgb2lab` / `delta_e_ciede2000`).
"""

from __future__ import annotations

import logging
import math
import re
import xml.etree.ElementTree as ET
from io import BytesIO

from control_osworld.osworld.evaluators.docs import compare_docx_files
from control_osworld.osworld.evaluators.fuzz import ratio

log = logging.getLogger(__name__)


def _doc(path):
    """python-docx Document, or None when the file does not open (upstream logs and scores 0)."""
    from docx import Document

    try:
        return Document(path)
    except Exception as e:
        log.info("cannot open %s: %s", path, e)
        return None


def find_default_font(config_file_path: str | None, rules: dict) -> float:
    """Follows metrics/docs.py:find_default_font: in LibreOffice's registrymodifications.xcu,
    the `Standard` value of item /org.openoffice.Office.Writer/DefaultFont equals
    rules["font_name"] (the last such value wins; an unparsable file finds none)."""
    if not config_file_path:
        return 0.0
    ns = {"oor": "http://openoffice.org/2001/registry"}
    font = None
    try:
        root = ET.parse(config_file_path).getroot()
        for item in root.findall('.//item[@oor:path="/org.openoffice.Office.Writer/DefaultFont"]', ns):
            for prop in item.findall('.//prop[@oor:name="Standard"]', ns):
                for value in prop.findall("value", ns):
                    font = value.text
    except (ET.ParseError, OSError) as e:
        log.info("find_default_font: %s", e)
    return 1.0 if font == rules["font_name"] else 0.0


def compare_docx_images(docx_file1: str | None, docx_file2: str | None) -> float:
    """Follows metrics/docs.py:compare_docx_images: the documents' image parts (relationships of
    an image type, in relationship order) are as many and decode to the same pixels."""
    from PIL import Image

    if not docx_file1 or not docx_file2:
        return 0.0
    d1, d2 = _doc(docx_file1), _doc(docx_file2)
    if d1 is None or d2 is None:
        return 0.0

    def blobs(doc) -> list[bytes]:
        return [rel.target_part.blob for rel in doc.part.rels.values() if "image" in rel.reltype]

    i1, i2 = blobs(d1), blobs(d2)
    if len(i1) != len(i2):
        return 0.0
    for a, b in zip(i1, i2):
        if Image.open(BytesIO(a)).tobytes() != Image.open(BytesIO(b)).tobytes():
            return 0.0
    return 1.0


def compare_line_spacing(docx_file1: str | None, docx_file2: str | None) -> float:
    """Follows metrics/docs.py:compare_line_spacing: same text (compare_docx_files), as many
    paragraphs, and each paragraph's line_spacing equal."""
    if not docx_file1 or not docx_file2 or not compare_docx_files(docx_file1, docx_file2):
        return 0.0
    d1, d2 = _doc(docx_file1), _doc(docx_file2)
    if d1 is None or d2 is None or len(d1.paragraphs) != len(d2.paragraphs):
        return 0.0
    ok = all(p1.paragraph_format.line_spacing == p2.paragraph_format.line_spacing
             for p1, p2 in zip(d1.paragraphs, d2.paragraphs))
    return 1.0 if ok else 0.0


def compare_subscript_contains(docx_file1: str | None, docx_file2: str | None) -> float:
    """Follows metrics/docs.py:compare_subscript_contains: some run, at the same paragraph and
    run index in both documents, is subscript in both."""
    if not docx_file1 or not docx_file2:
        return 0.0
    d1, d2 = _doc(docx_file1), _doc(docx_file2)
    if d1 is None or d2 is None:
        return 0.0
    for p1, p2 in zip(d1.paragraphs, d2.paragraphs):
        for r1, r2 in zip(p1.runs, p2.runs):
            if r1.font.subscript and r2.font.subscript:
                return 1.0
    return 0.0


def has_page_numbers_in_footers(docx_file: str | None) -> float:
    """Follows metrics/docs.py:has_page_numbers_in_footers: every section's footer's first
    paragraph has a digit (a page number field saved as its value)."""
    if not docx_file:
        return 0.0
    d = _doc(docx_file)
    if d is None:
        return 0.0
    for section in d.sections:
        footer = section.footer
        text = footer.paragraphs[0].text if footer.paragraphs else ""
        if not any(ch.isdigit() for ch in text):
            return 0.0
    return 1.0


def check_tabstops(docx_file1: str | None, docx_file2: str | None, **kwargs) -> float:
    """Follows metrics/docs.py:check_tabstops: the non-empty paragraphs pair up; with
    `word_number_split_by_tabstop` n, the `index`-th tab-separated part of each result
    paragraph has n words; each pair has the same tab stops (CLEAR ones and a LEFT stop at 0
    ignored) of the same alignment; score 1 - mean over paragraphs of sum |position difference|
    / the gold's text width (page width less margins of its first section)."""
    from docx.enum.text import WD_TAB_ALIGNMENT

    if not docx_file1 or not docx_file2:
        return 0.0
    d1, d2 = _doc(docx_file1), _doc(docx_file2)
    if d1 is None or d2 is None:
        return 0.0
    para1 = [p for p in d1.paragraphs if p.text.strip()]
    para2 = [p for p in d2.paragraphs if p.text.strip()]
    if len(para1) != len(para2):
        return 0.0
    if kwargs.get("word_number_split_by_tabstop") is not None:
        number, index = kwargs["word_number_split_by_tabstop"], kwargs.get("index", 0)
        for p in para1:
            words = [w for w in re.split(r"\s", p.text.split("\t")[index]) if w.strip()]
            if len(words) != number:
                return 0.0
    section = d2.sections[0]
    width = section.page_width - section.left_margin - section.right_margin

    def kept(stops) -> list:
        return [t for t in stops if not (t.alignment == WD_TAB_ALIGNMENT.CLEAR
                                         or (t.alignment == WD_TAB_ALIGNMENT.LEFT and t.position == 0))]

    minus = 0.0
    for p1, p2 in zip(para1, para2):
        t1, t2 = kept(p1.paragraph_format.tab_stops), kept(p2.paragraph_format.tab_stops)
        if len(t1) != len(t2):
            return 0.0
        diff = 0.0
        for a, b in zip(t1, t2):
            if a.alignment != b.alignment:
                return 0.0
            diff += abs(a.position - b.position)
        minus += diff / width
    return 1 - minus / len(para1)


# ------------------------------------------------------------------ colour distance


def rgb2lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    """skimage.color.rgb2lab of one sRGB colour in [0, 1] (D65, 2° observer)."""
    lin = [((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in rgb]
    m = ((0.412453, 0.357580, 0.180423), (0.212671, 0.715160, 0.072169), (0.019334, 0.119193, 0.950227))
    xyz = [sum(m[i][j] * lin[j] for j in range(3)) for i in range(3)]
    white = (0.95047, 1.0, 1.08883)
    f = [v / w for v, w in zip(xyz, white)]
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in f]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e_ciede2000(lab1, lab2, kL: float = 1, kC: float = 1, kH: float = 1) -> float:  # noqa: N803
    """CIEDE2000 colour difference (Sharma, Wu and Dalal, "The CIEDE2000 color-difference
    formula: implementation notes, supplementary test data, and mathematical observations"),
    as skimage.color.deltaE_ciede2000."""
    L1, a1, b1 = lab1  # noqa: N806
    L2, a2, b2 = lab2  # noqa: N806
    cbar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(cbar ** 7 / (cbar ** 7 + 25 ** 7)))
    a1p, a2p = a1 * (1 + g), a2 * (1 + g)
    c1, c2 = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1 = math.atan2(b1, a1p) % (2 * math.pi)
    h2 = math.atan2(b2, a2p) % (2 * math.pi)
    dl, dc = L2 - L1, c2 - c1
    dh = h2 - h1
    if c1 * c2 == 0:
        dh = 0.0
    elif dh > math.pi:
        dh -= 2 * math.pi
    elif dh < -math.pi:
        dh += 2 * math.pi
    dH = 2 * math.sqrt(c1 * c2) * math.sin(dh / 2)  # noqa: N806
    lbar, cbarp = (L1 + L2) / 2, (c1 + c2) / 2
    hsum = h1 + h2
    if c1 * c2 == 0:
        hbar = hsum
    elif abs(h1 - h2) <= math.pi:
        hbar = hsum / 2
    elif hsum < 2 * math.pi:
        hbar = (hsum + 2 * math.pi) / 2
    else:
        hbar = (hsum - 2 * math.pi) / 2
    t = (1 - 0.17 * math.cos(hbar - math.radians(30)) + 0.24 * math.cos(2 * hbar)
         + 0.32 * math.cos(3 * hbar + math.radians(6)) - 0.20 * math.cos(4 * hbar - math.radians(63)))
    sl = 1 + 0.015 * (lbar - 50) ** 2 / math.sqrt(20 + (lbar - 50) ** 2)
    sc = 1 + 0.045 * cbarp
    sh = 1 + 0.015 * cbarp * t
    dtheta = math.radians(30) * math.exp(-(((math.degrees(hbar) - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cbarp ** 7 / (cbarp ** 7 + 25 ** 7))
    rt = -math.sin(2 * dtheta) * rc
    lt, ct, ht = dl / (kL * sl), dc / (kC * sc), dH / (kH * sh)
    return math.sqrt(lt ** 2 + ct ** 2 + ht ** 2 + rt * ct * ht)


def _color_difference(rgb1, rgb2) -> float:
    return delta_e_ciede2000(rgb2lab(tuple(c / 255.0 for c in rgb1)), rgb2lab(tuple(c / 255.0 for c in rgb2)))


def evaluate_colored_words_in_tables(file_path1: str | None, file_path2: str | None, **kwargs) -> float:
    """Follows metrics/docs.py:evaluate_colored_words_in_tables: same text as the gold, and in
    every table every run starting with a vowel is red, every other run blue (CIEDE2000 distance
    at most `threshold`, default 3.5). A run without an explicit colour raises, as upstream
    (it cannot be compared)."""
    if not file_path1 or not file_path2 or not compare_docx_files(file_path1, file_path2):
        return 0.0
    d = _doc(file_path1)
    if d is None:
        return 0.0
    threshold = kwargs.get("threshold", 3.5)
    for table in d.tables:
        for row in table.rows:
            for cell in row.cells:
                for paragraph in cell.paragraphs:
                    for run in paragraph.runs:
                        if not run.text:
                            continue
                        rgb = run.font.color.rgb
                        if rgb is None:
                            raise ValueError(f"run {run.text!r} has no explicit colour")
                        want = (255, 0, 0) if run.text[0].lower() in "aeiou" else (0, 0, 255)
                        if _color_difference(tuple(rgb), want) > threshold:
                            return 0.0
    return 1.0


def check_highlighted_words(file_path1: str | None, file_path2: str | None) -> float:
    """Follows metrics/docs.py:check_highlighted_words: same text as the gold (an .odt pair), and
    no span of the result uses an automatic style with background colour #ffff00 (the task:
    remove the highlighting)."""
    from odf.opendocument import load
    from odf.text import Span

    if not file_path1 or not file_path2 or not compare_docx_files(file_path1, file_path2):
        return 0.0
    doc = load(file_path1)
    for span in doc.getElementsByType(Span):
        name = span.getAttribute("stylename")
        if not name:
            continue
        for style in doc.automaticstyles.childNodes:
            if style.getAttribute("name") == name:
                for prop in style.childNodes:
                    if prop.getAttribute("backgroundcolor") == "#ffff00":
                        return 0.0
    return 1.0


def evaluate_strike_through_last_paragraph(file_path1: str | None, file_path2: str | None) -> float:
    """Follows metrics/docs.py:evaluate_strike_through_last_paragraph: same text as the gold, and
    every run of the last paragraph is struck through."""
    if not file_path1 or not file_path2 or not compare_docx_files(file_path1, file_path2):
        return 0.0
    d = _doc(file_path1)
    if d is None:
        return 0.0
    return 1.0 if all(run.font.strike for run in d.paragraphs[-1].runs) else 0.0


def check_italic_font_size_14(path1: str | None, path2: str | None) -> float:
    """Follows metrics/docs.py:check_italic_font_size_14: same text as the gold, and every
    italic run has an explicit size of 14 pt."""
    if not path1 or not path2 or not compare_docx_files(path1, path2):
        return 0.0
    d = _doc(path1)
    if d is None:
        return 0.0
    for p in d.paragraphs:
        for run in p.runs:
            if run.italic and (run.font.size is None or run.font.size.pt != 14):
                return 0.0
    return 1.0


def compare_docx_files_and_ignore_new_lines(file1: str | None, file2: str | None, **options) -> float:
    """Follows metrics/docs.py:compare_docx_files_and_ignore_new_lines: two .docx files whose
    non-empty paragraphs have the same text (with `ignore_blanks`, default true: after collapsing
    whitespace runs)."""
    if not file1 or not file2 or not (file1.endswith(".docx") and file2.endswith(".docx")):
        return 0.0
    d1, d2 = _doc(file1), _doc(file2)
    if d1 is None or d2 is None:
        return 0.0
    p1 = [p.text for p in d1.paragraphs if p.text != ""]
    p2 = [p.text for p in d2.paragraphs if p.text != ""]
    if options.get("ignore_blanks", True):
        same = re.sub(r"\s+", " ", "\n".join(p1)).strip() == re.sub(r"\s+", " ", "\n".join(p2)).strip()
    else:
        same = p1 == p2
    return 1.0 if same else 0.0


def compare_references(file1: str | None, file2: str | None, **options) -> float:
    """Follows metrics/docs.py:compare_references: the non-empty paragraphs after the first
    paragraph equal to `reference_indicator` (default "References") in each file, paired; their
    mean fuzz.ratio r; with base b (`reference_base_result`, default 0.5): (r - b) / (1 - b) when
    r >= b + 0.01, else 0. Neither has the heading: 1; one has: 0; counts differ: 0."""
    if not file1 or not file2 or not (file1.endswith(".docx") and file2.endswith(".docx")):
        return 0.0
    d1, d2 = _doc(file1), _doc(file2)
    if d1 is None or d2 is None:
        return 0.0
    heading = options.get("reference_indicator", "References")
    base = options.get("reference_base_result", 0.5)
    t1, t2 = [p.text for p in d1.paragraphs], [p.text for p in d2.paragraphs]
    i1 = t1.index(heading) if heading in t1 else -1
    i2 = t2.index(heading) if heading in t2 else -1
    if i1 == -1 and i2 == -1:
        return 1.0
    if i1 == -1 or i2 == -1:
        return 0.0
    r1, r2 = [p for p in t1[i1 + 1:] if p.strip()], [p for p in t2[i2 + 1:] if p.strip()]
    if len(r1) != len(r2):
        return 0.0
    if not r1:  # upstream divides by zero here
        raise ZeroDivisionError("both reference sections are empty")
    r = sum(ratio(a, b) for a, b in zip(r1, r2)) / len(r1)
    return (r - base) / (1 - base) if r >= base + 0.01 else 0.0


def compare_unique_train_records(processed_file: str | None, expected_files, **kwargs) -> float:
    """Follows metrics/docs.py:compare_unique_train_records: expected_files = [gold, initial].
    The result's non-empty (stripped) lines are all lines of the initial file; the train ids
    (second field of lines with four comma-separated fields) have no duplicate and are the
    gold's set; and there are as many lines as in the gold."""
    if not processed_file or not isinstance(expected_files, list) or len(expected_files) < 2:
        return 0.0
    gold, initial = expected_files[0], expected_files[1]
    if not gold or not initial:
        return 0.0

    def lines_ids(path):
        d = _doc(path)
        if d is None:
            return None, None
        lines = [p.text.strip() for p in d.paragraphs if p.text.strip()]
        return lines, [x.split(",")[1].strip() for x in lines if len(x.split(",")) == 4]

    lines, ids = lines_ids(processed_file)
    gold_lines, gold_ids = lines_ids(gold)
    initial_lines, _ = lines_ids(initial)
    if lines is None or gold_lines is None or initial_lines is None:
        return 0.0
    assert ids is not None and gold_ids is not None
    if not set(lines) <= set(initial_lines) or len(ids) != len(set(ids)) or set(ids) != set(gold_ids):
        return 0.0
    return 1.0 if len(lines) == len(gold_lines) else 0.0


METRICS = [find_default_font, compare_docx_images, compare_line_spacing, compare_subscript_contains,
           has_page_numbers_in_footers, check_tabstops, evaluate_colored_words_in_tables, check_highlighted_words,
           evaluate_strike_through_last_paragraph, check_italic_font_size_14,
           compare_docx_files_and_ignore_new_lines, compare_references, compare_unique_train_records]
