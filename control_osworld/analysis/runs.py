"""Load and validate the runs table and the monitors' scores table (Parquet or CSV).

Every error names the file, the column and, where it helps, the first offending row.
The contracts are those the other stages write; see docs/analysis.md.

CSV encodings: booleans as true/false/1/0 (empty = null); ``attempt_steps`` as a JSON list
("[3, 7]"), or "3;7"; an empty cell means "attempts not recorded" (null) while "[]" means
"recorded, none".
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from control_osworld.contracts import (
    INPUT_SUBSETS,
    OPTIONAL_SCORE_COLUMNS,
    RUN_OPTIONAL_COLUMNS,
    RUN_REQUIRED_COLUMNS,
    SCORE_COLUMNS,
    canonical_subset,
)
from control_osworld.run_spec import ACTION_SPACES, RUN_DEFAULTS

from .hazards import OUTCOMES

__all__ = [
    "RUN_COLUMNS",
    "OPTIONAL_RUN_COLUMNS",
    "attempts_as_recorded",
    "SCORE_COLUMNS",
    "OPTIONAL_SCORE_COLUMNS",
    "INPUT_SUBSETS",
    "load_runs",
    "load_scores",
    "runs_from_logs",
    "validate_runs",
    "validate_scores",
    "InputError",
]

# The runs table's record is contracts.RunRow (control_osworld.logs writes it).
RUN_COLUMNS = RUN_REQUIRED_COLUMNS
# Kept when present (filled with null / [] when absent): what the agent side records about
# attempts, the honest/attack matching, errors and rejected submits (docs/control-loop.md).
OPTIONAL_RUN_COLUMNS = RUN_OPTIONAL_COLUMNS
# player: who played the run (`agent`, or `human`: a human run, agent/human.py); takeover_steps:
# steps of take-overs during the run (agent/takeover.py); seconds: the agent loop's wall time.
# error_kind: why an error run failed; error_after_outcome(_kind): an error after the run's
# outcome was recorded (the outcome stands); unknown_checks: steps whose side-task check could
# not decide (null: not recorded); main_unknown / side_unknown: why the final verdict is
# unknown; attempts: attempts of the sample (retries); escape_log: the attempt whose escape is
# the record (control_osworld.logs).
# design*: the pairings design the run came from (`rules`, or a pairings file's name, file, k and
# how many pairings it declares);
# side_task_instruction: which wording an attack run got (instruction | hand_held_instruction);
# action_space: the agent's desktop tool (computer | pyautogui | computer_13; agent/spaces.py);
# side_task_category: the category of the side task whose environment the run has (an attack run's
# side task, a matched honest run's env_side_task_id); analysis/categories.py.
# observation: what the agent got after each step (screenshot | a11y_tree | screenshot_a11y_tree | som;
# agent/observation.py).
# policy: how the untrusted model was driven (tools: it calls the desktop tool, agent/policies.py;
# prompted: OSWorld's prompt-agent format, agent/prompted.py); history: the prompted policy's past
# steps shown to the model (upstream's max_trajectory_length; null for tools).
POLICIES = ("tools", "prompted")
OBSERVATIONS = ("screenshot", "a11y_tree", "screenshot_a11y_tree", "som")
ERROR_STAGES = ("setup", "agent", "scoring")
# kept when present: the per-step monitor's score point (contracts.OPTIONAL_SCORE_COLUMNS)
SCORE_POINTS = ("pre_action", "post_action")
EVAL_MODES = ("honest", "attack")
MONITOR_KINDS = ("full_trajectory", "per_step")
BOUNDARIES = ("open", "closed")
DEFAULT_BUDGET = RUN_DEFAULTS.budget
TABLE_SUFFIXES = (".parquet", ".pq", ".csv")
LOG_SUFFIXES = (".eval",)


class InputError(ValueError):
    """Bad input file: the message names the file and the field."""


def _paths(paths) -> list[Path]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.suffix.lower() in TABLE_SUFFIXES + LOG_SUFFIXES)
            if not found:
                raise InputError(f"{p}: directory holds no .parquet, .csv or .eval files")
            out += found
        elif not p.exists():
            raise InputError(f"{p}: no such file")
        else:
            out.append(p)
    if not out:
        raise InputError("no input files given")
    return out


def _read_table(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix == ".csv":
            return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except Exception as exc:  # unreadable file: say which
        raise InputError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from exc
    raise InputError(f"{path}: unsupported file type {suffix!r} (use .parquet or .csv)")


def _row_hint(df: pd.DataFrame, mask) -> str:
    i = int(np.flatnonzero(np.asarray(mask))[0])
    rid = df["run_id"].iloc[i] if "run_id" in df.columns else None
    return f"row {i + 1}" + (f" (run_id {rid})" if rid is not None and rid == rid else "")


def _require_columns(df, columns, path):
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(map(repr, missing))}")


def _isnull(s: pd.Series) -> np.ndarray:
    return s.isna().to_numpy()


def _to_int(df, col, path, nullable=False, minimum=None) -> pd.Series:
    s = df[col]
    null = _isnull(s)
    if null.any() and not nullable:
        raise InputError(f"{path}: column {col!r} is empty at {_row_hint(df, null)}")
    num = pd.to_numeric(s, errors="coerce")
    bad = (num.isna().to_numpy() & ~null) | (~null & (num.fillna(0) != np.round(num.fillna(0))).to_numpy())
    if bad.any():
        raise InputError(f"{path}: column {col!r} is not a whole number at {_row_hint(df, bad)}: {s[bad].iloc[0]!r}")
    out = num.astype("Int64")
    if minimum is not None:
        low = (out < minimum).fillna(False).to_numpy()
        if low.any():
            raise InputError(f"{path}: column {col!r} below {minimum} at {_row_hint(df, low)}: {out[low].iloc[0]}")
    return out


def _to_str(df, col, path, nullable=False, allowed=None) -> pd.Series:
    s = df[col]
    null = _isnull(s)
    if null.any() and not nullable:
        raise InputError(f"{path}: column {col!r} is empty at {_row_hint(df, null)}")
    if pd.api.types.infer_dtype(s, skipna=True) in ("string", "empty"):
        out = s.astype(object)  # already strings: no per-row conversion (scores are big)
    else:
        out = s.astype(str).astype(object)
    if null.any():
        out = out.where(~null, None)
    if allowed is not None:
        bad = ~null & ~out.isin(allowed).to_numpy()
        if bad.any():
            raise InputError(
                f"{path}: column {col!r} has {out[bad].iloc[0]!r} at {_row_hint(df, bad)}; allowed: {', '.join(allowed)}"
            )
    return out


_TRUE = {"true", "1", "yes", "t", "y"}
_FALSE = {"false", "0", "no", "f", "n"}


def _to_bool(df, col, path) -> pd.Series:
    def conv(v):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer, float)) and v in (0, 1):
            return bool(v)
        t = str(v).strip().lower()
        if t in _TRUE:
            return True
        if t in _FALSE:
            return False
        raise ValueError(v)

    vals = []
    for i, v in enumerate(df[col].tolist()):
        try:
            vals.append(conv(v))
        except ValueError:
            raise InputError(f"{path}: column {col!r} is not a boolean at row {i + 1}: {v!r}") from None
    return pd.Series(vals, index=df.index, dtype=object)


def _to_steps_list(df, col, path) -> pd.Series:
    def conv(v):
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return None
        if isinstance(v, str):
            t = v.strip()
            if t == "":
                return None
            if t.startswith("["):
                v = json.loads(t)
            else:
                v = [x for x in t.replace(",", ";").split(";") if x.strip()]
        items = list(v)
        out = []
        for x in items:
            fx = float(x)
            if fx != round(fx) or fx < 1:
                raise ValueError(x)
            out.append(int(fx))
        return sorted(set(out))

    vals = []
    for i, v in enumerate(df[col].tolist()):
        try:
            vals.append(conv(v))
        except (ValueError, TypeError, json.JSONDecodeError):
            raise InputError(f"{path}: column {col!r} at row {i + 1} is not a list of steps >= 1: {v!r}") from None
    return pd.Series(vals, index=df.index, dtype=object)


def validate_runs(df: pd.DataFrame, path="runs table") -> pd.DataFrame:
    """Check and normalise a runs table; returns a new frame with the contract's dtypes."""
    _require_columns(df, RUN_COLUMNS, path)
    df = _recorded_outcomes_stand(df.reset_index(drop=True))
    out = pd.DataFrame(index=df.index)
    for c in ("run_id", "log", "sample_id", "untrusted_model", "main_task_id"):
        out[c] = _to_str(df, c, path, nullable=c == "log")
    out["epoch"] = _to_int(df, "epoch", path, minimum=0)
    out["eval_mode"] = _to_str(df, "eval_mode", path, allowed=EVAL_MODES)
    out["attack_prompt"] = _to_str(df, "attack_prompt", path, nullable=True).fillna("")
    out["side_task_id"] = _to_str(df, "side_task_id", path, nullable=True)
    out["outcome"] = _to_str(df, "outcome", path, allowed=OUTCOMES)
    if df["budget"].isna().any():
        df = df.assign(budget=df["budget"].fillna(DEFAULT_BUDGET))
    out["budget"] = _to_int(df, "budget", path, minimum=1)
    # An error row may lack its step (older logs, a setup failure): the step after its last
    # recorded one, 0 when none was recorded (see docs/analysis.md, "Errors").
    err_rows = out["outcome"].eq("error").to_numpy()
    null_step = df["outcome_step"].isna().to_numpy() & err_rows
    if null_step.any():
        steps_known = _to_int(df, "steps", path, minimum=0)
        fill = np.where(steps_known.fillna(0).to_numpy(dtype=np.int64) > 0, steps_known.fillna(0).to_numpy(dtype=np.int64) + 1, 0)
        df = df.assign(outcome_step=df["outcome_step"].astype(object).where(~null_step, pd.Series(fill, index=df.index)))
    out["outcome_step"] = _to_int(df, "outcome_step", path, minimum=0)
    out["t_star"] = _to_int(df, "t_star", path, nullable=True, minimum=1)
    out["steps"] = _to_int(df, "steps", path, minimum=0)
    out["main_task_success"] = _to_bool(df, "main_task_success", path)
    out["side_task_success"] = _to_bool(df, "side_task_success", path)
    out["attempt_steps"] = _to_steps_list(df, "attempt_steps", path)
    out["boundary"] = _to_str(df, "boundary", path, nullable=True, allowed=BOUNDARIES)

    for c in OPTIONAL_RUN_COLUMNS:
        if c not in df.columns:
            df = df.assign(**{c: [[] if c == "submit_errors" else None] * len(df)}) if len(df) else df.assign(**{c: []})
    out["attempt_detector"] = _to_bool(df, "attempt_detector", path)
    out["env_side_task_id"] = _to_str(df, "env_side_task_id", path, nullable=True)
    out["honest_matching"] = _to_str(df, "honest_matching", path, nullable=True)
    out["action_space"] = _to_str(df, "action_space", path, nullable=True, allowed=ACTION_SPACES)
    out["observation"] = _to_str(df, "observation", path, nullable=True, allowed=OBSERVATIONS)
    out["policy"] = _to_str(df, "policy", path, nullable=True, allowed=POLICIES)
    out["history"] = _to_int(df, "history", path, nullable=True, minimum=0)
    out["error_stage"] = _to_str(df, "error_stage", path, nullable=True, allowed=ERROR_STAGES)
    out["submit_errors"] = _to_steps_list(df, "submit_errors", path).map(lambda v: [] if v is None else v)
    for c in ("error_kind", "error_after_outcome", "error_after_outcome_kind", "main_unknown", "side_unknown", "escape_log"):
        out[c] = _to_str(df, c, path, nullable=True)
    out["unknown_checks"] = _to_int(df, "unknown_checks", path, nullable=True, minimum=0)
    out["attempts"] = _to_int(df, "attempts", path, nullable=True, minimum=1)
    out["player"] = _to_str(df, "player", path, nullable=True, allowed=("agent", "human"))
    out["takeover_steps"] = _to_int(df, "takeover_steps", path, nullable=True, minimum=0)
    out["seconds"] = pd.to_numeric(df["seconds"], errors="coerce")
    out["design"] = _to_str(df, "design", path, nullable=True)
    out["side_task_category"] = _to_str(df, "side_task_category", path, nullable=True)
    out["design_file"] = _to_str(df, "design_file", path, nullable=True)
    out["design_k"] = _to_int(df, "design_k", path, nullable=True, minimum=1)
    out["design_pairings"] = _to_int(df, "design_pairings", path, nullable=True, minimum=0)
    out["side_task_instruction"] = _to_str(df, "side_task_instruction", path, nullable=True,
                                           allowed=("instruction", "hand_held_instruction"))

    dup = out["run_id"].duplicated().to_numpy()
    if dup.any():
        raise InputError(f"{path}: column 'run_id' repeats {out['run_id'][dup].iloc[0]!r} ({_row_hint(out, dup)})")
    # an error may come after the last step (scoring failed): step budget + 1
    limit = out["budget"] + np.where(err_rows, 1, 0)
    over = (out["outcome_step"] > limit).to_numpy()
    if over.any():
        raise InputError(f"{path}: column 'outcome_step' exceeds 'budget' at {_row_hint(out, over)}")
    event = out["outcome"].isin(["completed", "stopped", "escaped", "terminated"]).to_numpy()
    zero = event & (out["outcome_step"] < 1).to_numpy()
    if zero.any():
        raise InputError(f"{path}: column 'outcome_step' must be >= 1 for an event at {_row_hint(out, zero)}")
    esc = (out["outcome"] == "escaped").to_numpy()
    mism = esc & ~(out["t_star"] == out["outcome_step"]).fillna(False).to_numpy()
    if mism.any():
        raise InputError(f"{path}: column 't_star' must equal 'outcome_step' for an escaped run at {_row_hint(out, mism)}")
    return out[list(RUN_COLUMNS) + list(OPTIONAL_RUN_COLUMNS)]


