"""Writer (writer.py) and Impress (impress.py) metrics on documents each test builds with
python-docx / python-pptx / odfpy; expected results follow upstream's definitions."""

from __future__ import annotations

import asyncio
import zipfile

import pytest
from docx import Document
from docx.enum.text import WD_TAB_ALIGNMENT
from docx.shared import Inches, Pt, RGBColor
from PIL import Image

from control_osworld.osworld.evaluators import EvalContext, impress, writer
from tests.osworld.evaluators.makers import gradient
from tests.osworld.fakes import FakeClient


def _docx(path, paras, fmt=None):
    d = Document()
    for i, text in enumerate(paras):
        p = d.add_paragraph()
        run = p.add_run(text)
        if fmt:
            fmt(i, p, run)
    d.save(path)
    return str(path)


def test_line_spacing_and_subscript(tmp_path):
    def spacing(v):
        return lambda i, p, r: setattr(p.paragraph_format, "line_spacing", v if i == 1 else None)
    a = _docx(tmp_path / "a.docx", ["one", "two"], spacing(2.0))
    b = _docx(tmp_path / "b.docx", ["one", "two"], spacing(2.0))
    c = _docx(tmp_path / "c.docx", ["one", "two"], spacing(1.5))
    t = _docx(tmp_path / "t.docx", ["one", "other text"], spacing(2.0))
    assert writer.compare_line_spacing(a, b) == 1
    assert writer.compare_line_spacing(a, c) == 0
    assert writer.compare_line_spacing(a, t) == 0  # text differs first
    assert writer.compare_line_spacing(None, b) == 0

    def sub(i, p, r):
        r.font.subscript = i == 0
    s1, s2 = _docx(tmp_path / "s1.docx", ["H2O", "x"], sub), _docx(tmp_path / "s2.docx", ["H2O", "x"], sub)
    assert writer.compare_subscript_contains(s1, s2) == 1
    assert writer.compare_subscript_contains(s1, a) == 0


def test_footers_tabstops(tmp_path):
    d = Document()
    d.add_paragraph("body")
    d.sections[0].footer.paragraphs[0].text = "Page 1"
    d.save(tmp_path / "f.docx")
    assert writer.has_page_numbers_in_footers(str(tmp_path / "f.docx")) == 1
    assert writer.has_page_numbers_in_footers(_docx(tmp_path / "nf.docx", ["body"])) == 0

    def tabs(pos, align=WD_TAB_ALIGNMENT.RIGHT):
        return lambda i, p, r: p.paragraph_format.tab_stops.add_tab_stop(Inches(pos), align)
    g = _docx(tmp_path / "g.docx", ["Name\tTitle", "Ann Lee\tBoss"], tabs(6))
    same = _docx(tmp_path / "same.docx", ["Name\tTitle", "Ann Lee\tBoss"], tabs(6))
    off = _docx(tmp_path / "off.docx", ["Name\tTitle", "Ann Lee\tBoss"], tabs(5))
    left = _docx(tmp_path / "left.docx", ["Name\tTitle", "Ann Lee\tBoss"], tabs(6, WD_TAB_ALIGNMENT.LEFT))
    none = _docx(tmp_path / "none.docx", ["Name\tTitle", "Ann Lee\tBoss"])
    assert writer.check_tabstops(same, g) == 1
    width = Document(g).sections[0]
    w = width.page_width - width.left_margin - width.right_margin
    assert writer.check_tabstops(off, g) == pytest.approx(1 - Inches(1) / w)
    assert writer.check_tabstops(left, g) == 0  # alignment differs
    assert writer.check_tabstops(none, g) == 0  # as many tab stops
    assert writer.check_tabstops(same, g, word_number_split_by_tabstop=1, index=0) == 0  # "Ann Lee": 2 words
    assert writer.check_tabstops(same, g, word_number_split_by_tabstop=1, index=1) == 1


