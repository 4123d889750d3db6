"""`control-osworld monitor` over a real .eval log (read back by control_osworld.logs)."""

from __future__ import annotations

import base64

import pandas as pd
import pytest
from click.testing import CliRunner
from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
from inspect_ai.model import ChatMessageUser, ContentImage

from control_osworld.monitoring.cli import monitor_command
from control_osworld.monitoring.config import REPO_ROOT
from control_osworld.monitoring.runner import monitor_logs
from control_osworld.monitoring.store import ScoreStore
from control_osworld.sample_store import TRAJECTORY_KEY


def write_log(path, runs) -> str:
    """An .eval log shaped like the agent loop's: trajectory in the store, screenshots as messages."""
    samples = []
    for r in runs:
        msgs = [ChatMessageUser(id=k, content=[ContentImage(image="data:image/png;base64," + base64.b64encode(v).decode())])
                for k, v in r.images.items()]
        samples.append(EvalSample(id=r.sample_id, epoch=r.epoch, input="task", target="", messages=msgs,
                                  store={TRAJECTORY_KEY: r.trajectory.model_dump(mode="json")},
                                  metadata={"eval_mode": r.eval_mode, "main_task_id": r.main_task_id,
                                            "side_task_id": r.side_task_id}))
    spec = EvalSpec(created="2026-01-01T00:00:00+00:00", task="synthetic", model="scripted/oracle", config=EvalConfig(),
                    dataset=EvalDataset(samples=len(runs), sample_ids=[r.sample_id for r in runs]))
    write_eval_log(EvalLog(eval=spec, samples=samples, status="success"), str(path))
    return str(path)


@pytest.fixture(scope="module")
def log(runs, tmp_path_factory):
    return write_log(tmp_path_factory.mktemp("logs") / "synthetic.eval", [runs[0], runs[1], runs[3], runs[4]])


def invoke(*args):
    return CliRunner().invoke(monitor_command, [str(a) for a in args], catch_exceptions=False)


def test_rules_over_a_log_with_one_subset(log, tmp_path):
    res = invoke(log, "--config", REPO_ROOT / "monitors/per_step_rules.yaml", "--config",
                 REPO_ROOT / "monitors/full_trajectory_rules.yaml", "--inputs", "A,T", "--store", tmp_path / "s")
    assert res.exit_code == 0, res.output
    df = ScoreStore(tmp_path / "s").read()
    assert set(df["inputs"]) == {"A+T"} and set(df["monitor"]) == {"per_step_rules", "full_trajectory_rules"}
    assert df["run_id"].str.startswith(log).all() and df["error"].isna().all()
    assert "per_step_rules" in res.output and "scores.parquet" in res.output


def test_model_override_and_second_run_is_free(fake_api, log, tmp_path):
    args = [log, "--config", REPO_ROOT / "monitors/full_trajectory_rules.yaml", "--model", "openai/gpt-4.1-mini",
            "--all-subsets", "--store", tmp_path / "s", "--cache-dir", tmp_path / "c", "--concurrency", "4"]
    assert invoke(*args).exit_code == 0
    n = len(fake_api.requests)
    assert 0 < n <= 4 * 7
    df = ScoreStore(tmp_path / "s").read()
    assert len(df) == 4 * 7 and set(df["model"]) == {"openai/gpt-4.1-mini"} and (df["score"] == 10).all()
    assert invoke(*args).exit_code == 0
    args[args.index(tmp_path / "s")] = tmp_path / "s2"  # a new store: every reply from the cache
    res = invoke(*args)
    assert res.exit_code == 0 and len(fake_api.requests) == n
    assert ScoreStore(tmp_path / "s2").read()["cached"].all()


def test_default_inputs_come_from_each_config(log, tmp_path, monkeypatch):
    cfg = tmp_path / "monitors" / "only_actions.yaml"
    cfg.parent.mkdir()
    cfg.write_text("kind: full_trajectory\nmodel: offline/rules\ninputs: [T, A]\n")
    assert invoke(log, "--config", cfg, "--store", tmp_path / "s").exit_code == 0
    df = ScoreStore(tmp_path / "s").read()
    assert set(df["inputs"]) == {"A+T"} and set(df["monitor"]) == {"only_actions"}


def test_bad_input_is_reported_clearly(log, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: per_step\nmodel: offline/rules\nhistory: {images: many}\n")
    res = CliRunner().invoke(monitor_command, [log, "--config", str(bad)])
    assert res.exit_code != 0 and str(bad) in res.output and "history.images" in res.output
    res = CliRunner().invoke(monitor_command, [log, "--config", str(REPO_ROOT / "monitors/per_step_rules.yaml"),
                                               "--inputs", "A+Q"])
    assert res.exit_code != 0 and "--inputs" in res.output
    res = CliRunner().invoke(monitor_command, [log, "-c", str(REPO_ROOT / "monitors/per_step_rules.yaml"),
                                               "--inputs", "A", "--all-subsets"])
    assert res.exit_code != 0
    not_a_log = tmp_path / "notes.eval"
    not_a_log.write_text("hello")
    res = CliRunner().invoke(monitor_command, [str(not_a_log), "-c", str(REPO_ROOT / "monitors/per_step_rules.yaml")])
    assert res.exit_code != 0 and "notes.eval" in res.output


def test_main_job_entry_point(log, tmp_path):
    df = monitor_logs([log], ["monitors/per_step_rules.yaml", "monitors/full_trajectory_learned.yaml"],
                      subsets=["A", "T"], store=tmp_path / "scores")
    assert set(df["inputs"]) == {"A", "T"}
    assert len(df[df.monitor == "full_trajectory_learned"]) == 4 * 2  # 4 runs x 2 subsets
    assert (tmp_path / "scores" / "scores.parquet").exists()
    assert isinstance(df, pd.DataFrame) and df["error"].isna().all()