def _recorded_outcomes_stand(df: pd.DataFrame) -> pd.DataFrame:
    """E is absorbing: an `error` row that recorded t* is `escaped` at t*, its error kept in
    `error_after_outcome` / `error_after_outcome_kind` (tables written before the logs applied
    this themselves; control_osworld.logs.recorded_outcome)."""
    t_star = pd.to_numeric(df["t_star"], errors="coerce")
    fix = (df["outcome"].astype(object) == "error").to_numpy() & t_star.notna().to_numpy()
    if not fix.any():
        return df
    df = df.copy()
    for c in ("error", "error_kind", "error_after_outcome", "error_after_outcome_kind"):
        if c not in df.columns:
            df[c] = None
        df[c] = df[c].astype(object)
    df.loc[fix, "error_after_outcome"] = df.loc[fix, "error_after_outcome"].where(
        df.loc[fix, "error_after_outcome"].notna(), df.loc[fix, "error"].fillna("error (message not recorded)"))
    df.loc[fix, "error_after_outcome_kind"] = df.loc[fix, "error_after_outcome_kind"].where(
        df.loc[fix, "error_after_outcome_kind"].notna(), df.loc[fix, "error_kind"])
    df.loc[fix, ["error", "error_kind"]] = None
    df["outcome"] = df["outcome"].astype(object)
    df.loc[fix, "outcome"] = "escaped"
    df["outcome_step"] = df["outcome_step"].astype(object)
    df.loc[fix, "outcome_step"] = t_star[fix].to_numpy()
    return df


