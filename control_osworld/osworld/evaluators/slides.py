"""LibreOffice Impress metrics over .pptx files with python-pptx (our implementations of
upstream OSWorld's desktop_env/evaluators/metrics/slides.py)."""

from __future__ import annotations

import logging
from xml.etree import ElementTree

log = logging.getLogger(__name__)

_NS = {"a": "http://schemas.openxmlformats.org/drawingml/2006/main"}

# compare_pptx_files' options and their defaults (upstream's)
PPTX_OPTIONS = {
    "examine_number_of_slides": True, "examine_shape": True, "examine_text": True, "examine_indent": True,
    "examine_font_name": True, "examine_font_size": True, "examine_font_bold": True, "examine_font_italic": True,
    "examine_color_rgb": True, "examine_font_underline": True, "examine_strike_through": True,
    "examine_alignment": True, "examine_title_bottom_position": False, "examine_table_bottom_position": False,
    "examine_right_position": False, "examine_top_position": False, "examine_shape_for_shift_size": False,
    "examine_image_size": False, "examine_modify_height": False, "examine_bullets": True,
    "examine_background_color": True, "examine_note": True,
}


def _open(path):
    from pptx import Presentation

    return Presentation(path)


def _box(s) -> tuple:
    return (s.left, s.top, s.width, s.height)


def _notes(slide) -> str:
    return slide.notes_slide.notes_text_frame.text.strip() if slide.has_notes_slide else ""


def _bullets(xml: bytes) -> list[tuple]:
    """(level, bullet char, text, bullet colour) of every paragraph of a slide part's XML."""
    root = ElementTree.fromstring(xml)
    out = []
    for p in root.iter(f"{{{_NS['a']}}}p"):
        ppr = p.find("a:pPr", _NS)
        if ppr is not None:
            char = ppr.find("a:buChar", _NS)
            clr = ppr.find("a:buClr/a:srgbClr", _NS)
            row = (ppr.get("lvl"), char.get("char") if char is not None else "No Bullet",
                   clr.get("val") if clr is not None else "No Color")
        else:
            row = ("No Level", "No Bullet", "No Color")
        out.append((row[0], row[1], "".join(t.text or "" for t in p.iter(f"{{{_NS['a']}}}t")), row[2]))
    return out


def _position_checks(o: dict, idx: int, s1, s2) -> bool:
    """Upstream's task-specific position options; False when they fail."""
    moved = _box(s1) != _box(s2)
    text1, text2 = getattr(s1, "text", None), getattr(s2, "text", None)
    if o["examine_title_bottom_position"]:
        if text1 is not None and text2 is not None and text1 == text2:
            if text1 == "Product Comparison" and (s1.top <= s2.top or s1.top < 3600000):
                return False
        elif moved:
            return False
    if o["examine_table_bottom_position"]:
        if idx == 3 and s1.shape_type == 19 and s2.shape_type == 19:
            if s1.top <= s2.top or s1.top < 3600000:
                return False
        elif moved:
            return False
    if o["examine_right_position"] and idx == 2 and text1 is None and text2 is None:
        if s1.left <= s2.left or s1.left < 4320000:
            return False
    if o["examine_top_position"]:
        if idx == 2 and s1.shape_type == 13 and s2.shape_type == 13:
            if s1.top >= s2.top or s1.top > 1980000:
                return False
        elif moved:
            return False
    if o["examine_shape_for_shift_size"] and moved:
        if not (text1 is not None and text1 == text2 and text1 == "Elaborate on what you want to discuss."):
            return False
    if moved and o["examine_shape"]:
        return False
    if o["examine_image_size"]:
        if s1.shape_type == 13 and s2.shape_type == 13:
            if (s1.width, s1.height) != (s2.width, s2.height):
                return False
        elif moved:
            return False
    if o["examine_modify_height"]:
        if (text1 is None and text2 is None) or (s1.shape_type == 5 and s2.shape_type == 5):
            if s1.height != s2.height:
                return False
        elif moved:
            return False
    return True


