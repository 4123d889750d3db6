"""Desktop (OS) metrics: our implementations of upstream OSWorld's desktop_env/evaluators/
metrics/basic_os.py. One deliberate difference: upstream `eval`s the favourite-apps string the
desktop printed; we parse it as a literal (`ast.literal_eval`), never running desktop output.
"""

from __future__ import annotations

import ast


def check_gnome_favorite_apps(apps_str: str | None, rule: dict) -> float:
    """Follows metrics/basic_os.py:check_gnome_favorite_apps: the `gsettings get org.gnome.shell
    favorite-apps` list (e.g. "['a.desktop', 'b.desktop']") has as many entries as
    rule["expected"] and the same set. Output that is no list literal raises (upstream's eval
    raises too)."""
    apps = ast.literal_eval((apps_str or "").strip())
    expected = rule["expected"]
    return 1.0 if len(apps) == len(expected) and set(apps) == set(expected) else 0.0


def is_utc_0(timedatectl_output: str | None) -> float:
    """Follows metrics/basic_os.py:is_utc_0: the fourth line of `timedatectl status` (Time zone:
    ... (XXX, +0000)) ends with "+0000)". Fewer than four lines raise (IndexError, as upstream)."""
    return 1.0 if (timedatectl_output or "").split("\n")[3].endswith("+0000)") else 0.0


def check_moved_jpgs(directory_list: dict | None, rule: dict) -> float:
    """Follows metrics/basic_os.py:check_moved_jpgs: the listed directory's children's names are
    as many as rule["expected"] and the same set."""
    if not directory_list:
        return 0.0
    names = [n["name"] for n in directory_list.get("children", [])]
    expected = rule["expected"]
    return 1.0 if len(names) == len(expected) and set(names) == set(expected) else 0.0


def is_in_vm_clickboard(config: dict, terminal_output: str | None) -> float:
    """Follows metrics/basic_os.py:is_in_vm_clickboard: the clipboard text (the `expected`
    getter's output, e.g. `xsel --clipboard --output`) contains config["expected"] (each of
    them, when a list)."""
    out = terminal_output or ""
    want = config["expected"]
    if not isinstance(want, list):
        return 1.0 if want in out else 0.0
    return 1.0 if all(w in out for w in want) else 0.0


METRICS = [check_gnome_favorite_apps, is_utc_0, check_moved_jpgs, is_in_vm_clickboard]
