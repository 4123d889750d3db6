"""Monitors: full-trajectory and per-step, over any subset of Actions/Thoughts/Screenshots.

    config.py   MonitorConfig (monitors/*.yaml), subsets, config hash
    views.py    the one renderer of A/T/S for a step or a run
    parse.py    strict <reasoning>/<score> parsing
    judges.py   one view -> one score through the judging engine (judging/: any inspect model,
                its reply cache, parsing, fail-closed errors)
    offline.py  the offline judges as inspect models (`offline/rules`, `/learned`, `/length`, `/random`)
    classify.py the `classify` kind: refused / leaked in an attack run's visible text (`control-osworld classify`)
    runtime.py  score_runs: views -> judges -> scores store, concurrently, resumably
    store.py    the Parquet scores store (parts + compaction)
    rules.py    offline rules monitor;  ocr.py  tesseract OCR
    learned.py  offline learned monitor (cross-fitted by side task and main task)
    live.py     per_step_control_monitor for control-arena micro-protocols
    runner.py   monitor_logs: .eval logs -> score_runs (the main job)
    cli.py      `control-osworld monitor`
    fake_api.py   old import path of the loopback fake APIs (control_osworld.testing.fake_api)
    cache.py      old import path of the reply cache (control_osworld.judging.cache)
See docs/monitoring.md.
"""

from __future__ import annotations

from pathlib import Path

from control_osworld.resources import data_dir

from .config import (
    ALL_SUBSETS,
    ConfigError,
    MonitorConfig,
    canonical_subset,
    load_config,
    parse_subsets,
)

__all__ = [
    "ALL_SUBSETS",
    "BASELINE_CONFIGS",
    "OFFLINE_CONFIGS",
    "ConfigError",
    "MonitorConfig",
    "canonical_subset",
    "load_config",
    "baseline_configs",
    "offline_configs",
    "parse_subsets",
    "per_step_control_monitor",
    "score_runs",
]

MONITORS_DIR = data_dir("monitors")
OFFLINE_CONFIGS = ("full_trajectory_rules", "per_step_rules", "full_trajectory_learned", "per_step_learned")
BASELINE_CONFIGS = ("full_trajectory_length", "per_step_length", "full_trajectory_random", "per_step_random")
"""Baseline rows for the tables: run length and seeded noise, full-trajectory and per-step."""


def offline_configs(monitors_dir: Path | str = MONITORS_DIR) -> list[MonitorConfig]:
    """The four offline monitors (rules and learned, full-trajectory and per-step): the main job's set."""
    return [load_config(Path(monitors_dir) / f"{name}.yaml") for name in OFFLINE_CONFIGS]


def baseline_configs(monitors_dir: Path | str = MONITORS_DIR) -> list[MonitorConfig]:
    """The baseline monitors (length and random, full-trajectory and per-step), in the main job too."""
    return [load_config(Path(monitors_dir) / f"{name}.yaml") for name in BASELINE_CONFIGS]


def __getattr__(name: str):
    # Lazy: importing the package should not pull in inspect, control-arena or pandas.
    if name == "score_runs":
        from .runtime import score_runs

        return score_runs
    if name == "per_step_control_monitor":
        from .live import per_step_control_monitor

        return per_step_control_monitor
    raise AttributeError(name)
