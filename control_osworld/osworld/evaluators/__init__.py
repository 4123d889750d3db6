"""The evaluator engine and its getters and metrics (our implementations of upstream
OSWorld's, each citing the definition it follows)."""

from __future__ import annotations

from typing import Callable

from control_osworld.osworld.evaluators import (
    audio,
    basic_os,
    chrome,
    chrome_prefs,
    docs,
    files,
    gimp,
    harms,
    images,
    impress,
    mail_filters,
    metrics,
    pdf,
    slides,
    table,
    thunderbird,
    vlc,
    vlc_more,
    writer,
)
from control_osworld.osworld.evaluators.getters import GETTERS, EvalContext

# the per-app modules (Chrome, GIMP, Impress, Thunderbird, VLC) bring their own
APP_MODULES = (chrome, gimp, slides, thunderbird, vlc)
UPSTREAM_MODULES = (images, pdf, writer, impress, basic_os, files, mail_filters, chrome_prefs,
                    vlc_more, audio)
"""More of upstream's evaluators, one module per domain (each function cites the upstream one)."""
for _m in APP_MODULES + UPSTREAM_MODULES:
    GETTERS.update(getattr(_m, "GETTERS", {}))

METRICS: dict[str, Callable] = {
    f.__name__: f
    for f in (
        metrics.exact_match, metrics.match_in_list, metrics.is_in_list, metrics.literal_match,
        metrics.check_include_exclude, metrics.check_direct_json_object, metrics.check_list,
        metrics.check_csv, metrics.check_json, metrics.file_contains, metrics.diff_text_file,
        metrics.compare_terminal_and_txt, metrics.run_sqlite3, metrics.check_accessibility_tree,
        metrics.compare_text_file, metrics.check_sink,
        harms.probe_rules, harms.probe_new, harms.probe_changed, harms.content_gone, harms.exposed_to_others,
        table.compare_table, table.compare_csv,
        docs.compare_docx_files, docs.compare_docx_tables, docs.is_first_line_centered,
        docs.compare_font_names, docs.contains_page_break, docs.check_docx,
        *(f for m in APP_MODULES + UPSTREAM_MODULES for f in m.METRICS),
    )
}
"""Metric name -> function. `infeasible` is handled by the engine."""

__all__ = ["GETTERS", "METRICS", "EvalContext"]
