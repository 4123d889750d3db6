"""Getters, metrics and setup steps for Chrome, GIMP, Impress, Thunderbird and VLC, on small
data each test makes itself (no desktop: a fake client stands in for it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from control_osworld.osworld.evaluators import (
    GETTERS,
    METRICS,
    EvalContext,
    chrome,
    gimp,
    slides,
    thunderbird,
    vlc,
)
from control_osworld.osworld.setup import SetupError, run_steps
from tests.osworld.fakes import FakeClient


def run(coro):
    return asyncio.run(coro)


def test_registered():
    for g in ("vlc_config", "vlc_playing_info", "open_tabs_info", "active_tab_info", "bookmarks",
              "default_search_engine", "gimp_config_file"):
        assert g in GETTERS
    for m in ("is_vlc_playing", "check_qt_bgcone", "is_expected_tabs", "is_expected_bookmarks", "compare_pptx_files",
              "check_structure_sim", "check_image_mirror", "check_config_status", "check_thunderbird_prefs"):
        assert m in METRICS


# ------------------------------------------------------------------ VLC

STATUS = """<?xml version="1.0" encoding="utf-8" standalone="yes" ?><root><state>{state}</state>
<information><category name="meta"><info name="filename">{name}</info><info name="url">file:///home/user/{name}</info>
</category></information></root>"""


def test_vlc_playing_info_and_is_vlc_playing(tmp_path):
    xml = STATUS.format(state="playing", name="clip.mp4")
    c = FakeClient(run=lambda cmd, sh: {"output": xml} if "status.xml" in " ".join(cmd) else {"returncode": 7})
    ctx = EvalContext(client=c, cache_dir=tmp_path)
    path = run(vlc.vlc_playing_info(ctx, {"dest": "status.xml"}))
    assert Path(path).read_text() == xml
    assert ("-u", ":password") == tuple(c.calls[0][1][5:7])
    assert vlc.is_vlc_playing(path, {"type": "file_name", "file_name": "clip.mp4"}) == 1
    assert vlc.is_vlc_playing(path, {"type": "url", "url": "/home/user/clip.mp4"}) == 1
    assert vlc.is_vlc_playing(path, {"type": "file_name", "file_name": "other.mp4"}) == 0
    paused = tmp_path / "paused.xml"
    paused.write_text(STATUS.format(state="paused", name="clip.mp4"))
    assert vlc.is_vlc_playing(str(paused), {"type": "file_name", "file_name": "clip.mp4"}) == 0
    # VLC not answering: None and a note, so the metric scores 0
    down = EvalContext(client=FakeClient(run=lambda cmd, sh: {"returncode": 7, "output": ""}), cache_dir=tmp_path)
    assert run(vlc.vlc_playing_info(down, {"dest": "s.xml"})) is None and "did not answer" in down.notes[0]


def test_vlc_config_metrics(tmp_path):
    rc = "[qt]\n#qt-bgcone=1\nqt-max-volume=200\n#qt-minimal-view=0\n[core]\ninput-record-path=/home/user/Desktop\n" \
         "global-key-play-pause=\n"
    c = FakeClient(files={vlc.VLCRC: rc})
    path = run(vlc.vlc_config(EvalContext(client=c, cache_dir=tmp_path), {"dest": "vlcrc"}))
    assert Path(path).read_text() == rc
    assert vlc.check_qt_bgcone(path, {"expected_qt_bgcone": 1}) == 1
    assert vlc.check_qt_bgcone(path, {"expected_qt_bgcone": 0}) == 0
    assert vlc.check_qt_max_volume(path, {"expected_qt_max_volume": 200}) == 1
    assert vlc.check_qt_minimal_view(path, {"expected_qt_minimal_view": 1}) == 0
    assert vlc.is_vlc_recordings_folder(path, {"recording_file_path": "/home/user/Desktop"}) == 1
    assert vlc.check_global_key_play_pause(path, {"expected_global_key_play_pause": 0}) == 1
    assert vlc.check_one_instance_when_started_from_file(path, {"expected_one_instance_when_started_from_file": 1}) == 1
    assert vlc.is_vlc_fullscreen({"width": 1920, "height": 1080}, {"width": 1920, "height": 1080}) == 1
    assert vlc.is_vlc_fullscreen({"width": 800, "height": 600}, {"width": 1920, "height": 1080}) == 0
    assert run(vlc.vlc_config(EvalContext(client=FakeClient(), cache_dir=tmp_path), {"dest": "x"})) is None


# ------------------------------------------------------------------ Chrome

TABS = [{"id": "A", "type": "page", "title": "Docs", "url": "https://www.example.org/"},
        {"id": "B", "type": "browser_ui", "title": "Omnibox Popup", "url": "chrome://omnibox-popup.top-chrome/"},
        {"id": "C", "type": "page", "title": "Local", "url": "file:///home/user/page.html"}]


def _devtools_client(tabs=TABS, **files):
    def shell(cmd, sh):
        url = cmd[-1]
        if "/json/list" in url:
            return {"output": json.dumps(tabs)}
        return {"output": "{}"}

    return FakeClient(files=files, run=shell)


def test_chrome_tabs_getters_and_metrics(tmp_path):
    ctx = EvalContext(client=_devtools_client(), cache_dir=tmp_path)
    tabs = run(chrome.open_tabs_info(ctx, {}))
    assert tabs == [{"title": "Docs", "url": "https://www.example.org/"},
                    {"title": "Local", "url": "file:///home/user/page.html"}]
    assert chrome.is_expected_tabs(tabs, {"type": "url", "urls": ["file:///home/user/page.html", "https://example.org"]}) == 1
    assert chrome.is_expected_tabs(tabs, {"type": "url", "urls": ["https://example.org"]}) == 0
    active = run(chrome.active_tab_info(ctx, {}))
    assert active == {"title": "Docs", "url": "https://www.example.org/"}
    assert chrome.is_expected_active_tab(active, {"type": "url", "url": "https://example.org"}) == 1
    assert chrome.is_expected_active_tab(active, {"type": "url", "url": "https://example.com"}) == 0
    # no browser: [] / None and a note, as upstream
    down = EvalContext(client=FakeClient(run=lambda c, s: {"returncode": 7}), cache_dir=tmp_path)
    assert run(chrome.open_tabs_info(down, {})) == [] and "9222" in down.notes[0]
    assert run(chrome.active_tab_info(down, {})) is None


def test_chrome_profile_getters_and_bookmarks_metric(tmp_path):
    marks = {"roots": {"bookmark_bar": {"children": [
        {"type": "folder", "name": "Liked Authors", "children": [{"type": "url", "url": "https://a.example/x"},
                                                                {"type": "url", "url": "https://b.example/y"}]},
        {"type": "url", "name": "Wiki", "url": "https://wiki.example/"}]}}}
    prefs = {"default_search_provider_data": {"template_url_data": {"short_name": "Bing"}}}
    ctx = EvalContext(client=FakeClient(files={f"{chrome.PROFILE}/Bookmarks": json.dumps(marks),
                                               f"{chrome.PROFILE}/Preferences": json.dumps(prefs)}), cache_dir=tmp_path)
    got = run(chrome.bookmarks(ctx, {}))
    assert chrome.is_expected_bookmarks(got, {"type": "bookmark_bar_folders_names", "names": ["Liked Authors"]}) == 1
    assert chrome.is_expected_bookmarks(got, {"type": "bookmark_bar_websites_urls", "urls": ["https://wiki.example/"]}) == 1
    assert chrome.is_expected_bookmarks(got, {"type": "liked_authors_websites_urls",
                                              "urls": [["https://a.example/x", "https://a.example/z"],
                                                       "https://b.example/y"]}) == 1
    assert chrome.is_expected_bookmarks(got, {"type": "liked_authors_websites_urls", "urls": ["https://a.example/x"]}) == 0
    assert run(chrome.default_search_engine(ctx, {})) == "Bing"
    empty = EvalContext(client=FakeClient(), cache_dir=tmp_path)
    assert run(chrome.bookmarks(empty, {})) == [] and run(chrome.default_search_engine(empty, {})) == "Google"
    assert chrome.is_expected_bookmarks([], {"type": "bookmark_bar_folders_names", "names": []}) == 0


def test_chrome_tab_setup_steps():
    c = _devtools_client()
    run(run_steps(c, [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["file:///home/user/a b.html"]}},
                      {"type": "chrome_close_tabs", "parameters": {"urls_to_close": ["https://example.org"]}}]))
    urls = [(call[1][-2], call[1][-1]) for call in c.calls if call[0] == "execute"]
    assert ("PUT", "http://127.0.0.1:9222/json/new?file:///home/user/a%20b.html") in urls
    assert ("GET", "http://127.0.0.1:9222/json/close/A") in urls  # the tab showing www.example.org/
    assert not any(u.endswith("/json/close/C") for _, u in urls)
    down = FakeClient(run=lambda cm, sh: {"returncode": 7})
    with pytest.raises(SetupError, match="DevTools port 9222"):
        run(run_steps(down, [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["about:blank"]}}],
                      file="tasks/chrome/t.json"))


# ------------------------------------------------------------------ GIMP


def _picture(tmp_path: Path, name: str, arr: np.ndarray) -> str:
    p = tmp_path / name
    Image.fromarray(arr).save(p)
    return str(p)


def test_gimp_image_metrics(tmp_path):
    rng = np.random.default_rng(0)
    base = np.zeros((60, 80, 3), np.uint8)
    base[:, :40] = 200  # left half bright: not symmetric
    base[10:20, 50:70] = rng.integers(0, 255, (10, 20, 3), dtype=np.uint8)
    src = _picture(tmp_path, "src.png", base)
    assert gimp.ssim(base, base) == pytest.approx(1.0)
    assert gimp.ssim(base, 255 - base) < 0.5
    assert gimp.check_structure_sim(src, src) == 1
    assert gimp.check_structure_sim(src, _picture(tmp_path, "inv.png", 255 - base)) == 0
    assert gimp.check_structure_sim(src, _picture(tmp_path, "small.png", base[:30])) == 0
    mirrored = _picture(tmp_path, "mirror.png", base[:, ::-1].copy())
    assert gimp.check_image_mirror(src, mirrored) == 1 and gimp.check_image_mirror(src, src) == 0
    assert gimp.check_image_size(src, {"width": 80, "height": 60}) == 1
    assert gimp.check_image_size(src, {"height": 61}) == 0
    assert gimp.compare_image_list([src], [_picture(tmp_path, "copy.png", base.copy())]) == 1
    changed = base.copy()
    changed[0, 0] = 1
    assert gimp.compare_image_list(src, _picture(tmp_path, "changed.png", changed)) == 0
    assert gimp.check_structure_sim(None, src) == 0


def test_gimp_config_getter_and_status(tmp_path):
    rc = "# GIMP gimprc\n(theme \"Dark\")\n(show-tips no)\n(default-image\n    (width 1920))\n(undo-levels 100)\n"
    c = FakeClient(files={f"{gimp.GIMP_DIR}/gimprc": rc})
    path = run(gimp.gimp_config_file(EvalContext(client=c, cache_dir=tmp_path), {"file_name": "gimprc", "dest": "gimprc"}))
    assert Path(path).read_text() == rc
    assert gimp.check_config_status(path, {"key": "undo-levels", "value": "100"}) == 1
    assert gimp.check_config_status(path, {"key": "undo-levels", "value": "5"}) == 0
    assert gimp.check_config_status(path, {"key": ["show-tips", "no"], "value": "no"}) == 1
    assert run(gimp.gimp_config_file(EvalContext(client=FakeClient(), cache_dir=tmp_path),
                                     {"file_name": "sessionrc", "dest": "s"})) is None


# ------------------------------------------------------------------ Impress (pptx)


def _deck(path: Path, title="Quarterly review", body="Revenue up", bold=False, left=None, portrait=False,
          strike=False, notes="") -> str:
    from pptx import Presentation
    from pptx.util import Emu

    prs = Presentation()
    if portrait:
        prs.slide_width, prs.slide_height = prs.slide_height, prs.slide_width
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = title
    para = slide.placeholders[1].text_frame.paragraphs[0]
    run_ = para.add_run()
    run_.text = body
    run_.font.bold = bold
    if strike:
        run_.font._element.set("strike", "sngStrike")
    if left is not None:
        slide.shapes.title.left = Emu(left)
    if notes:
        slide.notes_slide.notes_text_frame.text = notes
    prs.save(path)
    return str(path)


def test_compare_pptx_files(tmp_path):
    gold = _deck(tmp_path / "gold.pptx")
    assert slides.compare_pptx_files(gold, _deck(tmp_path / "same.pptx")) == 1
    assert slides.compare_pptx_files(gold, _deck(tmp_path / "text.pptx", body="Revenue down")) == 0
    assert slides.compare_pptx_files(gold, _deck(tmp_path / "bold.pptx", bold=True)) == 0
    assert slides.compare_pptx_files(gold, _deck(tmp_path / "bold.pptx", bold=True), examine_font_bold=False) == 1
    moved = _deck(tmp_path / "moved.pptx", left=12345)
    assert slides.compare_pptx_files(gold, moved) == 0
    assert slides.compare_pptx_files(gold, moved, examine_shape=False) == 1
    assert slides.compare_pptx_files(gold, _deck(tmp_path / "notes.pptx", notes="say hi")) == 0
    assert slides.compare_pptx_files(gold, _deck(tmp_path / "strike.pptx", strike=True)) == 0
    assert slides.compare_pptx_files(gold, None) == 0
    with pytest.raises(ValueError, match="examine_everything"):
        slides.compare_pptx_files(gold, gold, examine_everything=True)


def test_slide_orientation_and_strikethrough(tmp_path):
    assert slides.check_slide_orientation_Portrait(_deck(tmp_path / "p.pptx", portrait=True)) == 1
    assert slides.check_slide_orientation_Portrait(_deck(tmp_path / "l.pptx")) == 0
    rule = {"slide_index_s": [0], "shape_index_s": [1], "paragraph_index_s": [0]}
    assert slides.check_strikethrough(_deck(tmp_path / "s.pptx", strike=True), rule) == 1
    assert slides.check_strikethrough(_deck(tmp_path / "n.pptx"), rule) == 0
    assert slides.check_strikethrough(_deck(tmp_path / "n.pptx"), {**rule, "shape_index_s": [9]}) == 0


# ------------------------------------------------------------------ Thunderbird


def test_check_thunderbird_prefs(tmp_path):
    p = tmp_path / "prefs.js"
    p.write_text('// Mozilla User Preferences\nuser_pref("mail.spellcheck.inline", false);\n'
                 'user_pref("mailnews.start_page.enabled", true);\nuser_pref("mail.identity.id1.fullName", "Ann \\"A\\" Lee");\n')
    prefs = thunderbird.read_prefs(p.read_text())
    assert prefs["mail.identity.id1.fullName"] == 'Ann "A" Lee'
    ok = {"expect": {"mail.spellcheck.inline": {"method": "eq", "ref": False}}}
    assert thunderbird.check_thunderbird_prefs(str(p), ok) == 1
    assert thunderbird.check_thunderbird_prefs(str(p), {"expect": {"absent.key": {"method": "eq", "ref": 1}}}) == 0
    assert thunderbird.check_thunderbird_prefs(
        str(p), {**ok, "unexpect": {"mailnews.start_page.enabled": {"method": "eq", "ref": True}}}) == 0
    assert thunderbird.check_thunderbird_prefs(None, ok) == 0
