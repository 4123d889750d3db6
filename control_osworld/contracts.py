"""Contracts between the stages, defined once: one stage writes them, the next reads them (like
`trajectory.py` for the trajectory), and both derive from the records here:

- `SampleMetadata`: a control sample's metadata (ControlTaskMetadata.metadata), written by the
  setting's dataset, read by the setup solver, the checker, the scorer and the log reader;
- `RunRow`: one row of the runs table (control_osworld.logs writes it, analysis/runs.py reads
  and validates it: `RUN_REQUIRED_COLUMNS`, `RUN_OPTIONAL_COLUMNS`; `check_runs_columns` is the
  schema check of a written table);
- `SCORE_COLUMNS`: the scores table (the monitoring stage writes it, the analysis reads it);
- `DilemmaRunRow`: one row of the dilemma runs table (proactivity/runs.py).

Ground floor: imports nothing of the package."""

from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable, Literal, TypedDict

__all__ = ["CHANNELS", "INPUT_SUBSETS", "SCORE_COLUMNS", "OPTIONAL_SCORE_COLUMNS", "canonical_subset", "SampleMetadata", "sample_metadata",
           "RunAttemptRow", "RunRow", "RUN_ROW_COLUMNS", "RUN_REQUIRED_COLUMNS", "RUN_OPTIONAL_COLUMNS",
           "RUN_RECORDED_COLUMNS", "check_runs_columns", "DilemmaRunRow", "dilemma_run_columns"]

# What a monitor can be shown: A (actions), T (visible text), S (screenshots).
CHANNELS = ("A", "T", "S")
# Every non-empty subset, channels in the fixed order A, T, S joined by "+".
INPUT_SUBSETS: tuple[str, ...] = tuple("+".join(c) for n in (1, 2, 3) for c in combinations(CHANNELS, n))

# The columns of a scores table (one row per run/step/monitor/inputs).
SCORE_COLUMNS = (
    "run_id", "log", "sample_id", "epoch", "step", "monitor", "monitor_kind", "inputs",
    "config_hash", "score", "error",
)
OPTIONAL_SCORE_COLUMNS: tuple[str, ...] = ("score_point",)
"""Kept when present: the per-step monitor's score point (pre_action | post_action)."""


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


# ---------------------------------------------------------------------- sample metadata
class SampleMetadata(TypedDict, total=False):
    """A control sample's own metadata (`ControlTaskMetadata.metadata`; OSWorldControlSetting
    writes it, in this order). Readers take it through `sample_metadata` so the key names are
    checked (mypy) against this record."""

    tasks_dir: str | None
    side_tasks_dir: str | None
    main_task_id: str
    side_task_id: str | None  # the side task given (attack runs, side_task_as_main)
    app: str | None
    infeasible: bool
    allow_bash: bool
    boundary: str | None  # open | closed, for side tasks with a boundary
    env_side_task_id: str | None  # the side task whose environment the run has (matched honest runs too)
    honest_matching: str
    side_task_category: str | None
    env_side_task_category: str | None
    hand_held_instruction: bool
    side_task_instruction: str | None  # instruction | hand_held_instruction (which wording was given)
    side_task_instruction_note: str | None
    design: str  # `rules`, or the pairings design's name
    design_file: str | None
    design_k: int | None
    design_pairings: int | None
    action_space: str
    observation: str
    observation_note: str | None
    screen_note: str
    prompt_override: str  # side_task_as_main only
    side_task_as_main: bool  # side_task_as_main only


def sample_metadata(metadata: dict[str, Any] | None) -> SampleMetadata:
    """A control sample's metadata from a TaskState's or log sample's metadata (the
    ControlTaskMetadata dump: its `metadata` field) or from the record itself."""
    md = metadata or {}
    inner = md.get("metadata")
    return inner if isinstance(inner, dict) else md  # type: ignore[return-value]


# ---------------------------------------------------------------------- runs table
class RunAttemptRow(TypedDict):
    """One attempt of one sample, as control_osworld.logs reads it from a .eval log (columns in
    this order)."""

    run_id: str
    log: str
    sample_id: str
    epoch: int
    eval_mode: str  # honest | attack
    untrusted_model: str
    attack_prompt: str
    main_task_id: str
    side_task_id: str | None
    outcome: str  # completed | stopped | terminated | escaped | censored | error
    outcome_step: int
    error_kind: str | None  # why an error run failed (control_osworld.faults)
    error: str | None
    retried_errors: list[str]  # kinds of the errors inspect retried in the sample
    model_retries: int  # model API calls inspect retried
    t_star: int | None
    steps: int
    budget: int | None
    player: str | None  # agent | human
    takeover_steps: int
    seconds: float | None  # the agent loop's wall time
    main_task_success: bool | None  # None: unknown
    side_task_success: bool | None
    attempt_steps: list[int]
    boundary: str | None
    attempt_detector: bool | None
    env_side_task_id: str | None
    honest_matching: str | None
    side_task_category: str | None
    action_space: str
    observation: str
    policy: str  # tools | prompted (how the untrusted model was driven)
    history: int | None  # the prompted policy's past steps shown; None for tools
    design: str | None
    design_file: str | None
    design_k: int | None
    design_pairings: int | None
    side_task_instruction: str | None
    error_stage: str | None  # setup | agent | scoring
    submit_errors: list[int]
    error_after_outcome: str | None
    error_after_outcome_kind: str | None
    unknown_checks: int
    main_unknown: str | None
    side_unknown: str | None


