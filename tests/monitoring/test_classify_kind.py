"""Refusal/leak classification is a monitor kind: a classifier config is a MonitorConfig of kind
`classify`, loaded, checked and frozen as every monitor config is."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from control_osworld.config_file import REPO_ROOT, ConfigError
from control_osworld.monitoring.classify import (
    ClassifierConfig,
    classifier_config,
    load_classifier_config,
)
from control_osworld.monitoring.config import CLASSIFIER_MAX_TOKENS, MonitorConfig, load_config
from control_osworld.monitoring.runner import load_configs

CLASSIFIERS = REPO_ROOT / "classifiers"


def test_the_shipped_classifier_files_load_as_classify_monitors():
    rules = load_classifier_config(CLASSIFIERS / "refusal_rules.yaml")
    judge = load_classifier_config(CLASSIFIERS / "refusal_judge.yaml")
    for c in (rules, judge):
        assert isinstance(c, MonitorConfig) and c.kind == "classify"
        assert c.mode is None and c.score_point is None
        assert c.generate.max_tokens == CLASSIFIER_MAX_TOKENS == 1024 and c.retries == 2
    assert (rules.name, rules.model, rules.prompt_text) == ("refusal_rules", "offline/rules", None)
    assert (judge.name, judge.model) == ("refusal_judge", "openai/gpt-4.1-mini")
    assert "{transcript}" in (judge.prompt_text or "")
    assert ClassifierConfig is MonitorConfig  # the old name
    with pytest.raises(ValidationError):
        rules.retries = 5  # type: ignore[misc]  # frozen


def test_a_classify_config_is_checked_as_monitors_are(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("model: offline/learned\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: field 'model': unknown offline classifier"):
        load_classifier_config(p)
    p.write_text("model: offline/rules\nmode: rolling\n")
    with pytest.raises(ConfigError, match="only applies to per_step"):
        load_classifier_config(p)
    p.write_text("model: openai/gpt-4.1\nprompt: prompts/refusal_judge.txt\nmax_tokens: 10\ngenerate: {max_tokens: 20}\n")
    with pytest.raises(ConfigError, match="max_tokens is set twice"):
        load_classifier_config(p)
    p.write_text("model: openai/gpt-4.1\nprompt: prompts/refusal_judge.txt\nmax_tokens: 300\n")
    assert load_classifier_config(p).generate.max_tokens == 300
    p.write_text("model: openai/gpt-4.1\nprompt: prompts/refusal_judge.txt\ngenerate: {max_tokens: 300, temperature: 0}\n")
    assert load_classifier_config(p).generate.model_dump(exclude_none=True) == {"max_tokens": 300, "temperature": 0}


def test_each_command_refuses_the_other_kind(tmp_path):
    with pytest.raises(ConfigError, match=r"per_step_rules\.yaml: field 'kind'.*needs kind: classify"):
        load_classifier_config(REPO_ROOT / "monitors" / "per_step_rules.yaml")
    cls = tmp_path / "cls.yaml"
    cls.write_text("kind: classify\nmodel: offline/rules\n")
    assert load_config(cls).kind == "classify"
    with pytest.raises(ConfigError, match=r"cls\.yaml: field 'kind'.*control-osworld classify"):
        load_configs([cls])
    with pytest.raises(ConfigError, match="needs kind: classify"):
        classifier_config(load_config(REPO_ROOT / "monitors" / "full_trajectory_rules.yaml"))


HASHES = {
    "full_trajectory_claude": "1e7ea9dd29d6b290",
    "full_trajectory_learned": "f38c8f93650fb14f",
    "full_trajectory_length": "604450402c23cbf5",
    "full_trajectory_random": "1970273fda006dbf",
    "full_trajectory_rules": "6979ad6d5c5ce3b8",
    "full_trajectory_rules_frames": "9a17b7e5df7fb752",
    "per_step_gpt": "e2469fc0d05a2ba6",
    "per_step_learned": "1b55877f1cbbba4e",
    "per_step_length": "17cdf4fd5e473674",
    "per_step_random": "3720499b79830e74",
    "per_step_rules": "9b59fe30f29fecf0",
    "per_step_rules_post": "ad19b1fb5e0672d3",
    "per_step_rules_post_frames": "46ec59bf50df41ef",
}
"""Every shipped monitor's config hash from before `classify` was a kind: adding the kind
changed no scoring monitor's hash (so no stored score is orphaned)."""


def test_the_scoring_monitors_hash_as_they_did():
    got = {p.stem: load_config(p).config_hash for p in sorted((REPO_ROOT / "monitors").glob("*.yaml"))}
    assert got == HASHES
