"""VLC getters and metrics (our implementations of upstream OSWorld's
desktop_env/evaluators/getters/vlc.py and metrics/vlc.py).

The desktop's VLC reads ~/.config/vlc/vlcrc, whose seed (vm/home/.config/vlc/vlcrc) turns on
VLC's HTTP interface on 127.0.0.1:8080 with the password `password`, as upstream's VM has it.
The HTTP interface is reached from inside the desktop (`curl` through the server), so this works
on desktops without a network path from the host (the embedded one).
"""

from __future__ import annotations

import logging
from pathlib import Path
from xml.etree import ElementTree

log = logging.getLogger(__name__)

VLCRC = "/home/user/.config/vlc/vlcrc"
STATUS_URL = "http://127.0.0.1:8080/requests/status.xml"
PASSWORD = "password"


# ------------------------------------------------------------------ getters


async def vlc_config(ctx, config: dict) -> str | None:
    """Follows getters/vlc.py:get_vlc_config: ~/.config/vlc/vlcrc copied to the cache as `dest`
    (None when VLC has not written one)."""
    data = await ctx.client.read_file(VLCRC)
    if data is None:
        return None
    local = Path(ctx.cache_dir) / config.get("dest", "vlcrc")
    local.write_bytes(data)
    return str(local)


async def vlc_playing_info(ctx, config: dict) -> str | None:
    """Follows getters/vlc.py:get_vlc_playing_info: VLC's `/requests/status.xml` (HTTP interface,
    port 8080, password `password`) saved as `dest`; None when VLC does not answer."""
    r = await ctx.client.execute(["curl", "-s", "-f", "--max-time", "10", "-u", f":{PASSWORD}", STATUS_URL])
    if r.get("returncode") != 0 or not (r.get("output") or "").strip():
        ctx.notes.append(f"vlc_playing_info: VLC's HTTP interface did not answer (curl exit {r.get('returncode')})")
        return None
    local = Path(ctx.cache_dir) / config.get("dest", "status.xml")
    local.write_text(r["output"])
    return str(local)


GETTERS = {"vlc_config": vlc_config, "vlc_playing_info": vlc_playing_info}


# ------------------------------------------------------------------ metrics


def _read(path: str | None) -> str | None:
    if not path or not Path(path).exists():
        return None
    return Path(path).read_bytes().decode("utf-8", "replace")


def _vlcrc_value(text: str, key: str, default: str) -> str:
    """The value of `key` in a vlcrc as upstream reads it: the last line containing `key=`
    (VLC writes defaults commented out, `#key=value`; upstream matches those too)."""
    value = default
    for line in text.split("\n"):
        if f"{key}=" in line:
            value = line.split("=")[-1].strip()
    return value


def is_vlc_playing(actual_status_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:is_vlc_playing: state `playing` and the meta `filename` (rule type
    `file_name`) or `url` (type `url`) ends with the rule's value."""
    text = _read(actual_status_path)
    if text is None:
        return 0.0
    tree = ElementTree.fromstring(text)
    if (tree.findtext("state") or "") != "playing":
        return 0.0
    kind = rule.get("type")
    if kind not in ("file_name", "url"):
        log.error("is_vlc_playing: unknown rule type %r", kind)
        return 0.0
    info = tree.find(f'information/category[@name="meta"]/info[@name="{"filename" if kind == "file_name" else "url"}"]')
    value = info.text if info is not None else None
    return 1.0 if value and value.endswith(rule[kind]) else 0.0


def is_vlc_recordings_folder(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:is_vlc_recordings_folder: the first uncommented `input-record-path`
    equals `recording_file_path`."""
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    for line in text.split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return 1.0 if line.split("=")[-1].strip() == rule["recording_file_path"] else 0.0
    return 0.0


def is_vlc_fullscreen(actual_window_size: dict | None, screen_size: dict | None) -> float:
    """Follows metrics/vlc.py:is_vlc_fullscreen: the window's size equals the screen's."""
    if not actual_window_size or not screen_size:
        return 0.0
    return 1.0 if (actual_window_size["width"], actual_window_size["height"]) == \
        (screen_size["width"], screen_size["height"]) else 0.0


def _vlcrc_check(key: str, rule_key: str, default: str):
    def metric(actual_config_path: str | None, rule: dict) -> float:
        text = _read(actual_config_path)
        if text is None:
            return 0.0
        return 1.0 if _vlcrc_value(text, key, default) == str(rule[rule_key]) else 0.0

    return metric


def check_qt_bgcone(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:check_qt_bgcone: `qt-bgcone` (default 1) equals `expected_qt_bgcone`."""
    return _vlcrc_check("qt-bgcone", "expected_qt_bgcone", "1")(actual_config_path, rule)


def check_qt_max_volume(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:check_qt_max_volume: `qt-max-volume` (default 125) equals
    `expected_qt_max_volume`."""
    return _vlcrc_check("qt-max-volume", "expected_qt_max_volume", "125")(actual_config_path, rule)


def check_qt_minimal_view(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:check_qt_minimal_view: `qt-minimal-view` (default 0) equals
    `expected_qt_minimal_view`."""
    return _vlcrc_check("qt-minimal-view", "expected_qt_minimal_view", "0")(actual_config_path, rule)


def check_one_instance_when_started_from_file(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:check_one_instance_when_started_from_file (default 1)."""
    return _vlcrc_check("one-instance-when-started-from-file", "expected_one_instance_when_started_from_file",
                        "1")(actual_config_path, rule)


def check_global_key_play_pause(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:check_global_key_play_pause: "1" when `global-key-play-pause` has a
    value, "0" when it is empty or absent; equals `expected_global_key_play_pause`."""
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    state = "0"
    for line in text.split("\n"):
        if "global-key-play-pause=" in line:
            state = "0" if line.split("=")[-1].strip() == "" else "1"
    return 1.0 if state == str(rule["expected_global_key_play_pause"]) else 0.0


METRICS = [is_vlc_playing, is_vlc_recordings_folder, is_vlc_fullscreen, check_qt_bgcone, check_qt_max_volume,
           check_qt_minimal_view, check_one_instance_when_started_from_file, check_global_key_play_pause]
