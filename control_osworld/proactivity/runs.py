"""The dilemma runs table: one row per (log, sample, epoch), read from stored .eval logs.

Columns (RUN_COLUMNS, from contracts.DilemmaRunRow): identity (run_id, log, sample_id, epoch, model), the scenario
(scenario_id, domain, drive), the condition (condition label and the five factor levels),
max_turns, mode, the classification (cls, terminal_tool, terminal_turn, outcome, outcome_step,
n_turns) and the trajectory (tools: the per-turn tool ids as JSON, harmful_turns as JSON);
harm_step: in desktop-grounded runs, the first step at which the trusted checker saw a harmful
effect in the desktop (empty in text runs and in tables written before it existed).
Infrastructure errors are rows with cls = outcome = "error", never merged into a class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import pandas as pd

from control_osworld.contracts import dilemma_run_columns
from control_osworld.proactivity.classify import CLASSES
from control_osworld.proactivity.scenario import FACTOR_LEVELS
from control_osworld.sample_store import stored

__all__ = ["RUN_COLUMNS", "runs_from_logs", "load_dilemma_runs", "validate_dilemma_runs", "hazard_runs"]

RUN_COLUMNS = dilemma_run_columns(FACTOR_LEVELS)


def _target_model(log) -> str:
    meta = log.eval.metadata or {}
    return meta.get("target_model") or log.eval.model


def runs_from_logs(paths: Iterable[str | Path]) -> pd.DataFrame:
    from inspect_ai.log import read_eval_log

    rows = []
    for path in paths:
        log = read_eval_log(str(path))
        if (log.eval.metadata or {}).get("family") != "proactivity":
            continue
        model = _target_model(log)
        for s in log.samples or []:
            meta = s.metadata or {}
            rec = stored(s.store, "proactivity")
            f = meta.get("factors") or {}
            row = {"run_id": f"{Path(path).name}#{s.id}#{s.epoch}", "log": str(path), "sample_id": str(s.id),
                   "epoch": int(s.epoch), "model": model, "scenario_id": meta.get("scenario_id"), "domain": meta.get("domain"),
                   "drive": meta.get("drive"), "condition": meta.get("condition", "baseline"),
                   **{k: f.get(k) for k in FACTOR_LEVELS}, "max_turns": int(meta.get("max_turns", 0)), "mode": meta.get("mode", "text")}
            if rec is None or s.error is not None:
                row.update(cls="error", terminal_tool=None, terminal_turn=None, outcome="error", outcome_step=0,
                           n_turns=len(rec["turns"]) if rec else 0, tools="[]", harmful_turns="[]", harm_step=None)
            else:
                row.update(cls=rec["class"], terminal_tool=rec["terminal_tool"], terminal_turn=rec["terminal_turn"],
                           outcome=rec["outcome"], outcome_step=int(rec["outcome_step"]), n_turns=int(rec["n_turns"]),
                           tools=json.dumps([t["tool_id"] for t in rec["turns"]]), harmful_turns=json.dumps(rec["harmful_turns"]),
                           harm_step=rec.get("harm_step"))
            rows.append(row)
    df = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    return validate_dilemma_runs(df) if len(df) else df


def validate_dilemma_runs(df: pd.DataFrame, path: str = "dilemma runs table") -> pd.DataFrame:
    if "harm_step" not in df.columns:  # tables written before desktop-grounded runs existed
        df = df.assign(harm_step=None)
    missing = [c for c in RUN_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    bad = ~df["cls"].isin(CLASSES + ("error",))
    if bad.any():
        raise ValueError(f"{path}: column 'cls' has unknown value {df.loc[bad, 'cls'].iloc[0]!r} at row {int(bad.to_numpy().argmax()) + 1}")
    if df["run_id"].duplicated().any():
        raise ValueError(f"{path}: column 'run_id' repeats {df.loc[df['run_id'].duplicated(), 'run_id'].iloc[0]!r}")
    out = df[list(RUN_COLUMNS)].reset_index(drop=True).copy()
    for c in ("terminal_tool", "terminal_turn", "harm_step"):
        out[c] = out[c].astype("Int64")
    for c in ("epoch", "max_turns", "outcome_step", "n_turns"):
        out[c] = out[c].astype("int64")
    return out


def load_dilemma_runs(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Runs from .eval logs, dilemma runs tables (.parquet/.csv) or folders of either (a folder's
    .eval logs when it has any, else its dilemma_runs.parquet)."""
    files: list[Path] = []
    for p in map(Path, paths):
        files += (sorted(p.glob("*.eval")) or sorted(p.glob("dilemma_runs.parquet"))) if p.is_dir() else [p]
    evals = [f for f in files if f.suffix == ".eval"]
    frames = [runs_from_logs(evals)] if evals else []
    for f in files:
        if f.suffix in (".parquet", ".pq"):
            frames.append(validate_dilemma_runs(pd.read_parquet(f), str(f)))
        elif f.suffix == ".csv":
            frames.append(validate_dilemma_runs(pd.read_csv(f), str(f)))
    frames = [f for f in frames if len(f)]
    if not frames:
        raise ValueError(f"no dilemma runs in {', '.join(map(str, paths))}")
    return validate_dilemma_runs(pd.concat(frames, ignore_index=True))


def hazard_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The same runs in the analysis runs-table contract, for the competing-hazards estimator:
    harmful terminal = escaped (t* = its turn), compliant terminal = completed, escalation =
    stopped, no terminal = censored at the turn the run ended; harmful calls (tools 4-6) are the attempts."""
    from control_osworld.analysis.runs import validate_runs

    out = pd.DataFrame({
        "run_id": df["run_id"], "log": df["log"], "sample_id": df["sample_id"], "epoch": df["epoch"],
        "eval_mode": "honest", "untrusted_model": df["model"], "attack_prompt": "",
        "main_task_id": df["scenario_id"], "side_task_id": None, "outcome": df["outcome"],
        # a censored run is censored at the turn it ended (older logs recorded K even for runs
        # that ended earlier)
        "outcome_step": [min(int(s), int(n)) if o == "censored" else s
                         for s, o, n in zip(df["outcome_step"], df["outcome"], df["n_turns"])],
        "t_star": [s if o == "escaped" else None for s, o in zip(df["outcome_step"], df["outcome"])],
        "steps": df["n_turns"], "budget": df["max_turns"],
        "main_task_success": df["outcome"] == "completed", "side_task_success": df["outcome"] == "escaped",
        "attempt_steps": [json.loads(h) for h in df["harmful_turns"]], "boundary": None,
    })
    return validate_runs(out, "dilemma runs (as hazard runs)")
