"""chrome_prefs.py: Preferences getters read through the trusted file channel, the active URL
from DevTools as the checker, and the URL/font/extension metrics."""

from __future__ import annotations

import asyncio
import json

import pytest

from control_osworld.osworld.evaluators import GETTERS, EvalContext, chrome_prefs
from control_osworld.osworld.evaluators.chrome import PROFILE
from tests.osworld.fakes import FakeClient

PREFS = f"{PROFILE}/Preferences"


def _ctx(tmp_path, prefs=None, run=None, raw=None):
    files = {}
    if prefs is not None or raw is not None:
        files[PREFS] = raw if raw is not None else json.dumps(prefs)
    return EvalContext(client=FakeClient(files=files, run=run), cache_dir=tmp_path)


def get(name, ctx, config=None):
    return asyncio.run(GETTERS[name](ctx, config or {}))


def test_preferences_getters(tmp_path):
    prefs = {"enable_do_not_track": True, "safebrowsing": {"enabled": False, "enhanced": True},
             "session": {"restore_on_startup": 5}, "profile": {"name": "Thomas", "default_content_setting_values": {}},
             "webkit": {"webprefs": {"default_font_size": 20}},
             "browser": {"theme": {"color_scheme2": 2}},
             "extensions": {"settings": {"abc": {"path": "/home/user/ext", "manifest": {"name": "Helper"}}}}}
    ctx = _ctx(tmp_path, prefs)
    assert get("enable_do_not_track", ctx) == "true"
    assert get("enable_safe_browsing", ctx) == "true"
    assert get("new_startup_page", ctx) == "true"
    assert get("data_delete_automacally", ctx) == "true"
    assert get("chrome_font_size", ctx) == {"default_font_size": 20}
    assert get("profile_name", ctx) == "Thomas"
    assert get("chrome_appearance_mode_ui", ctx) == "dark"
    assert get("find_unpacked_extension_path", ctx) == ["/home/user/ext"]
    assert get("find_installed_extension_name", ctx) == ["Helper"]
    # the trusted server read the file: no command ran as the agent
    assert all(c[0] == "read_file" for c in ctx.client.calls)

    fresh = _ctx(tmp_path, {"profile": {}, "extensions": {"theme": {"system_theme": 0}}})
    assert get("enable_do_not_track", fresh) == "false"
    assert get("enable_safe_browsing", fresh) == "false"
    assert get("new_startup_page", fresh) == "true"  # no session key: a fresh start
    assert get("data_delete_automacally", fresh) == "false"
    assert get("chrome_font_size", fresh)["default_font_size"] == 16
    assert get("profile_name", fresh) is None
    assert get("chrome_appearance_mode_ui", fresh) == "light"  # system_theme 0
    assert get("chrome_appearance_mode_ui", _ctx(tmp_path, {})) == "system"
    assert get("new_startup_page", _ctx(tmp_path, {"session": {"restore_on_startup": 1}})) == "false"
    assert get("find_installed_extension_name", fresh) == []


def test_unreadable_preferences_raise_instead_of_a_default(tmp_path):
    for ctx in (_ctx(tmp_path), _ctx(tmp_path, raw="{not json"), _ctx(tmp_path, raw="[1]")):
        with pytest.raises(chrome_prefs.PreferencesUnreadable):
            get("enable_do_not_track", ctx)
    with pytest.raises(chrome_prefs.PreferencesUnreadable):
        get("data_delete_automacally", _ctx(tmp_path, {}))


def test_active_url_from_devtools_as_checker(tmp_path):
    pages = [{"type": "page", "url": "chrome://password-manager/passwords"},
             {"type": "page", "url": "https://www.drugs.com/npc/"}, {"type": "service_worker", "url": "x"}]
    seen = {}

    def run(cmd, sh):
        seen["cmd"] = cmd
        return {"output": json.dumps(pages)}
    ctx = _ctx(tmp_path, run=run)
    assert get("active_url_from_accessTree", ctx, {"goto_prefix": ""}) == "chrome://password-manager/passwords"
    assert "json/list" in seen["cmd"][-1]
    # the command is the checker's (trusted), never the agent's
    class Recording(FakeClient):
        async def execute(self, command, shell=False, timeout=120, **kw):
            self.kw = kw
            return await super().execute(command, shell, timeout)
    rc = Recording(run=run)
    asyncio.run(chrome_prefs.active_url_from_accessTree(EvalContext(client=rc, cache_dir=tmp_path), {}))
    assert rc.kw.get("trusted") is True
    down = _ctx(tmp_path, run=lambda c, s: {"returncode": 7, "output": ""})
    assert get("active_url_from_accessTree", down) is None and "did not answer" in down.notes[0]
    assert get("active_url_from_accessTree", _ctx(tmp_path, run=lambda c, s: {"output": "[]"})) is None
    with pytest.raises(ValueError):
        get("active_url_from_accessTree", _ctx(tmp_path, run=lambda c, s: {"output": "<html>"}))


def test_url_font_extension_metrics():
    m = chrome_prefs
    assert m.is_expected_active_tab_approximate("chrome://password-manager/passwords?x=1",
                                                {"type": "url", "url": "chrome://password-manager/passwords"}) == 1
    assert m.is_expected_active_tab_approximate({"url": "https://a.org/p?q=1"}, {"type": "url", "url": "https://a.org/p"}) == 1
    assert m.is_expected_active_tab_approximate("https://a.org/q", {"type": "url", "url": "https://a.org/p"}) == 0
    assert m.is_expected_active_tab_approximate(None, {"type": "url", "url": "x"}) == 0
    assert m.is_expected_url_pattern_match("chrome://settings/appearance", {"expected": ["^chrome://settings/appearance/?$"]}) == 1
    assert m.is_expected_url_pattern_match({"url": "https://scholar.google.com/citations?user=qRAQ5BsAAAAJ&hl=en"},
                                           {"expected": ["https://scholar.google.com/citations", "user=qRAQ5BsAAAAJ"]}) == 1
    assert m.is_expected_url_pattern_match("https://x.org", {"expected": ["x", "y"]}) == 0
    assert m.is_expected_url_pattern_match(None, {"expected": []}) == 0
    assert m.check_font_size({"default_font_size": 20}, {"type": "value", "value": 20}) == 1
    assert m.check_font_size({"default_font_size": 20}, {"type": "range", "min": 16, "max": 20}) == 0  # strict
    assert m.check_font_size({"default_font_size": 18}, {"type": "range", "min": 16, "max": 20}) == 1
    with pytest.raises(TypeError):
        m.check_font_size({"default_font_size": 18}, {"type": "other"})
    assert m.is_expected_installed_extensions(["Zoom for Google Chrome", "X"], {"expected": ["Zoom Chrome Extension"]}) == 1
    assert m.is_expected_installed_extensions(["X"], {"expected": ["Y"]}) == 0
    assert m.is_expected_installed_extensions([], {"expected": []}) == 0