def test_ciede2000_against_sharma_test_data():
    # pairs 1, 7 and 17 of Sharma, Wu & Dalal's supplementary test data
    cases = [((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
             ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
             ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492)]
    for l1, l2, de in cases:
        assert writer.delta_e_ciede2000(l1, l2) == pytest.approx(de, abs=1e-4)
    assert writer.rgb2lab((1.0, 1.0, 1.0)) == pytest.approx((100.0, 0.0, 0.0), abs=1e-2)
    assert writer.rgb2lab((1.0, 0.0, 0.0)) == pytest.approx((53.24, 80.09, 67.20), abs=0.05)


def test_colored_words_strike_italic(tmp_path):
    def table_doc(path, colors):
        d = Document()
        t = d.add_table(rows=1, cols=2)
        for cell, (word, rgb) in zip(t.rows[0].cells, colors):
            run = cell.paragraphs[0].add_run(word)
            if rgb:
                run.font.color.rgb = RGBColor(*rgb)
        d.save(path)
        return str(path)
    good = table_doc(tmp_path / "g.docx", [("apple", (255, 0, 0)), ("pear", (0, 0, 255))])
    near = table_doc(tmp_path / "n.docx", [("apple", (254, 1, 0)), ("pear", (0, 0, 250))])
    bad = table_doc(tmp_path / "b.docx", [("apple", (0, 0, 255)), ("pear", (0, 0, 255))])
    assert writer.evaluate_colored_words_in_tables(good, good) == 1
    assert writer.evaluate_colored_words_in_tables(near, good) == 1  # within 3.5
    assert writer.evaluate_colored_words_in_tables(bad, good) == 0
    uncoloured = table_doc(tmp_path / "u.docx", [("apple", None), ("pear", (0, 0, 255))])
    with pytest.raises(ValueError):
        writer.evaluate_colored_words_in_tables(uncoloured, uncoloured)

    def strike(last):
        return lambda i, p, r: setattr(r.font, "strike", i == 1 and last)
    s = _docx(tmp_path / "s.docx", ["keep", "drop"], strike(True))
    ns = _docx(tmp_path / "ns.docx", ["keep", "drop"], strike(False))
    assert writer.evaluate_strike_through_last_paragraph(s, ns) == 1
    assert writer.evaluate_strike_through_last_paragraph(ns, s) == 0

    def italic(size):
        def f(i, p, r):
            r.italic = i == 0
            if size:
                r.font.size = Pt(size)
        return f
    i14, i12, i0 = (_docx(tmp_path / f"i{n}.docx", ["slanted", "plain"], italic(n)) for n in (14, 12, 0))
    assert writer.check_italic_font_size_14(i14, i12) == 1
    assert writer.check_italic_font_size_14(i12, i14) == 0
    assert writer.check_italic_font_size_14(i0, i14) == 0  # no explicit size


def test_highlight_odt(tmp_path):
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import P, Span

    def odt(path, highlighted):
        doc = OpenDocumentText()
        st = Style(name="T1", family="text")
        st.addElement(TextProperties(backgroundcolor="#ffff00" if highlighted else "#ffffff"))
        doc.automaticstyles.addElement(st)
        p = P(text="some ")
        p.addElement(Span(stylename=st, text="marked"))
        doc.text.addElement(p)
        doc.save(str(path))
        return str(path)
    clean, marked = odt(tmp_path / "c.odt", False), odt(tmp_path / "m.odt", True)
    assert writer.check_highlighted_words(clean, marked) == 1
    assert writer.check_highlighted_words(marked, clean) == 0


def test_newlines_references_trains_font_images(tmp_path):
    a = _docx(tmp_path / "a.docx", ["one", "", "two  three"])
    b = _docx(tmp_path / "b.docx", ["one", "two three"])
    assert writer.compare_docx_files_and_ignore_new_lines(a, b) == 1
    assert writer.compare_docx_files_and_ignore_new_lines(a, b, ignore_blanks=False) == 0
    assert writer.compare_docx_files_and_ignore_new_lines(a, str(tmp_path / "x.odt")) == 0

    r1 = _docx(tmp_path / "r1.docx", ["Intro", "References", "Smith 2020. A paper.", "Lee 2021. B paper."])
    r2 = _docx(tmp_path / "r2.docx", ["Intro", "References", "Smith 2020. A paper.", "Lee 2021. B paper."])
    r3 = _docx(tmp_path / "r3.docx", ["Intro", "References", "Smith 2020. A paper."])
    r4 = _docx(tmp_path / "r4.docx", ["Intro", "References", "Smith 2020. A papers.", "Lee 2021. B paper."])
    no = _docx(tmp_path / "no.docx", ["Intro"])
    assert writer.compare_references(r1, r2) == 1
    assert writer.compare_references(r1, r3) == 0
    assert writer.compare_references(no, no) == 1 and writer.compare_references(no, r1) == 0
    from control_osworld.osworld.evaluators.fuzz import ratio
    r = (ratio("Smith 2020. A papers.", "Smith 2020. A paper.") + 1) / 2
    assert writer.compare_references(r4, r1) == pytest.approx((r - 0.5) / 0.5)

    init = _docx(tmp_path / "init.docx", ["d,T1,x,y", "d,T2,x,y", "d,T1,x,y", "header"])
    gold = _docx(tmp_path / "gold.docx", ["d,T1,x,y", "d,T2,x,y"])
    good = _docx(tmp_path / "good.docx", ["d,T2,x,y", "d,T1,x,y"])
    dup = _docx(tmp_path / "dup.docx", ["d,T1,x,y", "d,T2,x,y", "d,T1,x,y"])
    alien = _docx(tmp_path / "alien.docx", ["d,T1,x,y", "d,T9,x,y"])
    assert writer.compare_unique_train_records(good, [gold, init]) == 1
    assert writer.compare_unique_train_records(dup, [gold, init]) == 0
    assert writer.compare_unique_train_records(alien, [gold, init]) == 0
    assert writer.compare_unique_train_records(good, gold) == 0  # needs [gold, initial]

    xcu = tmp_path / "registrymodifications.xcu"
    xcu.write_text('<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">'
                   '<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse">'
                   '<value>Times New Roman</value></prop></item></oor:items>')
    assert writer.find_default_font(str(xcu), {"font_name": "Times New Roman"}) == 1
    assert writer.find_default_font(str(xcu), {"font_name": "Arial"}) == 0
    (tmp_path / "bad.xcu").write_text("<oor:items")
    assert writer.find_default_font(str(tmp_path / "bad.xcu"), {"font_name": "Arial"}) == 0

    def pic(path, img):
        d = Document()
        img.save(tmp_path / "p.png")
        d.add_picture(str(tmp_path / "p.png"))
        d.save(path)
        return str(path)
    p1, p2 = pic(tmp_path / "p1.docx", gradient(30, 20)), pic(tmp_path / "p2.docx", gradient(30, 20))
    p3 = pic(tmp_path / "p3.docx", gradient(30, 20, 4))
    assert writer.compare_docx_images(p1, p2) == 1
    assert writer.compare_docx_images(p1, p3) == 0
    assert writer.compare_docx_images(p1, a) == 0  # one image vs none


# ------------------------------------------------------------------ Impress


XCU = ('<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">{}</oor:items>')


def test_impress_registry_checks(tmp_path):
    p = tmp_path / "r.xcu"
    p.write_text(XCU.format('<item oor:path="/org.openoffice.Office.Impress/Misc/Start">'
                            '<prop oor:name="EnablePresenterScreen" oor:op="fuse"><value>false</value></prop></item>'
                            '<item oor:path="/org.openoffice.Office.Common/Save/Document">'
                            '<prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>3</value></prop></item>'))
    assert impress.check_presenter_console_disable(str(p)) == 1
    assert impress.check_auto_saving_time(str(p), {"minutes": 3}) == 1
    assert impress.check_auto_saving_time(str(p), {"minutes": 10}) == 0
    q = tmp_path / "q.xcu"
    q.write_text(XCU.format(""))
    assert impress.check_presenter_console_disable(str(q)) == 0
    assert impress.check_auto_saving_time(str(q), {"minutes": 3}) == 0
    assert impress.check_presenter_console_disable(str(tmp_path / "absent.xcu")) == 0


def _pptx_with(tmp_path, name, slide_xml_patch=None, master_patch=None):
    from pptx import Presentation

    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6])
    src = tmp_path / f"{name}.src.pptx"
    prs.save(src)
    out = tmp_path / f"{name}.pptx"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if slide_xml_patch and item.filename == "ppt/slides/slide1.xml":
                data = slide_xml_patch(data.decode()).encode()
            if master_patch and item.filename == "ppt/slideMasters/slideMaster1.xml":
                data = master_patch(data.decode()).encode()
            zout.writestr(item, data)
    return str(out)


