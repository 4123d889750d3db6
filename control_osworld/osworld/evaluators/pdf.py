"""PDF metrics: our implementations of upstream OSWorld's metrics/chrome.py:compare_pdfs and
compare_pdf_images and metrics/pdf.py:check_pdf_pages, with pypdf (pure Python) in place of
PyMuPDF. Where the PDF library matters (text and image extraction) the docstring says so.
"""

from __future__ import annotations

import io
import logging
import operator
import os
from typing import Any

import numpy as np

from control_osworld.osworld.evaluators.fuzz import ratio

log = logging.getLogger(__name__)


def _reader(path: str):
    from pypdf import PdfReader

    return PdfReader(path)


def pdf_text(path: str) -> str:
    """The text of every page, concatenated and stripped (upstream: PyMuPDF's page.get_text();
    here pypdf's extract_text, which can lay out spaces and line breaks differently)."""
    return "".join(page.extract_text() or "" for page in _reader(path).pages).strip()


def compare_pdfs(pdf1_path: str | list | None, pdf2_path: str | list | None) -> float:
    """Follows metrics/chrome.py:compare_pdfs: for each pair, fuzz.ratio of the two PDFs' text;
    the mean over pairs (a pair that cannot be read, e.g. a missing file, adds 0).
    Approximate: the text comes from pypdf, not PyMuPDF."""
    if not isinstance(pdf2_path, list):
        pdf1_path, pdf2_path = [pdf1_path], [pdf2_path]
    assert isinstance(pdf1_path, list)
    score = 0.0
    for p1, p2 in zip(pdf1_path, pdf2_path):
        try:
            score += ratio(pdf_text(p1), pdf_text(p2))
        except Exception as e:  # as upstream: an unreadable pair scores 0
            log.info("compare_pdfs: %s vs %s: %s", p1, p2, e)
    return score / len(pdf2_path)


def check_pdf_pages(pdf_file: str | None, rules: dict[str, Any]) -> float:
    """Follows metrics/pdf.py:check_pdf_pages: operator `relation` (eq, le, gt, ...) of the
    page count (pypdf, as upstream) and `ref_value`."""
    if pdf_file is None:
        return 0.0
    return float(getattr(operator, rules["relation"])(len(_reader(pdf_file).pages), rules["ref_value"]))


def phash(image, hash_size: int = 8, highfreq_factor: int = 4) -> np.ndarray:
    """imagehash.phash: grayscale, resized (Lanczos) to 32x32, 2-D DCT-II, the top-left 8x8
    coefficients above their median -> 64 bits."""
    from PIL import Image
    from scipy.fft import dct

    n = hash_size * highfreq_factor
    px = np.asarray(image.convert("L").resize((n, n), Image.Resampling.LANCZOS), dtype=np.float64)
    low = dct(dct(px, axis=0), axis=1)[:hash_size, :hash_size]
    return low > np.median(low)


def pdf_images(path: str) -> list:
    """The images embedded in each page, in page order (upstream: PyMuPDF's page.get_images;
    here pypdf's page.images). Images that do not decode are left out, as upstream."""
    from PIL import Image

    out = []
    for page in _reader(path).pages:
        for img in page.images:
            try:
                out.append(Image.open(io.BytesIO(img.data)))
            except Exception as e:
                log.info("compare_pdf_images: an image of %s does not decode: %s", path, e)
    return out


def compare_pdf_images(pdf1_path: str | None, pdf2_path: str | None, **kwargs) -> float:
    """Follows metrics/chrome.py:compare_pdf_images: the embedded images of the two PDFs, pair by
    pair: the share whose perceptual hashes (imagehash.phash) differ in at most 5 bits; 0 when
    the counts differ, 1 when neither has an image. Approximate: images extracted by pypdf."""
    if not pdf1_path or not pdf2_path or not all(map(os.path.exists, (pdf1_path, pdf2_path))):
        return 0.0
    try:
        a, b = pdf_images(pdf1_path), pdf_images(pdf2_path)
    except Exception as e:
        log.info("compare_pdf_images: %s", e)
        return 0.0
    if len(a) != len(b):
        return 0.0
    if not a:
        return 1.0
    return sum(int(np.count_nonzero(phash(x) != phash(y)) <= 5) for x, y in zip(a, b)) / len(a)


METRICS = [compare_pdfs, check_pdf_pages, compare_pdf_images]
