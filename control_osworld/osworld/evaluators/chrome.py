"""Chrome/Chromium getters, metrics and setup steps (our implementations of upstream OSWorld's
desktop_env/evaluators/getters/chrome.py, metrics/chrome.py and the `chrome_open_tabs` /
`chrome_close_tabs` steps of desktop_env/controllers/setup.py).

The desktop has Chromium, with `google-chrome` a wrapper for it (vm/bin/google-chrome) that keeps
its profile where upstream's getters look (~/.config/google-chrome). Upstream drives the browser
through Playwright over the DevTools port 9222; we speak DevTools' HTTP endpoints (`/json/list`,
`/json/new`, `/json/close`) with curl *inside* the desktop, so no network path from the host and
no Playwright are needed. Deviation: tab titles are read as the browser reports them, without
upstream's wait for network idle.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote, urlparse, urlunparse

log = logging.getLogger(__name__)

PORT = 9222
PROFILE = "/home/user/.config/google-chrome/Default"


class DevToolsError(RuntimeError):
    pass


async def _devtools(client, path: str, method: str = "GET") -> Any:
    r = await client.execute(["curl", "-s", "-f", "--max-time", "10", "-X", method,
                              f"http://127.0.0.1:{PORT}{path}"], timeout=20)
    if r.get("returncode") != 0:
        raise DevToolsError(f"Chrome's DevTools port {PORT} did not answer {method} {path} "
                            f"(curl exit {r.get('returncode')}): is the browser running with --remote-debugging-port?")
    out = r.get("output") or ""
    try:
        return json.loads(out) if out.strip() else None
    except ValueError:
        return out


async def tabs(client) -> list[dict]:
    """Open pages, most recently active first (DevTools' order)."""
    return [t for t in (await _devtools(client, "/json/list") or []) if t.get("type") == "page"]


# ------------------------------------------------------------------ setup steps


async def open_tabs(client, urls: list[str]) -> None:
    """Follows setup.py:_chrome_open_tabs_setup: open each URL in a new tab."""
    for url in urls:
        await _devtools(client, f"/json/new?{quote(url, safe=':/?&=#%')}", method="PUT")


async def close_tabs(client, urls: list[str]) -> None:
    """Follows setup.py:_chrome_close_tabs_setup: close the tabs showing these URLs."""
    for t in await tabs(client):
        if any(compare_urls(t.get("url"), u) for u in urls):
            await _devtools(client, f"/json/close/{t['id']}")


# ------------------------------------------------------------------ getters


async def open_tabs_info(ctx, config: dict) -> list[dict]:
    """Follows getters/chrome.py:get_open_tabs_info: [{title, url}] of every open tab ([] when no
    browser answers, as upstream)."""
    try:
        return [{"title": t.get("title", ""), "url": t.get("url", "")} for t in await tabs(ctx.client)]
    except DevToolsError as e:
        ctx.notes.append(f"open_tabs_info: {e}")
        return []


async def active_tab_info(ctx, config: dict) -> dict | None:
    """Follows getters/chrome.py:get_active_tab_info: {title, url} of the active tab (the most
    recently active page; upstream reads its URL from the accessibility tree and reloads it for
    `content`, which we leave out). None when no browser answers."""
    try:
        pages = await tabs(ctx.client)
    except DevToolsError as e:
        ctx.notes.append(f"active_tab_info: {e}")
        return None
    return {"title": pages[0].get("title", ""), "url": pages[0].get("url", "")} if pages else None


async def _profile_json(ctx, name: str) -> dict | None:
    data = await ctx.client.read_file(f"{PROFILE}/{name}")
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


async def bookmarks(ctx, config: dict) -> dict | list:
    """Follows getters/chrome.py:get_bookmarks: the `roots` of the profile's Bookmarks file
    ([] when there is none)."""
    data = await _profile_json(ctx, "Bookmarks")
    return data.get("roots", {}) if data else []


async def default_search_engine(ctx, config: dict) -> str:
    """Follows getters/chrome.py:get_default_search_engine: the short name of the default
    search provider in the profile's Preferences ("Google" when unset, as upstream)."""
    data = await _profile_json(ctx, "Preferences") or {}
    return data.get("default_search_provider_data", {}).get("template_url_data", {}).get("short_name", "Google")


GETTERS = {"open_tabs_info": open_tabs_info, "active_tab_info": active_tab_info, "bookmarks": bookmarks,
           "default_search_engine": default_search_engine}


# ------------------------------------------------------------------ metrics


def compare_urls(url1: str | None, url2: str | None) -> bool:
    """Follows metrics/utils.py:compare_urls: equal after lower-casing scheme and host, dropping
    `www.`, a lone `/` path, and assuming http when there is no scheme."""
    if url1 is None or url2 is None:
        return url1 == url2

    def norm(u: str) -> str:
        p = urlparse(u)
        return urlunparse(p._replace(scheme=(p.scheme or "http").lower(), netloc=p.netloc.lower().replace("www.", ""),
                                     path=p.path if p.path != "/" else ""))

    return norm(url1) == norm(url2)


def is_expected_tabs(open_tabs: list[dict], rule: dict) -> float:
    """Follows metrics/chrome.py:is_expected_tabs: rule `{type: url, urls: [...]}`; the open
    tabs' URLs equal the list (same length, each expected URL open; compare_urls)."""
    if rule.get("type") != "url":
        log.error("is_expected_tabs: unknown rule type %r", rule.get("type"))
        return 0.0
    actual = [t["url"] for t in open_tabs or []]
    expected = rule["urls"]
    if len(actual) != len(expected):
        return 0.0
    return 1.0 if all(any(compare_urls(e, a) for a in actual) for e in expected) else 0.0


def is_expected_active_tab(active_tab_info: dict | str | None, rule: dict) -> float:
    """Follows metrics/chrome.py:is_expected_active_tab: rule `{type: url, url}`."""
    if not active_tab_info or rule.get("type") != "url":
        return 0.0
    actual = active_tab_info.get("url") if isinstance(active_tab_info, dict) else active_tab_info
    return 1.0 if compare_urls(rule["url"], actual) else 0.0


def is_expected_bookmarks(bookmarks: dict | list | None, rule: dict) -> float:
    """Follows metrics/chrome.py:is_expected_bookmarks: rule types `bookmark_bar_folders_names`
    (set of folder names on the bar), `bookmark_bar_websites_urls` (set of URLs on the bar),
    `liked_authors_websites_urls` (the bar's "Liked Authors" folder holds one URL from each
    alternative list)."""
    from itertools import product

    if not bookmarks:
        return 0.0
    bar = bookmarks["bookmark_bar"]["children"]  # type: ignore[call-overload]
    kind = rule["type"]
    if kind == "bookmark_bar_folders_names":
        return 1.0 if {b["name"] for b in bar if b["type"] == "folder"} == set(rule["names"]) else 0.0
    if kind == "bookmark_bar_websites_urls":
        return 1.0 if {b["url"] for b in bar if b["type"] == "url"} == set(rule["urls"]) else 0.0
    if kind == "liked_authors_websites_urls":
        folder = next((b for b in bar if b["type"] == "folder" and b["name"] == "Liked Authors"), None)
        if folder is None:
            return 0.0
        urls = {c["url"] for c in folder["children"] if c["type"] == "url"}
        options = [[u] if isinstance(u, str) else u for u in rule["urls"]]
        return 1.0 if any(set(combo) == urls for combo in product(*options)) else 0.0
    raise TypeError(f"is_expected_bookmarks: rule type {kind!r} is not supported")


METRICS = [is_expected_tabs, is_expected_active_tab, is_expected_bookmarks]