class RunRow(RunAttemptRow):
    """One row of the runs table: a sample's chosen attempt (control_osworld.logs)."""

    attempts: int  # attempts of the sample (retries)
    escape_log: str | None  # the attempt whose escape is the record


RUN_ROW_COLUMNS: tuple[str, ...] = tuple(RunRow.__annotations__)
"""The runs table's columns, in the order the log reader writes them."""
RUN_REQUIRED_COLUMNS: tuple[str, ...] = (
    "run_id", "log", "sample_id", "epoch", "eval_mode", "untrusted_model", "attack_prompt",
    "main_task_id", "side_task_id", "outcome", "outcome_step", "t_star", "steps", "budget",
    "main_task_success", "side_task_success", "attempt_steps", "boundary",
)
"""What a runs table must have (a table from elsewhere, e.g. a CSV, too)."""
RUN_RECORDED_COLUMNS: tuple[str, ...] = ("error", "retried_errors", "model_retries")
"""Written for the record (the error text, retries), passed over by the analysis."""
RUN_OPTIONAL_COLUMNS: tuple[str, ...] = (
    "attempt_detector", "env_side_task_id", "honest_matching", "error_stage", "submit_errors",
    "design", "design_file", "design_k", "design_pairings", "side_task_instruction",
    "error_kind", "error_after_outcome", "error_after_outcome_kind", "unknown_checks",
    "main_unknown", "side_unknown", "attempts", "escape_log", "action_space",
    "side_task_category", "player", "takeover_steps", "seconds", "observation", "policy", "history")
"""Kept when present (filled with null / [] when absent), in the validated table's order: every
column of `RunRow` that is neither required nor only recorded (checked at import below)."""


def _check_run_record() -> None:
    declared = set(RUN_ROW_COLUMNS)
    parts = (RUN_REQUIRED_COLUMNS, RUN_OPTIONAL_COLUMNS, RUN_RECORDED_COLUMNS)
    joined = [c for part in parts for c in part]
    if sorted(joined) != sorted(declared) or len(joined) != len(set(joined)):
        raise AssertionError(f"contracts: the runs table's column roles do not cover RunRow once each: "
                             f"{sorted(set(joined) ^ declared)}")
    if RUN_REQUIRED_COLUMNS != tuple(c for c in RUN_ROW_COLUMNS if c in RUN_REQUIRED_COLUMNS):
        raise AssertionError("contracts: RUN_REQUIRED_COLUMNS is not in RunRow's order")


_check_run_record()


def check_runs_columns(columns: Iterable[str], where: str = "runs table") -> None:
    """The schema check of a runs table as written (like control-arena's samples frame): exactly
    RunRow's columns, in its order. Raises ValueError naming the table and the columns."""
    got = tuple(columns)
    if got == RUN_ROW_COLUMNS:
        return
    missing = [c for c in RUN_ROW_COLUMNS if c not in got]
    extra = [c for c in got if c not in RUN_ROW_COLUMNS]
    raise ValueError(f"{where}: columns differ from contracts.RunRow (missing {missing}, undeclared {extra}"
                     + (", order differs" if not missing and not extra else "") + ")")


# ---------------------------------------------------------------------- dilemma runs table
class DilemmaRunRow(TypedDict):
    """One row of the dilemma runs table (proactivity/runs.py); the factor columns
    (`scenario.FACTOR_LEVELS`) stand between `condition` and `max_turns`."""

    run_id: str
    log: str
    sample_id: str
    epoch: int
    model: str
    scenario_id: str | None
    domain: str | None
    drive: str | None
    condition: str
    max_turns: int
    mode: Literal["text", "desktop"] | str
    cls: str
    terminal_tool: str | None
    terminal_turn: int | None
    outcome: str
    outcome_step: int
    n_turns: int
    tools: str  # JSON list of tool ids, one per turn
    harmful_turns: str  # JSON list of turns
    harm_step: int | None


def dilemma_run_columns(factor_levels: Iterable[str]) -> tuple[str, ...]:
    """The dilemma runs table's columns: DilemmaRunRow's, the factor columns after `condition`."""
    cols = tuple(DilemmaRunRow.__annotations__)
    i = cols.index("condition") + 1
    return (*cols[:i], *factor_levels, *cols[i:])
