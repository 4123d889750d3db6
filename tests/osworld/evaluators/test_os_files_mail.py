"""basic_os.py, files.py and mail_filters.py metrics on hand-made inputs."""

from __future__ import annotations

import shutil
import zipfile

import pytest
from docx import Document

from control_osworld.osworld.evaluators import basic_os, files, mail_filters
from tests.osworld.evaluators.makers import make_pdf

TIMEDATECTL = """               Local time: Thu 2024-01-25 12:56:06 WET
           Universal time: Thu 2024-01-25 12:56:06 UTC
                 RTC time: Thu 2024-01-25 12:56:05
                Time zone: Atlantic/Faroe (WET, +0000)
System clock synchronized: yes"""


def test_basic_os():
    assert basic_os.is_utc_0(TIMEDATECTL) == 1
    assert basic_os.is_utc_0(TIMEDATECTL.replace("+0000)", "+0100)")) == 0
    with pytest.raises(IndexError):
        basic_os.is_utc_0("Local time: x")
    rule = {"expected": ["google-chrome.desktop", "thunderbird.desktop"]}
    assert basic_os.check_gnome_favorite_apps("['thunderbird.desktop', 'google-chrome.desktop']\n", rule) == 1
    assert basic_os.check_gnome_favorite_apps("['thunderbird.desktop']", rule) == 0
    with pytest.raises((ValueError, SyntaxError)):  # never evaluated as code
        basic_os.check_gnome_favorite_apps("__import__('os').system('true')", rule)
    tree = {"type": "directory", "name": "cpjpg", "children": [{"name": "a.jpg"}, {"name": "b.jpg"}]}
    assert basic_os.check_moved_jpgs(tree, {"expected": ["b.jpg", "a.jpg"]}) == 1
    assert basic_os.check_moved_jpgs(tree, {"expected": ["a.jpg"]}) == 0
    assert basic_os.check_moved_jpgs(None, {"expected": []}) == 0
    assert basic_os.is_in_vm_clickboard({"expected": "/home/user/x.docx"}, "/home/user/x.docx") == 1
    assert basic_os.is_in_vm_clickboard({"expected": ["a", "b"]}, "a and b") == 1
    assert basic_os.is_in_vm_clickboard({"expected": ["a", "c"]}, "a and b") == 0
    assert basic_os.is_in_vm_clickboard({"expected": "a"}, None) == 0


def test_compare_archive(tmp_path):
    def zipped(name, members):
        d = tmp_path / f"{name}_src"
        d.mkdir()
        for k, v in members.items():
            (d / k).write_text(v)
        return shutil.make_archive(str(tmp_path / name), "zip", d)
    gold = zipped("gold", {"a.txt": "alpha", "b.txt": "beta"})
    same = zipped("same", {"a.txt": "alpha", "b.txt": "beta"})
    half = zipped("half", {"a.txt": "alpha", "b.txt": "BETA"})
    names = zipped("names", {"a.txt": "alpha", "c.txt": "beta"})
    assert files.compare_archive(same, gold) == 1
    assert files.compare_archive(half, gold) == 0.5
    assert files.compare_archive(half, gold, ignore_case=True) == 1
    assert files.compare_archive(names, gold) == 0
    assert files.compare_archive(None, gold) == 0
    pg = tmp_path / "pdfs_src"
    pg.mkdir()
    make_pdf(pg / "x.pdf", ["hello world"])
    pdfs = shutil.make_archive(str(tmp_path / "pdfs"), "gztar", pg)
    assert files.compare_archive(pdfs, pdfs.replace("pdfs", "pdfs"), file_type="pdf") == 1
    with pytest.raises(NotImplementedError):
        files.compare_archive(same, gold, file_type="audio")


