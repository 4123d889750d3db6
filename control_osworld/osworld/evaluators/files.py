"""Metrics on files the agent produces (archives, result text, reports): our implementations of
upstream OSWorld's metrics/chrome.py:compare_archive, metrics/vscode.py:compare_zip_files and
compare_result_files, metrics/general.py:check_line_number and fuzzy_place_math, and
metrics/table.py:compare_conference_city_in_order.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import shutil
import unicodedata
import zipfile
from typing import Callable

from control_osworld.osworld.evaluators.fuzz import ratio


def _archive_compare(file_type: str) -> Callable[..., float]:
    from control_osworld.osworld.evaluators import docs, images, metrics, pdf, slides, table

    funcs: dict[str, Callable[..., float]] = {
        "text": metrics.compare_text_file, "pdf": pdf.compare_pdfs, "docx": docs.compare_docx_files,
        "ppt": slides.compare_pptx_files, "image": images.compare_images, "csv": table.compare_csv,
        "table": table.compare_table}
    if file_type in ("audio", "video"):
        raise NotImplementedError(f"compare_archive: file_type {file_type!r} needs compare_{file_type}s, "
                                  f"which is not implemented here")
    if file_type not in funcs:
        raise ValueError(f"compare_archive: file_type {file_type!r} is not supported")
    return funcs[file_type]


def compare_archive(pred_path: str | None, gold_path: str | None, **kwargs) -> float:
    """Follows metrics/chrome.py:compare_archive: both archives unpacked (shutil.unpack_archive,
    next to them); the sorted file names under `file_path` must be equal; then the mean of the
    per-file comparison by `file_type` (text, pdf, docx, ppt, image, csv, table; default text),
    the remaining options passed on."""
    if not pred_path or not gold_path:
        return 0.0
    file_path = kwargs.pop("file_path", "")
    compare = _archive_compare(kwargs.pop("file_type", "text"))
    pred_folder = os.path.splitext(pred_path)[0] + "_pred"
    gold_folder = os.path.splitext(gold_path)[0] + "_gold"
    shutil.rmtree(pred_folder, ignore_errors=True)
    os.makedirs(pred_folder)
    shutil.unpack_archive(pred_path, pred_folder)
    if not os.path.exists(gold_folder):
        os.makedirs(gold_folder)
        shutil.unpack_archive(gold_path, gold_folder)
    pred_files = sorted(os.listdir(os.path.join(pred_folder, file_path)))
    gold_files = sorted(os.listdir(os.path.join(gold_folder, file_path)))
    if pred_files != gold_files:
        return 0.0
    if not pred_files:  # upstream divides by zero here
        raise ZeroDivisionError("both archives are empty")
    score = sum(compare(os.path.join(pred_folder, file_path, f), os.path.join(gold_folder, file_path, f), **kwargs)
                for f in pred_files)
    return score / len(pred_files)


def _pdf_bytes_text(content: bytes) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages)


def compare_zip_files(actual: str | None, expected: str | None, **options) -> float:
    """Follows metrics/vscode.py:compare_zip_files: the two zips hold the same names; PDFs inside
    have text (pypdf; upstream PyPDF2, its predecessor) with a difflib ratio >= 0.95, every
    other member is byte-identical."""
    if not actual or not expected:
        return 0.0
    with zipfile.ZipFile(actual) as z1, zipfile.ZipFile(expected) as z2:
        names = set(z1.namelist())
        if names != set(z2.namelist()):
            return 0.0
        for name in names:
            a, b = z1.read(name), z2.read(name)
            if name.lower().endswith(".pdf"):
                if difflib.SequenceMatcher(None, _pdf_bytes_text(a), _pdf_bytes_text(b)).ratio() < 0.95:
                    return 0.0
            elif a != b:
                return 0.0
    return 1.0


def compare_result_files(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/vscode.py:compare_result_files: the stripped texts; when the gold is a
    number, 1 if the gold's text is inside the result or the result is that number within 1e-4;
    otherwise the texts must be equal."""
    if not src_path or not tgt_path:
        return 0.0
    with open(src_path) as f:
        src = f.read().strip()
    with open(tgt_path) as f:
        tgt = f.read().strip()
    try:
        tgt_num = float(tgt)
        if tgt in src:
            return 1.0
        return 1.0 if abs(float(src) - tgt_num) < 1e-4 else 0.0
    except ValueError:
        return 1.0 if src == tgt else 0.0


def check_line_number(file_path: str | None, line_number: dict) -> float:
    """Follows metrics/general.py:check_line_number: the number of lines holding a time of day
    (HH:MM:SS) equals line_number["expected"]."""
    if file_path is None or not os.path.isfile(file_path):
        return 0.0
    time_re = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")
    try:
        with open(file_path) as f:
            count = sum(1 for line in f if time_re.search(line))
        return 1.0 if count == int(line_number["expected"]) else 0.0
    except (OSError, UnicodeDecodeError, ValueError):
        return 0.0


def fuzzy_place_math(result_file_path: str | None, rules: dict) -> float:
    """Follows metrics/general.py:fuzzy_place_math: the .docx holds exactly three words; each
    scores its best fuzz.ratio against the expected answers; the mean of the three."""
    if result_file_path is None:
        return 0.0
    from docx import Document

    words = [w for p in Document(result_file_path).paragraphs for w in p.text.split()]
    if len(words) != 3:
        return 0.0
    return sum(max((ratio(w, a) for a in rules["expected"]), default=0.0) for w in words) / 3


def _normalize_city(value) -> str:
    if value is None:
        return ""
    s = unicodedata.normalize("NFKD", str(value))
    s = "".join(ch for ch in s if not unicodedata.combining(ch))
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


def compare_conference_city_in_order(actual_city_list_path: str | None, expected_city: dict) -> float:
    """Follows metrics/table.py:compare_conference_city_in_order: the active sheet's C2:C22, in
    order: each cell (accents dropped, lower-cased, non-alphanumerics to spaces) contains the
    expected city of that row (or one of its alternatives), likewise normalised."""
    import openpyxl

    if not actual_city_list_path:
        return 0.0
    expected = expected_city["expected"]
    sheet = openpyxl.load_workbook(actual_city_list_path).active
    actual = [cell.value for row in sheet["C2:C22"] for cell in row]
    try:
        for i, city in enumerate(actual):
            entry = expected[i]
            if isinstance(entry, str):
                candidates = [entry]
            elif isinstance(entry, list):
                candidates = entry
            else:
                raise TypeError("Expected city should be a string or a list of strings")
            got = _normalize_city(city)
            if not any(_normalize_city(c) and _normalize_city(c) in got for c in candidates):
                return 0.0
    except (IndexError, TypeError):
        return 0.0
    return 1.0


METRICS = [compare_archive, compare_zip_files, compare_result_files, check_line_number, fuzzy_place_math,
           compare_conference_city_in_order]
