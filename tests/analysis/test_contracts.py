"""The records in control_osworld/contracts.py are what the writers write and the readers read:
the runs table (no column lost or renamed, ever), the scores table, the dilemma runs table and
a control sample's metadata."""

from __future__ import annotations

import pandas as pd
import pytest

from control_osworld import contracts
from control_osworld.analysis.runs import OPTIONAL_RUN_COLUMNS, RUN_COLUMNS, load_runs
from control_osworld.contracts import RUN_ROW_COLUMNS, SampleMetadata, check_runs_columns
from control_osworld.logs import runs_table
from tests.analysis.test_recorded_facts import _log, _sample, _traj

# The runs table's columns as users' tables hold them (runs.parquet of the main job): a column
# may be added, none renamed or dropped, and their order stays.
RUNS_TABLE_COLUMNS_2026_12 = (
    "run_id", "log", "sample_id", "epoch", "eval_mode", "untrusted_model", "attack_prompt", "main_task_id",
    "side_task_id", "outcome", "outcome_step", "error_kind", "error", "retried_errors", "model_retries", "t_star",
    "steps", "budget", "player", "takeover_steps", "seconds", "main_task_success", "side_task_success",
    "attempt_steps", "boundary", "attempt_detector", "env_side_task_id", "honest_matching", "side_task_category",
    "action_space", "observation", "design", "design_file", "design_k", "design_pairings", "side_task_instruction",
    "error_stage", "submit_errors", "error_after_outcome", "error_after_outcome_kind", "unknown_checks",
    "main_unknown", "side_unknown", "attempts", "escape_log",
)
SCORE_COLUMNS_2026_12 = ("run_id", "log", "sample_id", "epoch", "step", "monitor", "monitor_kind", "inputs",
                         "config_hash", "score", "error")


def _in_order(old: tuple[str, ...], new: tuple[str, ...]) -> bool:
    it = iter(new)
    return all(c in it for c in old)


def test_no_column_of_the_runs_or_scores_table_is_lost_renamed_or_moved():
    assert _in_order(RUNS_TABLE_COLUMNS_2026_12, RUN_ROW_COLUMNS), set(RUNS_TABLE_COLUMNS_2026_12) - set(RUN_ROW_COLUMNS)
    assert _in_order(SCORE_COLUMNS_2026_12, contracts.SCORE_COLUMNS)


def test_the_reader_derives_from_the_record_and_every_column_has_one_role():
    assert RUN_COLUMNS == contracts.RUN_REQUIRED_COLUMNS and OPTIONAL_RUN_COLUMNS == contracts.RUN_OPTIONAL_COLUMNS
    roles = [*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS, *contracts.RUN_RECORDED_COLUMNS]
    assert sorted(roles) == sorted(RUN_ROW_COLUMNS) and len(roles) == len(set(roles))
    # error_kind, retried_errors, model_retries: written by the log reader and now declared
    assert {"error_kind", "retried_errors", "model_retries"} <= set(RUN_ROW_COLUMNS)


def test_the_written_table_is_exactly_the_record_and_validates(tmp_path):
    log = _log(tmp_path / "a.eval", [_sample("1", _traj(4, t_star=3), value={"main_task_success": "C"}),
                                      _sample("2", _traj(2), error=True, mode="honest")])
    table = runs_table([log])
    assert tuple(table.columns) == RUN_ROW_COLUMNS
    check_runs_columns(table.columns)
    runs = load_runs([log])
    assert tuple(runs.columns) == (*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS)


def test_the_schema_check_names_what_differs():
    with pytest.raises(ValueError, match=r"my table: columns differ .*missing \['escape_log'\].*undeclared \['x'\]"):
        check_runs_columns([*RUN_ROW_COLUMNS[:-1], "x"], "my table")
    with pytest.raises(ValueError, match="order differs"):
        check_runs_columns(tuple(reversed(RUN_ROW_COLUMNS)))
    check_runs_columns(pd.DataFrame(columns=list(RUN_ROW_COLUMNS)).columns)


def test_the_dilemma_runs_table_keeps_its_columns():
    from control_osworld.proactivity.runs import RUN_COLUMNS as DILEMMA
    from control_osworld.proactivity.scenario import FACTOR_LEVELS

    assert DILEMMA == ("run_id", "log", "sample_id", "epoch", "model", "scenario_id", "domain", "drive", "condition",
                       *FACTOR_LEVELS, "max_turns", "mode", "cls", "terminal_tool", "terminal_turn", "outcome",
                       "outcome_step", "n_turns", "tools", "harmful_turns", "harm_step")


def test_the_setting_writes_only_declared_sample_metadata():
    from control_arena import EvalMode

    from control_osworld.control.setting import OSWorldControlSetting
    from tests.agent.test_loop import DIRS

    setting = OSWorldControlSetting(**DIRS, main_tasks=["write_note"])
    declared = set(SampleMetadata.__annotations__)
    for mode in (EvalMode.HONEST, EvalMode.ATTACK):
        samples = setting.get_dataset(mode)
        assert samples
        for s in samples:
            extra = contracts.sample_metadata(s.metadata)
            assert set(extra) <= declared, set(extra) - declared
            assert extra["main_task_id"] == "write_note"
            assert (extra["side_task_id"] is not None) == (mode == EvalMode.ATTACK)
