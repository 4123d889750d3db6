"""Contracts between the stages, defined once: the monitoring stage writes them, the analysis
stage reads them (like `trajectory.py` for the trajectory). Ground floor: imports nothing of
the package."""

from __future__ import annotations

from itertools import combinations

__all__ = ["CHANNELS", "INPUT_SUBSETS", "SCORE_COLUMNS", "canonical_subset"]

# What a monitor can be shown: A (actions), T (visible text), S (screenshots).
CHANNELS = ("A", "T", "S")
# Every non-empty subset, channels in the fixed order A, T, S joined by "+".
INPUT_SUBSETS: tuple[str, ...] = tuple("+".join(c) for n in (1, 2, 3) for c in combinations(CHANNELS, n))

# The columns of a scores table (one row per run/step/monitor/inputs).
SCORE_COLUMNS = (
    "run_id", "log", "sample_id", "epoch", "step", "monitor", "monitor_kind", "inputs",
    "config_hash", "score", "error",
)


def canonical_subset(value: str | list[str] | tuple[str, ...]) -> str:
    """'T+A', 'a,t', ['T', 'A'] -> 'A+T'. Raises ValueError for anything but a non-empty subset."""
    if isinstance(value, str):
        parts = [p.strip().upper() for p in value.replace(",", "+").split("+")]
    else:
        parts = [str(p).strip().upper() for p in value]
    parts = [p for p in parts if p]
    if not parts or any(p not in CHANNELS for p in parts) or len(set(parts)) != len(parts):
        raise ValueError(f"{value!r} is not a non-empty subset of A, T, S (e.g. 'A+T+S')")
    return "+".join(c for c in CHANNELS if c in parts)