def test_compare_zip_files(tmp_path):
    def z(name, members):
        p = tmp_path / name
        with zipfile.ZipFile(p, "w") as zf:
            for k, v in members.items():
                zf.writestr(k, v)
        return str(p)
    pdf_a = make_pdf(tmp_path / "a.pdf", ["Recruitment and retention of health professionals"]).read_bytes()
    pdf_b = make_pdf(tmp_path / "b.pdf", ["Recruitment and retention of health professionals"]).read_bytes()
    pdf_c = make_pdf(tmp_path / "c.pdf", ["Something else entirely"]).read_bytes()
    gold = z("gold.zip", {"r.pdf": pdf_a, "n.txt": b"note"})
    assert files.compare_zip_files(z("ok.zip", {"r.pdf": pdf_b, "n.txt": b"note"}), gold) == 1
    assert files.compare_zip_files(z("t.zip", {"r.pdf": pdf_b, "n.txt": b"Note"}), gold) == 0
    assert files.compare_zip_files(z("p.zip", {"r.pdf": pdf_c, "n.txt": b"note"}), gold) == 0
    assert files.compare_zip_files(z("m.zip", {"r.pdf": pdf_b}), gold) == 0
    assert files.compare_zip_files(None, gold) == 0


def test_result_files_line_number_places_cities(tmp_path):
    def txt(name, s):
        (tmp_path / name).write_text(s)
        return str(tmp_path / name)
    gold = txt("g.txt", "42.5\n")
    assert files.compare_result_files(txt("a.txt", "The answer is 42.5"), gold) == 1
    assert files.compare_result_files(txt("b.txt", "42.50001"), gold) == 1
    assert files.compare_result_files(txt("c.txt", "42.6"), gold) == 0
    assert files.compare_result_files(txt("d.txt", "the answer"), gold) == 0
    word_gold = txt("w.txt", "Paris")
    assert files.compare_result_files(txt("e.txt", " Paris \n"), word_gold) == 1
    assert files.compare_result_files(txt("f.txt", "paris"), word_gold) == 0

    report = txt("r.txt", "Linux 6.1\n12:00:01 CPU %user\n12:00:02 all 1.0\n23:59:60 all 2.0\n24:00:00 no\n")
    assert files.check_line_number(report, {"expected": "3"}) == 1
    assert files.check_line_number(report, {"expected": 2}) == 0
    assert files.check_line_number(str(tmp_path / "absent"), {"expected": 0}) == 0

    d = Document()
    d.add_paragraph("Lisbon Madrid")
    d.add_paragraph("Rome")
    d.save(tmp_path / "places.docx")
    rules = {"expected": ["Lisbon", "Madrid", "Rome", "Berlin"]}
    assert files.fuzzy_place_math(str(tmp_path / "places.docx"), rules) == 1
    d.add_paragraph("Oslo")
    d.save(tmp_path / "four.docx")
    assert files.fuzzy_place_math(str(tmp_path / "four.docx"), rules) == 0  # exactly three words
    d2 = Document()
    d2.add_paragraph("Lisbonn Madrid Rome")
    d2.save(tmp_path / "typo.docx")
    from control_osworld.osworld.evaluators.fuzz import ratio
    assert files.fuzzy_place_math(str(tmp_path / "typo.docx"), rules) == pytest.approx((ratio("Lisbonn", "Lisbon") + 2) / 3)

    import openpyxl
    wb = openpyxl.Workbook()
    ws = wb.active
    cities = ["São Paulo, Brazil", "Zürich", "New York City"]
    for i, c in enumerate(cities, 2):
        ws.cell(row=i, column=3, value=c)
    wb.save(tmp_path / "c.xlsx")
    exp = {"expected": ["Sao Paulo", ["Zurich", "Zuerich"], "new york"] + ["x"] * 18}
    # C2:C22 has 21 cells: the empty ones must contain "x" too, so they fail
    assert files.compare_conference_city_in_order(str(tmp_path / "c.xlsx"), exp) == 0
    for i in range(5, 23):
        ws.cell(row=i, column=3, value="x")
    wb.save(tmp_path / "c.xlsx")
    assert files.compare_conference_city_in_order(str(tmp_path / "c.xlsx"), exp) == 1
    exp["expected"][1] = "Geneva"
    assert files.compare_conference_city_in_order(str(tmp_path / "c.xlsx"), exp) == 0
    assert files.compare_conference_city_in_order(str(tmp_path / "c.xlsx"), {"expected": ["Sao Paulo"]}) == 0


