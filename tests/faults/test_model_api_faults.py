"""A model API that answers 429 / 500 / malformed JSON / a refusal, through inspect's real
Anthropic and OpenAI providers pointed at a fake API on loopback: 429 and 500 are retried (and
counted in the runs table), a malformed reply and a refusal end the sample as a classified error
(`model_api`, `model_refusal`), and a retry of the errored sample completes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai import eval_retry

from control_osworld.control.task import osworld_control
from control_osworld.logs import runs_table
from tests.agent.fake_api import FakeAPI
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[1] / "agent" / "data"
SCRIPT = [{"computer": {"action": "type", "text": "buy milk"}}, {"submit": {"status": "done", "explanation": "typed"}}]


@pytest.fixture(autouse=True)
def _desktop():
    ok, why = local_ready()
    require(ok, why)


def _eval(tmp_path, monkeypatch, api: FakeAPI, provider: str):
    # The base URL goes with the model (not only the environment): inspect caches models, and a
    # cached one would still point at an earlier test's fake.
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        model, kw = "anthropic/claude-sonnet-4-5", {"max_tokens": 4096, "model_base_url": f"http://127.0.0.1:{api.port}"}
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        model, kw = "openai/computer-use-preview", {"model_base_url": f"http://127.0.0.1:{api.port}/v1"}
    task = osworld_control(mode="honest", main_tasks="write_note", tasks_dir=str(DATA / "tasks"),
                           side_tasks_dir=str(DATA / "side_tasks"))
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none", max_retries=3, **kw)
    return log


@pytest.mark.parametrize("provider,faults", [("anthropic", ["429", "500"]), ("openai", ["429", "500"])])
def test_rate_limit_and_server_error_are_retried(tmp_path, monkeypatch, provider, faults):
    with FakeAPI(SCRIPT, faults=faults) as api:
        log = _eval(tmp_path, monkeypatch, api, provider)
    assert api.faults_sent == faults and not api.faults
    assert log.status == "success", log.error
    row = runs_table([log.location]).iloc[0]
    assert row.outcome == "completed" and row.error_kind is None
    assert row.model_retries == len(faults)  # the retries are recorded, not hidden


def test_malformed_reply_is_a_model_api_error_or_a_recorded_retry(tmp_path, monkeypatch):
    with FakeAPI(SCRIPT, faults=["malformed"]) as api:
        log = _eval(tmp_path, monkeypatch, api, "anthropic")
        assert api.faults_sent == ["malformed"]
        row = runs_table([log.location]).iloc[0]
        if row.outcome != "error":
            # inspect retried the call (or the sample) itself: that retry is on the record
            assert row.outcome == "completed", row.outcome
            assert row.model_retries >= 1 or list(row.retried_errors) == ["model_api"], row
            return
        assert row.error_kind == "model_api" and "JSONDecodeError" in row.error, row.error
        assert row.main_task_success is None  # an error is never scored as a failure
        [retried] = eval_retry(log.location, log_dir=str(tmp_path), display="none", max_retries=3)
    assert retried.status == "success"
    table = runs_table([retried.location])
    assert len(table) == 1 and table.iloc[0].outcome == "completed" and table.iloc[0].error_kind is None


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_refusal_is_a_model_refusal_error(tmp_path, monkeypatch, provider):
    with FakeAPI(SCRIPT, faults=["refusal"]) as api:
        log = _eval(tmp_path, monkeypatch, api, provider)
    assert api.faults_sent == ["refusal"]
    row = runs_table([log.location]).iloc[0]
    assert (row.outcome, row.error_kind) == ("error", "model_refusal")
    assert "help with that" in row.error
    # The refusal ended the run at once: no nudging the model 75 times.
    assert len([r for r in api.requests if r.body.get("tools")]) == 1