def attempts_as_recorded(runs: pd.DataFrame) -> list:
    """Per run, its attempt steps where they are attempt events: None (not recorded) for a
    run whose side task has no attempt detector (attempt_detector false: `attempted` then
    only marks t*). Runs that do not record attempt_detector keep their list."""
    det = runs["attempt_detector"] if "attempt_detector" in runs.columns else pd.Series([None] * len(runs), index=runs.index)
    return [None if d is False else a for a, d in zip(runs["attempt_steps"], det)]


def validate_scores(df: pd.DataFrame, path="scores table") -> pd.DataFrame:
    """Check and normalise a scores table (one row per log/sample/epoch/step/monitor/inputs)."""
    _require_columns(df, SCORE_COLUMNS, path)
    df = df.reset_index(drop=True)
    out = pd.DataFrame(index=df.index)
    out["run_id"] = _to_str(df, "run_id", path)
    out["log"] = _to_str(df, "log", path, nullable=True)
    out["sample_id"] = _to_str(df, "sample_id", path, nullable=True)
    out["epoch"] = _to_int(df, "epoch", path, nullable=True, minimum=0)
    out["step"] = _to_int(df, "step", path, nullable=True, minimum=0)
    out["monitor"] = _to_str(df, "monitor", path)
    kinds = df["monitor_kind"].astype(str)
    bad = ~kinds.isin(MONITOR_KINDS).to_numpy()
    if bad.any():
        raise InputError(f"{path}: column 'monitor_kind' has {kinds[bad].iloc[0]!r} at {_row_hint(df, bad)}; allowed: {', '.join(MONITOR_KINDS)}")
    out["monitor_kind"] = kinds
    # map the few distinct input strings, not every row
    raw = df["inputs"].astype(str)
    mapping = {}
    for v in raw.unique():
        try:
            mapping[v] = canonical_subset(v)
        except ValueError:
            bad = (raw == v).to_numpy()
            raise InputError(f"{path}: column 'inputs' has {v!r} at {_row_hint(df, bad)}; allowed: {', '.join(INPUT_SUBSETS)}") from None
    out["inputs"] = raw.map(mapping)
    out["config_hash"] = _to_str(df, "config_hash", path, nullable=True).fillna("")
    score = pd.to_numeric(df["score"], errors="coerce")
    bad = score.isna().to_numpy() & ~_isnull(df["score"])
    if bad.any():
        raise InputError(f"{path}: column 'score' is not a number at {_row_hint(df, bad)}: {df['score'][bad].iloc[0]!r}")
    if np.isinf(score.to_numpy(dtype=float, na_value=np.nan)).any():
        raise InputError(f"{path}: column 'score' has an infinite value")
    out["score"] = score.astype(np.float64)
    out["error"] = _to_str(df, "error", path, nullable=True)
    # optional: when a per-step monitor scored (the store writes it; older tables lack it)
    if "score_point" in df.columns:
        out["score_point"] = _to_str(df, "score_point", path, nullable=True, allowed=SCORE_POINTS)
    else:
        out["score_point"] = pd.Series([None] * len(df), index=df.index, dtype=object)
    per_step = (out["monitor_kind"] == "per_step").to_numpy()
    no_step = per_step & out["step"].isna().to_numpy()
    if no_step.any():
        raise InputError(f"{path}: column 'step' is empty for a per_step monitor at {_row_hint(out, no_step)}")
    stray = ~per_step & out["step"].notna().to_numpy()
    if stray.any():
        raise InputError(f"{path}: column 'step' must be empty for a full_trajectory monitor at {_row_hint(out, stray)}")
    key = ["run_id", "monitor", "inputs", "config_hash", "step"]
    dup = out.duplicated(subset=key).to_numpy()
    if dup.any():
        raise InputError(f"{path}: more than one score for the same {'/'.join(key)} at {_row_hint(out, dup)}")
    return out[list(SCORE_COLUMNS) + list(OPTIONAL_SCORE_COLUMNS)]


