"""Thunderbird message filters: our implementation of upstream OSWorld's
desktop_env/evaluators/metrics/thunderbird.py:check_thunderbird_filter (msgFilterRules.dat)."""

from __future__ import annotations

import re

_CONDITION = re.compile(r'\b(?:AND|OR) \((?:[\w ]+),(?:[\w \']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b')


def _unquote(v: str) -> str:
    return v.replace('\\"', '"').replace("\\\\", "\\")


def read_filters(text: str) -> list[dict]:
    """The filters of a msgFilterRules.dat, as upstream reads them: `key="value"` lines; a filter
    starts at `name=` and is complete at its `condition=` line (split into its AND/OR/ALL
    terms); a filter without a condition line is left out, as upstream."""
    out: list[dict] = []
    cur: dict = {}
    for line in text.splitlines(keepends=True):
        for key in ("name", "enabled", "type", "action", "actionValue"):
            if line.startswith(f"{key}="):
                if key == "name":
                    cur = {}
                cur[key] = _unquote(line[len(key) + 2:-2])
                break
        else:
            if line.startswith("condition="):
                cur["condition"] = _CONDITION.findall(_unquote(line[11:-2]))
                out.append(cur)
    return out


def check_thunderbird_filter(result: str | None, rules: dict) -> float:
    """Follows metrics/thunderbird.py:check_thunderbird_filter: every `expect` record matches some
    filter (each given key equal; `condition` a list of terms) and no `unexpect` record matches
    any filter."""
    if result is None:
        return 0.0
    with open(result, encoding="utf-8", errors="replace") as f:
        filters = read_filters(f.read())

    def match(pattern: dict, flt: dict) -> bool:
        return all(k in flt and flt[k] == v for k, v in pattern.items())

    expect = rules.get("expect", [])
    unexpect = rules.get("unexpect", [])
    found = [any(match(r, flt) for flt in filters) for r in expect]
    clean = not any(match(r, flt) for flt in filters for r in unexpect)
    return 1.0 if all(found) and clean else 0.0


METRICS = [check_thunderbird_filter]
