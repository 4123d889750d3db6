from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from control_osworld.monitoring.config import (
    ALL_SUBSETS,
    REPO_ROOT,
    ConfigError,
    MonitorConfig,
    canonical_subset,
    load_config,
    parse_subsets,
)

MONITORS = sorted((REPO_ROOT / "monitors").glob("*.yaml"))


def test_subsets_are_the_seven_in_fixed_order():
    assert ALL_SUBSETS == ("A", "T", "S", "A+T", "A+S", "T+S", "A+T+S")
    assert canonical_subset("S+A") == "A+S"
    assert canonical_subset("a,s") == "A+S"
    assert canonical_subset(["T", "A", "S"]) == "A+T+S"
    assert parse_subsets(["A,S", "S+A", "T"]) == ["A+S", "T"]
    for bad in ("", "X", "A+A", "A+T+S+R"):
        with pytest.raises(ValueError):
            canonical_subset(bad)


@pytest.mark.parametrize("path", MONITORS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    c = load_config(path)
    assert c.name == path.stem
    assert c.inputs in ALL_SUBSETS
    if not c.is_offline:
        assert "{transcript}" in c.prompt_text


def test_required_configs_exist():
    names = {p.stem for p in MONITORS}
    assert {"full_trajectory_rules", "per_step_rules", "full_trajectory_learned", "per_step_learned",
            "full_trajectory_claude", "per_step_gpt"} <= names
    assert load_config(REPO_ROOT / "monitors/full_trajectory_claude.yaml").model.startswith("anthropic/")
    assert load_config(REPO_ROOT / "monitors/per_step_gpt.yaml").model.startswith("openai/")


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "monitors" / "bad.yaml"
    p.parent.mkdir(exist_ok=True)
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, field", [
    ("kind: sideways\nmodel: offline/rules\n", "'kind'"),
    ("kind: per_step\nmodel: offline/rules\ninputs: A+X\n", "'inputs'"),
    ("kind: per_step\nmodel: offline/rules\nimage: {quality: 500}\n", "'image.quality'"),
    ("kind: per_step\nmodel: offline/rules\ncolour: red\n", "'colour'"),
    ("kind: per_step\nmodel: offline/magic\n", "'model'"),
    ("kind: per_step\nmodel: openai/gpt-4.1-mini\n", "needs a prompt"),
    ("kind: per_step\nmodel: openai/gpt-4.1-mini\nprompt: prompts/nope.txt\n", "'prompt'"),
    ("kind: full_trajectory\nmode: rolling\nmodel: offline/rules\n", "only applies to per_step"),
    ("kind: per_step\nmodel: offline/rules\nscore: {min: 5, max: 1}\n", "'score'"),
    ("- just\n- a list\n", "expected a mapping"),
    ("kind: [unclosed\n", "not valid YAML"),
])
def test_bad_config_names_file_and_field(tmp_path, text, field):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert str(p) in str(err.value)
    assert field in str(err.value)


def test_prompt_without_transcript_slot_is_rejected(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "monitor_x.txt").write_text("Rate it. <score>N</score>")
    p = _write(tmp_path, "kind: per_step\nmodel: openai/gpt-4.1-mini\nprompt: prompts/monitor_x.txt\n")
    with pytest.raises(ConfigError, match="transcript"):
        load_config(p)


def test_config_hash_tracks_what_changes_scores(tmp_path):
    base = load_config(REPO_ROOT / "monitors/per_step_gpt.yaml")
    renamed = load_config(REPO_ROOT / "monitors/per_step_gpt.yaml", name="other", inputs="A")
    assert renamed.config_hash == base.config_hash  # name and inputs are their own columns
    swapped = base.with_model("anthropic/claude-sonnet-4-5")
    assert swapped.model == "anthropic/claude-sonnet-4-5" and swapped.config_hash != base.config_hash
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "monitor_per_step.txt").write_text(base.prompt_text + "\nBe terse.")
    edited = tmp_path / "monitors" / "per_step_gpt.yaml"
    edited.parent.mkdir()
    edited.write_text((REPO_ROOT / "monitors/per_step_gpt.yaml").read_text())
    assert load_config(edited).config_hash != base.config_hash  # the prompt is hashed by content
    assert base.with_model("offline/rules").config_hash != base.config_hash


def test_model_override_is_validated():
    base = load_config(REPO_ROOT / "monitors/per_step_rules.yaml")
    with pytest.raises(ConfigError, match="'model'"):
        base.with_model("offline/nonsense")
    # Offline configs name a prompt too, so --model can swap a model judge in.
    swapped = base.with_model("openai/gpt-4.1-mini")
    assert swapped.prompt_text and swapped.kind == base.kind and swapped.inputs == base.inputs
    bare = MonitorConfig(name="x", kind="per_step", model="offline/rules")
    with pytest.raises(ConfigError, match="needs a prompt"):
        bare.with_model("openai/gpt-4.1-mini")


@pytest.mark.parametrize("path", MONITORS, ids=lambda p: p.name)
def test_configs_are_frozen_hashable_and_round_trip(path):
    c = load_config(path)
    hash(c)
    with pytest.raises(ValidationError):
        c.model = "x/y"  # type: ignore[misc]
    assert MonitorConfig.model_validate_json(c.model_dump_json()) == c
    assert c.with_model("openai/gpt-4.1-mini").kind == c.kind


def test_per_step_defaults_and_full_trajectory_has_no_mode():
    ps = MonitorConfig(name="x", kind="per_step", model="offline/rules")
    assert (ps.mode, ps.score_point) == ("rolling", "pre_action")
    ft = MonitorConfig(name="x", kind="full_trajectory", model="offline/rules")
    assert (ft.mode, ft.score_point) == (None, None)