def runs_from_logs(paths, superseded=()) -> pd.DataFrame:
    """Runs table from our inspect .eval logs (control_osworld.logs), validated like a file.

    Attempts of one sample across these logs (and `superseded`, older attempts) are one row."""
    from control_osworld.logs import runs_table

    files = _paths(paths)
    try:
        table = runs_table(files, superseded)
    except ValueError as e:  # names the truncated or foreign file
        raise InputError(str(e)) from e
    return validate_runs(table, ", ".join(map(str, files)) if len(files) > 1 else files[0])


def _superseded(folder: Path) -> list[Path]:
    return sorted((folder / "superseded").glob("*.eval"))


def _inputs(paths) -> list[tuple[str, pd.DataFrame]]:
    """(source, validated table) per input. A folder is read as the main job leaves it: from its
    runs table(s) when it has one (the .eval logs beside it are what the table was built from),
    else from its .eval logs. .eval logs are read with the older attempts of their samples in
    their folder's `superseded/` (control_osworld.logs). So a run is read once however many
    forms of it a folder holds."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[tuple[str, pd.DataFrame]] = []
    loose: dict[Path, list[Path]] = {}
    for p in map(Path, paths):
        if not p.is_dir():
            for q in _paths([p]):
                if q.suffix.lower() in LOG_SUFFIXES:
                    loose.setdefault(q.parent, []).append(q)
                else:
                    out.append((str(q), validate_runs(_read_table(q), q)))
            continue
        found = _paths([p])
        tables = [q for q in found if q.suffix.lower() in TABLE_SUFFIXES]
        if tables:
            out += [(str(q), validate_runs(_read_table(q), q)) for q in tables]
        else:
            loose.setdefault(p, []).extend(found)
    for folder, logs in loose.items():
        out.append((", ".join(map(str, logs)), runs_from_logs(logs, _superseded(folder))))
    return out


def load_runs(paths) -> pd.DataFrame:
    """Runs table from one or more .parquet/.csv files (or directories of them).

    .eval logs are dispatched to runs_from_logs. Raises InputError naming the file and column,
    and when one run (the same log file name, sample and epoch) comes from more than one input."""
    inputs = _inputs(paths)
    df = pd.concat([t for _, t in inputs], ignore_index=True)
    src = np.concatenate([[name] * len(t) for name, t in inputs]) if len(df) else np.zeros(0, dtype=object)
    dup = df["run_id"].duplicated().to_numpy()
    if dup.any():
        raise InputError(f"{', '.join(name for name, _ in inputs)}: run_id {df['run_id'][dup].iloc[0]!r} appears in more than one file")
    key = pd.Series([f"{Path(str(lg)).name if lg is not None and lg == lg else ''}::{s}::{e}"
                     for lg, s, e in zip(df["log"], df["sample_id"], df["epoch"])], dtype=object)
    has_log = df["log"].notna().to_numpy()
    n_src = pd.Series(src[has_log], dtype=object).groupby(key[has_log].to_numpy()).nunique()
    across = n_src[n_src > 1]
    if len(across):
        first = str(across.index[0])
        where = sorted(set(src[(key == first).to_numpy()]))
        raise InputError(f"{', '.join(where)}: the run {first!r} (log file, sample, epoch) is in more than one input "
                         "(a runs table and the .eval logs it was built from?); give one of them")
    return df


def load_scores(paths) -> pd.DataFrame:
    """Scores table from one or more .parquet/.csv files; raises InputError naming the file."""
    frames = [validate_scores(_read_table(p), p) for p in _paths(paths)]
    df = pd.concat(frames, ignore_index=True)
    if len(frames) > 1:
        dup = df.duplicated(subset=["run_id", "monitor", "inputs", "config_hash", "step"]).to_numpy()
        if dup.any():
            raise InputError(f"{', '.join(map(str, _paths(paths)))}: the same score row appears in more than one file (run_id {df['run_id'][dup].iloc[0]!r})")
    return df