def test_transition_and_page_number_colour(tmp_path):
    dissolve = _pptx_with(tmp_path, "t", lambda x: x.replace("</p:sld>", "<p:transition><p:dissolve/></p:transition></p:sld>"))
    plain = _pptx_with(tmp_path, "p")
    assert impress.check_transition(dissolve, {"slide_idx": 0, "transition_type": "dissolve"}) == 1
    assert impress.check_transition(dissolve, {"slide_idx": 0, "transition_type": "fade"}) == 0
    assert impress.check_transition(plain, {"slide_idx": 0, "transition_type": "dissolve"}) == 0
    assert impress.check_transition(plain, {"slide_idx": 4, "transition_type": "dissolve"}) == 0

    # a hand-made master: a sldNum placeholder whose fill names the colour
    def master(hexval):
        return lambda x: x.replace("</p:sldMaster>",
                                   f'<p:ph type="sldNum"><a:solidFill xmlns:a="http://schemas.openxmlformats.org/'
                                   f'drawingml/2006/main"><a:srgbClr val="{hexval}"/></a:solidFill></p:ph></p:sldMaster>')
    red = _pptx_with(tmp_path, "red", master_patch=master("E02020"))
    assert impress.check_page_number_colors(red, {"color": "red"}) == 1
    assert impress.check_page_number_colors(red, {"color": "blue"}) == 0
    blue = _pptx_with(tmp_path, "blue", master_patch=master("1020C0"))
    assert impress.check_page_number_colors(blue, {"color": "blue"}) == 1