def _runs_match(o: dict, r1, r2) -> bool:
    f1, f2 = r1.font, r2.font
    checks = (("examine_font_name", f1.name, f2.name), ("examine_font_size", f1.size, f2.size),
              ("examine_font_bold", f1.bold, f2.bold), ("examine_font_italic", f1.italic, f2.italic),
              ("examine_font_underline", f1.underline, f2.underline),
              ("examine_strike_through", f1._element.attrib.get("strike", "noStrike"),
               f2._element.attrib.get("strike", "noStrike")))
    if any(o[k] and a != b for k, a, b in checks):
        return False
    if o["examine_color_rgb"]:
        try:
            c1, c2 = f1.color.rgb, f2.color.rgb
        except AttributeError:  # theme or no colour: upstream skips the check then
            c1 = c2 = None
        if c1 != c2:
            return False
    return True


def compare_pptx_files(file1_path: str | None, file2_path: str | None, **options) -> float:
    """Follows metrics/slides.py:compare_pptx_files: slide by slide, shape by shape (zip), the
    checks its `examine_*` options switch on (defaults as upstream: number of slides, shape
    boxes, text, paragraph alignment and level, run fonts, colours, underline, strike-through,
    bullets, notes; the task-specific position options off). 1 when nothing differs.
    `examine_background_color` is accepted and never fails: upstream reads the colour through
    `fill.background()`, which returns None for every slide."""
    if not file1_path or not file2_path:
        return 0.0
    unknown = set(options) - set(PPTX_OPTIONS)
    if unknown:
        raise ValueError(f"compare_pptx_files: unknown options {sorted(unknown)}")
    o = {**PPTX_OPTIONS, **options}
    p1, p2 = _open(file1_path), _open(file2_path)
    if o["examine_number_of_slides"] and len(p1.slides) != len(p2.slides):
        return 0.0
    for idx, (sl1, sl2) in enumerate(zip(p1.slides, p2.slides), start=1):
        if o["examine_note"] and _notes(sl1) != _notes(sl2):
            return 0.0
        bullets1, bullets2 = (_bullets(sl1.part.blob), _bullets(sl2.part.blob)) if o["examine_bullets"] else ([], [])
        for s1, s2 in zip(sl1.shapes, sl2.shapes):
            if not _position_checks(o, idx, s1, s2):
                return 0.0
            if not (s1.has_text_frame and s2.has_text_frame):
                continue
            if o["examine_text"] and s1.text_frame.text.strip() != s2.text_frame.text.strip():
                return 0.0
            for para1, para2 in zip(s1.text_frame.paragraphs, s2.text_frame.paragraphs):
                if o["examine_alignment"] and para1.alignment != para2.alignment:
                    return 0.0
                if o["examine_text"] and para1.text != para2.text:
                    return 0.0
                if o["examine_indent"] and para1.level != para2.level:
                    return 0.0
                for r1, r2 in zip(para1.runs, para2.runs):
                    if not _runs_match(o, r1, r2):
                        return 0.0
                    if o["examine_bullets"] and bullets1 != bullets2:
                        return 0.0
    return 1.0


def check_slide_orientation_Portrait(pptx_path: str | None) -> float:  # noqa: N802 (upstream's name)
    """Follows metrics/slides.py:check_slide_orientation_Portrait: slides taller than wide."""
    if not pptx_path:
        return 0.0
    prs = _open(pptx_path)
    return 1.0 if prs.slide_width < prs.slide_height else 0.0


def check_strikethrough(pptx_path: str | None, rules: dict) -> float:
    """Follows metrics/slides.py:check_strikethrough: the first run of every listed paragraph
    of every listed shape of every listed slide has a `strike` attribute."""
    if not pptx_path:
        return 0.0
    prs = _open(pptx_path)
    try:
        for si in rules["slide_index_s"]:
            for hi in rules["shape_index_s"]:
                paragraphs = prs.slides[si].shapes[hi].text_frame.paragraphs
                for pi in rules["paragraph_index_s"]:
                    if "strike" not in paragraphs[pi].runs[0].font._element.attrib:
                        return 0.0
    except (IndexError, AttributeError) as e:
        log.info("check_strikethrough: %s", e)
        return 0.0
    return 1.0


METRICS = [compare_pptx_files, check_slide_orientation_Portrait, check_strikethrough]
