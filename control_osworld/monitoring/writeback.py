"""Monitor scores written back into the .eval logs as inspect scores.

One scorer per monitor and input subset, named ``scorer_name(monitor, inputs)`` (e.g.
``per_step_rules_A+T`` -> ``per_step_rules_AT``), so ``inspect view`` shows it and
control-arena's ``samples_df`` reads it as the column ``score_<name>``. The score's value is
the run's score: a full-trajectory monitor's one score, a per-step monitor's max over its
scored steps (the report's default aggregate). Its metadata keeps the per-step scores
(``[{"step", "score"}]``), the monitor kind, score point and config hash.

Idempotent and resumable: a log whose scores already equal the store's is not rewritten;
each log is rewritten whole into a temporary file and renamed over the old one, so an
interrupted write-back leaves every log either as it was or fully updated. Edits go through
inspect's public ``edit_score``, which records each change in the score's history.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterable

import pandas as pd
from inspect_ai.log import edit_score, read_eval_log, write_eval_log
from inspect_ai.scorer import ScoreEdit

__all__ = ["scorer_name", "run_level_scores", "write_scores_into_logs"]


def scorer_name(monitor: str, inputs: str) -> str:
    """The inspect scorer name of a monitor's scores for one input subset."""
    return f"{monitor}_{inputs.replace('+', '')}"


def run_level_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per (log, sample, epoch, monitor, inputs): value, per-step list, metadata.

    scores: rows of the scores store (``ScoreStore.read()``); rows with an error or no
    score are left out (a run none of whose steps was scored gets no score).
    """
    df = scores[scores["score"].notna()].copy()
    if df.empty:
        return pd.DataFrame(columns=["log", "sample_id", "epoch", "monitor", "inputs", "name", "value", "metadata"])
    if "score_point" not in df.columns:
        df["score_point"] = None
    out = []
    keys = ["log", "sample_id", "epoch", "monitor", "inputs"]
    for key, g in df.groupby(keys, sort=True, dropna=False):
        log, sample_id, epoch, monitor, inputs = key
        kind = str(g["monitor_kind"].iloc[0])
        meta = {"monitor": monitor, "inputs": inputs, "monitor_kind": kind,
                "config_hash": str(g["config_hash"].iloc[0]), "source": "control-osworld monitor"}
        if kind == "per_step":
            g = g.sort_values("step")
            meta["aggregate"] = "max"
            point = g["score_point"].iloc[0]
            meta["score_point"] = point if isinstance(point, str) else None
            meta["per_step"] = [{"step": int(s), "score": float(v)} for s, v in zip(g["step"], g["score"])]
        out.append({"log": log, "sample_id": str(sample_id), "epoch": int(epoch), "monitor": monitor, "inputs": inputs,
                    "name": scorer_name(str(monitor), str(inputs)), "value": float(g["score"].max()), "metadata": meta})
    return pd.DataFrame(out)


def _same(score, value: float, metadata: dict) -> bool:
    if score is None:
        return False
    try:
        v = float(score.value)
    except (TypeError, ValueError):
        return False
    return math.isclose(v, value) and (score.metadata or {}) == metadata


def write_scores_into_logs(scores: pd.DataFrame, logs: Iterable[str | Path]) -> dict[str, int]:
    """Write the store's scores for these logs into them; returns {log: scores changed}.

    scores: rows of the scores store. A log none of whose samples has a score is untouched.
    """
    table = run_level_scores(scores)
    if not table.empty:
        table["_resolved"] = [str(Path(p).resolve()) for p in table["log"]]
    changed: dict[str, int] = {}
    for path in map(Path, logs):
        rows = table[table["_resolved"] == str(path.resolve())] if not table.empty else table
        if rows.empty:
            changed[str(path)] = 0
            continue
        log = read_eval_log(str(path))
        by_sample = {(str(s.id), s.epoch): s for s in log.samples or []}
        n = 0
        for r in rows.itertuples(index=False):
            sample = by_sample.get((r.sample_id, r.epoch))
            if sample is None:
                raise ValueError(f"{path}: the scores store names sample {r.sample_id!r} epoch {r.epoch}, "
                                 "which the log does not hold")
            if _same((sample.scores or {}).get(r.name), r.value, r.metadata):
                continue
            edit_score(log, sample.id, r.name, ScoreEdit(value=r.value, metadata=r.metadata,
                                                        explanation=f"{r.monitor} over {r.inputs}"),
                       recompute_metrics=False, epoch=sample.epoch)
            n += 1
        if n:
            tmp = path.with_name(f".writeback-{path.name}")  # keeps the .eval suffix inspect dispatches on
            write_eval_log(log, str(tmp))
            os.replace(tmp, path)
        changed[str(path)] = n
    return changed
