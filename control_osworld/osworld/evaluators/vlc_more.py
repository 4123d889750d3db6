"""More VLC getters and metrics: our implementations of upstream OSWorld's
desktop_env/evaluators/getters/vlc.py:get_default_video_player and metrics/vlc.py:
check_qt_slider_colours and check_play_and_exit (vlcrc keys, read as upstream reads them:
the last line containing the key wins, commented or not)."""

from __future__ import annotations

from collections import Counter

from control_osworld.osworld.evaluators.getters import vm_command_line

VIDEO_TYPES = ("3gp", "3gpp", "3gpp2", "avi", "divx", "dv", "fli", "flv", "mp2t", "mp4", "mp4v-es", "mpeg",
               "mpeg-system", "msvideo", "ogg", "quicktime", "vnd.divx", "vnd.mpegurl", "vnd.rn-realvideo", "webm",
               "x-anim", "x-avi", "x-flc", "x-fli", "x-flv", "x-m4v", "x-matroska", "x-mpeg", "x-mpeg-system",
               "x-mpeg2", "x-ms-asf", "x-ms-asf-plugin", "x-ms-asx", "x-ms-wm", "x-ms-wmv", "x-ms-wmx", "x-ms-wvx",
               "x-msvideo", "x-nsv", "x-ogm", "x-ogm+ogg", "x-theora", "x-theora+ogg")
"""Upstream's list of video/* types (it names most twice, which does not change the vote)."""


async def default_video_player(ctx, config: dict) -> str:
    """Follows getters/vlc.py:get_default_video_player: `xdg-mime query default video/<type>` for
    each type (a trusted command); the most common non-empty answer ("unknown" when none). Ours
    asks each type once (upstream asks most twice: the same vote)."""
    apps = []
    for t in VIDEO_TYPES:
        out = await vm_command_line(ctx, {"command": ["xdg-mime", "query", "default", f"video/{t}"]})
        if out:
            apps.append(out)
    return Counter(apps).most_common(1)[0][0] if apps else "unknown"


GETTERS = {"default_video_player": default_video_player}


def _last_value(path: str, key: str, default: str) -> str:
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    value = default
    for line in text.split("\n"):
        if key in line:
            value = line.split("=")[-1].strip()
    return value


def check_qt_slider_colours(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:check_qt_slider_colours: qt-slider-colours (default
    "153;210;153;20;210;20;255;199;15;245;39;29") equals `expected_qt_slider_colours`
    (`type: match`), or every RGB triple has all values under 100 (`type: blackish`). A value
    that does not parse scores 0, as upstream."""
    if not actual_config_path:
        return 0.0
    colours = _last_value(actual_config_path, "qt-slider-colours", "153;210;153;20;210;20;255;199;15;245;39;29")
    if rule["type"] == "match":
        return 1.0 if colours == rule["expected_qt_slider_colours"] else 0.0
    if rule["type"] == "blackish":
        try:
            v = [int(x) for x in colours.split(";")]
        except ValueError:
            return 0.0
        return 1.0 if all(all(c < 100 for c in rgb) for rgb in zip(v[0::3], v[1::3], v[2::3])) else 0.0
    return 0.0  # upstream falls through to None


def check_play_and_exit(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/vlc.py:check_play_and_exit: play-and-exit (default "0") equals
    `expected_play_and_exit` (as a string)."""
    if not actual_config_path:
        return 0.0
    want = rule["expected_play_and_exit"]
    return 1.0 if _last_value(actual_config_path, "play-and-exit=", "0") == str(want) else 0.0


METRICS = [check_qt_slider_colours, check_play_and_exit]