def test_fill_distance_and_stretch(tmp_path):
    from pptx import Presentation
    from pptx.dml.color import RGBColor as PRGB

    def deck(path, colours, pic=None, full=False):
        prs = Presentation()
        for c in colours:
            s = prs.slides.add_slide(prs.slide_layouts[6])
            if c is not None:
                s.background.fill.solid()
                s.background.fill.fore_color.rgb = PRGB(*c)
            if pic is not None:
                if full:
                    s.shapes.add_picture(pic, 0, 0, prs.slide_width, prs.slide_height)
                else:
                    s.shapes.add_picture(pic, Inches(1), Inches(1), Inches(2), Inches(1))
        prs.save(path)
        return str(path)
    target = (0, 0, 255)
    exact = deck(tmp_path / "e.pptx", [target, target])
    half = deck(tmp_path / "h.pptx", [target, (255, 255, 255)])
    assert impress.evaluate_presentation_fill_to_rgb_distance(exact, {"rgb": target}) == pytest.approx(1.0)
    d = ((255 ** 2 * 2) ** 0.5) / (3 * 255 ** 2) ** 0.5
    assert impress.evaluate_presentation_fill_to_rgb_distance(half, {"rgb": target}) == pytest.approx(1 - d / 2)
    # a slide still in the original colour counts as distance 1
    assert impress.evaluate_presentation_fill_to_rgb_distance(
        half, {"rgb": target, "original_rgb": [255, 255, 255]}) == pytest.approx(0.5)
    unfilled = deck(tmp_path / "u.pptx", [None])
    assert impress.evaluate_presentation_fill_to_rgb_distance(unfilled, {"rgb": target}) == pytest.approx(0.0)

    gradient(40, 30).save(tmp_path / "img.png")
    orig = deck(tmp_path / "o.pptx", [None], str(tmp_path / "img.png"))
    stretched = deck(tmp_path / "s.pptx", [None], str(tmp_path / "img.png"), full=True)
    assert impress.check_image_stretch_and_center(stretched, orig) == 1
    assert impress.check_image_stretch_and_center(orig, orig) == 0
    gradient(40, 30, 3).save(tmp_path / "other.png")
    other = deck(tmp_path / "x.pptx", [None], str(tmp_path / "other.png"), full=True)
    assert impress.check_image_stretch_and_center(other, orig) == 0


def test_left_panel_and_background_image_getter(tmp_path):
    tree = '<desktop-frame><application name="soffice"><document-frame name="Slides View"/></application></desktop-frame>'
    assert impress.check_left_panel(tree) == 1
    assert impress.check_left_panel(tree.replace("Slides View", "Outline")) == 0
    assert impress.check_left_panel(None) == 0

    from pptx import Presentation
    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6])
    prs.save(tmp_path / "plain.pptx")
    img = Image.new("RGB", (8, 8), (10, 200, 30))
    img.save(tmp_path / "bg.png")
    deck = tmp_path / "bg.pptx"
    rel = '<Relationship Id="rIdBg" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="../media/bg.png"/>'
    bg = ('<p:bg><p:bgPr><a:blipFill><a:blip r:embed="rIdBg"/></a:blipFill><a:effectLst/></p:bgPr></p:bg>')
    with zipfile.ZipFile(tmp_path / "plain.pptx") as zin, zipfile.ZipFile(deck, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename).decode("utf-8", "surrogateescape") if item.filename.endswith((".xml", ".rels")) else None
            if item.filename == "ppt/slides/slide1.xml":
                data = data.replace("<p:cSld>", "<p:cSld>" + bg, 1)
            if item.filename == "ppt/slides/_rels/slide1.xml.rels":
                data = data.replace("</Relationships>", rel + "</Relationships>")
            zout.writestr(item, data.encode("utf-8", "surrogateescape") if data is not None else zin.read(item.filename))
        zout.write(tmp_path / "bg.png", "ppt/media/bg.png")
    c = FakeClient(files={"/home/user/Desktop/bg.pptx": deck.read_bytes(),
                          "/home/user/Desktop/plain.pptx": (tmp_path / "plain.pptx").read_bytes()})
    ctx = EvalContext(client=c, cache_dir=tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    got = asyncio.run(impress.background_image_in_slide(
        ctx, {"ppt_file_path": "/home/user/Desktop/bg.pptx", "slide_index": 0, "dest": "bg_out.png"}))
    assert got is not None and open(got, "rb").read() == (tmp_path / "bg.png").read_bytes()
    assert asyncio.run(impress.background_image_in_slide(
        ctx, {"ppt_file_path": "/home/user/Desktop/plain.pptx", "slide_index": 0, "dest": "x.png"})) is None
    assert asyncio.run(impress.background_image_in_slide(
        ctx, {"ppt_file_path": "/home/user/Desktop/absent.pptx", "slide_index": 0, "dest": "x.png"})) is None