FILTERS = '''version="9"
logging="no"
name="Promos"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Promotions"
condition="AND (subject,contains,discount) AND (from,contains,\\"shop\\")"
name="Old"
enabled="no"
type="17"
action="Delete"
condition="ALL"
'''


def test_thunderbird_filter(tmp_path):
    p = tmp_path / "msgFilterRules.dat"
    p.write_text(FILTERS)
    got = mail_filters.read_filters(FILTERS)
    assert got[0]["condition"] == ['AND (subject,contains,discount)', 'AND (from,contains,"shop")']
    assert got[1] == {"name": "Old", "enabled": "no", "type": "17", "action": "Delete", "condition": ["ALL"]}
    want = {"enabled": "yes", "action": "Move to folder", "actionValue": "mailbox://nobody@Local%20Folders/Promotions"}
    assert mail_filters.check_thunderbird_filter(str(p), {"expect": [want]}) == 1
    assert mail_filters.check_thunderbird_filter(str(p), {"expect": [{**want, "condition": ["AND (subject,contains,discount)"]}]}) == 0
    assert mail_filters.check_thunderbird_filter(str(p), {"expect": [want], "unexpect": [{"action": "Delete"}]}) == 0
    assert mail_filters.check_thunderbird_filter(None, {"expect": [want]}) == 0
    (tmp_path / "empty.dat").write_text("")
    assert mail_filters.check_thunderbird_filter(str(tmp_path / "empty.dat"), {"expect": [want]}) == 0
    assert mail_filters.check_thunderbird_filter(str(tmp_path / "empty.dat"), {"expect": []}) == 1


def test_vlc_more(tmp_path):
    import asyncio

    from control_osworld.osworld.evaluators import EvalContext, vlc_more
    from tests.osworld.fakes import FakeClient

    rc = tmp_path / "vlcrc"
    rc.write_text("[qt]\n#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29\n"
                  "qt-slider-colours=10;10;10;20;20;20;0;0;0;99;99;99\n[core]\n#play-and-exit=0\nplay-and-exit=1\n")
    assert vlc_more.check_qt_slider_colours(str(rc), {"type": "blackish"}) == 1
    assert vlc_more.check_qt_slider_colours(str(rc), {"type": "match",
                                                      "expected_qt_slider_colours": "10;10;10;20;20;20;0;0;0;99;99;99"}) == 1
    assert vlc_more.check_play_and_exit(str(rc), {"expected_play_and_exit": 1}) == 1
    assert vlc_more.check_play_and_exit(str(rc), {"expected_play_and_exit": 0}) == 0
    default = tmp_path / "default"
    default.write_text("[qt]\n")
    assert vlc_more.check_qt_slider_colours(str(default), {"type": "blackish"}) == 0  # the default is colourful
    assert vlc_more.check_play_and_exit(str(default), {"expected_play_and_exit": 0}) == 1  # absent: 0
    bad = tmp_path / "bad"
    bad.write_text("qt-slider-colours=red\n")
    assert vlc_more.check_qt_slider_colours(str(bad), {"type": "blackish"}) == 0

    def run(cmd, sh):
        t = cmd[-1]
        return {"output": "vlc.desktop\n" if t in ("video/mp4", "video/webm", "video/x-matroska") else
                ("mpv.desktop\n" if t == "video/avi" else "")}
    ctx = EvalContext(client=FakeClient(run=run), cache_dir=tmp_path)
    assert asyncio.run(vlc_more.default_video_player(ctx, {})) == "vlc.desktop\n"
    ctx2 = EvalContext(client=FakeClient(run=lambda c, s: {"output": ""}), cache_dir=tmp_path)
    assert asyncio.run(vlc_more.default_video_player(ctx2, {})) == "unknown"
