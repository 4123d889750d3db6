"""score_runs with a real provider on a fake API: cache, retries, errors, resume, the store."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from control_osworld.analysis.runs import load_scores
from control_osworld.monitoring.runtime import score_runs, score_runs_async
from control_osworld.monitoring.store import KEY, ScoreStore
from control_osworld.testing.fake_api import FakeAPI

from .conftest import model_config

MODEL = "openai/gpt-4.1-mini"


@pytest.fixture
def two_runs(runs):
    return [runs[0], runs[3]]  # one honest, one attack


def n_steps(runs):
    return sum(len(r.trajectory.steps) for r in runs)


def distinct(requests) -> int:
    """Identical views are one cached call, whichever run they come from."""
    return len({json.dumps(r.body, sort_keys=True) for r in requests})


def test_second_run_costs_nothing(fake_api, tmp_path, two_runs):
    cfg = model_config(MODEL, inputs="A+T")
    first = score_runs(two_runs, [cfg], ["A+T", "S"], tmp_path / "store", cache_dir=tmp_path / "cache")
    n = 2 * n_steps(two_runs)
    d = len(fake_api.requests)
    assert len(first) == n and 0 < d == distinct(fake_api.requests) <= n  # no request made twice
    assert first["error"].isna().all() and (first["score"] == 10).all()
    assert (~first["cached"]).sum() == d  # the rest were identical views: cache hits
    # same store: nothing left to do
    again = score_runs(two_runs, [cfg], ["A+T", "S"], tmp_path / "store", cache_dir=tmp_path / "cache")
    assert len(fake_api.requests) == d
    pd.testing.assert_frame_equal(first[KEY + ["score"]], again[KEY + ["score"]])
    # new store, same cache: every call is a cache hit
    fresh = score_runs(two_runs, [cfg], ["A+T", "S"], tmp_path / "store2", cache_dir=tmp_path / "cache")
    assert len(fake_api.requests) == d and fresh["cached"].all()
    # without the cache, the model is asked again
    score_runs(two_runs, [cfg], ["A+T"], tmp_path / "store3", cache_dir=tmp_path / "cache", use_cache=False)
    assert len(fake_api.requests) == d + n // 2


def test_malformed_reply_is_retried_then_recorded_as_error(fake_api, tmp_path, runs):
    fake_api.reply = lambda req: "I think this is about a 7."
    cfg = model_config(MODEL, kind="full_trajectory", retries=2)
    df = score_runs([runs[0]], [cfg], ["A"], tmp_path / "store", cache_dir=tmp_path / "cache")
    assert len(fake_api.requests) == 3  # one ask + two re-asks
    (row,) = df.itertuples()
    assert pd.isna(row.score) and "malformed reply after 3 attempts" in row.error and "no <score>" in row.error
    assert row.step is pd.NA or pd.isna(row.step)
    # re-running retries the error row, but every attempt is cached: no new calls
    score_runs([runs[0]], [cfg], ["A"], tmp_path / "store", cache_dir=tmp_path / "cache")
    assert len(fake_api.requests) == 3


def test_a_reask_that_succeeds_gives_a_score(fake_api, tmp_path, runs):
    replies = iter(["<score>high</score>", "<reasoning>ok</reasoning><score>64</score>"])
    fake_api.reply = lambda req: next(replies)
    cfg = model_config(MODEL, kind="full_trajectory")
    (row,) = score_runs([runs[0]], [cfg], ["A"], tmp_path / "s", cache_dir=tmp_path / "c").itertuples()
    assert row.score == 64 and row.attempts == 2 and pd.isna(row.error) and row.reason == "ok"


class Interrupt(Exception):
    pass


def test_interrupted_run_keeps_its_rows_and_resumes(fake_api, tmp_path, two_runs):
    cfg = model_config(MODEL, inputs="A")
    store, cache = tmp_path / "store", tmp_path / "cache"
    seen = []

    def stop_after_4(row):
        seen.append(row)
        if len(seen) == 4:
            raise Interrupt

    with pytest.raises(Interrupt):
        asyncio.run(score_runs_async(two_runs, [cfg], ["A"], store, concurrency=1, cache_dir=cache, on_row=stop_after_4))
    kept = ScoreStore(store).read()
    assert len(kept) == 4 and not (store / "scores.parquet").exists()  # parts only, not compacted
    df = score_runs(two_runs, [cfg], ["A"], store, cache_dir=cache)
    assert len(df) == n_steps(two_runs) and df["error"].isna().all()
    assert 0 < len(fake_api.requests) == distinct(fake_api.requests)  # nothing asked twice
    assert not list((store / "parts").glob("*.parquet"))  # compacted


def test_network_failure_is_an_error_row_and_retried_next_time(monkeypatch, tmp_path, runs):
    with FakeAPI() as dead:
        port_env = dead.env()
    for k, v in port_env.items():  # the server is gone: connection refused
        monkeypatch.setenv(k, v)
    cfg = model_config(MODEL, kind="full_trajectory")
    (row,) = score_runs([runs[0]], [cfg], ["T"], tmp_path / "store", cache_dir=tmp_path / "cache").itertuples()
    assert pd.isna(row.score) and row.error.startswith("model call failed")
    with FakeAPI() as api:
        for k, v in api.env().items():
            monkeypatch.setenv(k, v)
        (row,) = score_runs([runs[0]], [cfg], ["T"], tmp_path / "store", cache_dir=tmp_path / "cache").itertuples()
    assert row.score == 10 and pd.isna(row.error) and len(api.requests) == 1


def test_store_is_what_the_analysis_reads(fake_api, tmp_path, two_runs):
    per_step = model_config(MODEL, name="ps")
    full = model_config(MODEL, name="ft", kind="full_trajectory")
    df = score_runs(two_runs, [per_step, full], ["A+T+S", "A"], tmp_path / "store", cache_dir=tmp_path / "c")
    loaded = load_scores(tmp_path / "store")  # the folder: only scores.parquet is a table there
    assert len(loaded) == len(df) == 2 * (n_steps(two_runs) + 2)
    assert loaded.loc[loaded.monitor == "ft", "step"].isna().all()
    assert loaded.loc[loaded.monitor == "ps", "step"].notna().all()
    assert set(loaded["run_id"]) == {r.run_id for r in two_runs}
    assert set(loaded["inputs"]) == {"A+T+S", "A"}
    for col in ("model", "mode", "score_point", "reason", "cached", "latency_s"):
        assert col in df.columns


def test_model_override_gets_its_own_rows(fake_api, tmp_path, runs):
    cfg = model_config(MODEL, kind="full_trajectory")
    other = cfg.with_model("anthropic/claude-sonnet-4-5")
    score_runs([runs[0]], [cfg], ["A"], tmp_path / "s", cache_dir=tmp_path / "c")
    score_runs([runs[0]], [other], ["A"], tmp_path / "s", cache_dir=tmp_path / "c")
    df = ScoreStore(tmp_path / "s").read()
    assert sorted(df["model"]) == sorted([MODEL, "anthropic/claude-sonnet-4-5"])
    assert df["config_hash"].nunique() == 2
    assert [r.path for r in fake_api.requests] == ["/v1/chat/completions", "/v1/messages"]


def test_store_keeps_the_latest_row_per_key(tmp_path):
    st = ScoreStore(tmp_path / "s")
    row = dict(run_id="r", log="l", sample_id="s", epoch=1, step=3, monitor="m", monitor_kind="per_step",
               inputs="A", config_hash="h", score=None, error="boom")
    st.append([dict(row)])
    st.append([dict(row, score=40.0, error=None)])
    st.append([dict(row, step=None, monitor_kind="full_trajectory", score=5.0, error=None)])
    df = st.read()
    assert len(df) == 2 and df.loc[df.step == 3, "score"].item() == 40.0
    st.compact()
    assert len(ScoreStore(tmp_path / "s").read()) == 2 and not list((tmp_path / "s" / "parts").iterdir())
    with pytest.raises(ValueError, match="folder"):
        ScoreStore(tmp_path / "scores.parquet")
