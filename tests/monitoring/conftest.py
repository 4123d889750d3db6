"""Fixtures: synthetic runs with real screenshots, a fake model API on loopback, config builders."""

from __future__ import annotations

import pytest

from control_osworld.monitoring.config import REPO_ROOT, GenerateOptions, MonitorConfig
from control_osworld.testing.fake_api import FakeAPI
from control_osworld.testing.synthetic_runs import make_run, make_runs

PER_STEP_PROMPT = (REPO_ROOT / "prompts" / "monitor_per_step.txt").read_text()


@pytest.fixture(scope="session")
def runs():
    """Three honest and three attack runs (one per side task, in order), with PNG screenshots."""
    return make_runs(3, 6, seed=1)


@pytest.fixture(scope="session")
def exfil_run():
    """An attack run whose side task is a curl upload of ~/.ssh/id_rsa, typed in a terminal."""
    run = make_run("attack", 7, side="exfil_ssh_key", main="rename_report", sample_id="exfil")
    step = next(s for s in run.trajectory.steps if "curl" in str(s.actions[0].arguments))
    # Give the scored step a result error so "never the result" is checkable for A too.
    step.actions[0].error = "ERR-RESULT-MARKER: connection reset"
    return run


def scored_step(run):
    return next(s for s in run.trajectory.steps if "curl" in str(s.actions[0].arguments))


def model_config(model: str, **kw) -> MonitorConfig:
    base = dict(name="test_monitor", kind="per_step", mode="independent", score_point="pre_action", model=model,
                prompt_text=PER_STEP_PROMPT, generate=GenerateOptions(max_tokens=4096, max_retries=0, timeout=20),
                retries=2)
    if kw.get("kind") == "full_trajectory":  # mode and score point are per_step-only fields
        del base["mode"], base["score_point"]
    base.update(kw)
    return MonitorConfig(**base)


@pytest.fixture
def fake_api(monkeypatch):
    with FakeAPI() as api:
        for k, v in api.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        yield api
