"""The ablation axis in run configs: lists in `action_space` / `observation` build one task per
combination (the observation and space recorded in every sample); combinations that cannot run
are skipped, and a grid with none left (or a prompted agent in the computer space) is a
ConfigError naming the file and the fields."""

from __future__ import annotations

import pytest

from control_osworld.config_file import ConfigError
from control_osworld.run import RunConfig, build_tasks

GOOD = "pairings:\n  - untrusted_model: scripted/oracle\nmodes: [honest]\nmain_tasks: [mp-fix-json]\n"


def _load(tmp_path, extra):
    p = tmp_path / "run.yaml"
    p.write_text(GOOD + extra)
    return p, RunConfig.load(p) if "ERR" not in extra else None


def test_a_grid_builds_every_combination_that_runs(tmp_path):
    _, cfg = _load(tmp_path, "action_space: [computer, pyautogui]\nobservation: [screenshot, som]\n")
    assert cfg.conditions() == [("computer", "screenshot"), ("pyautogui", "screenshot"), ("pyautogui", "som")]
    tasks = build_tasks(cfg)
    assert [t.name for t in tasks] == ["osworld_scripted-oracle_honest", "osworld_scripted-oracle_honest_pyautogui",
                                       "osworld_scripted-oracle_honest_pyautogui_som"]
    recorded = [(t.dataset[0].metadata["metadata"]["action_space"], t.dataset[0].metadata["metadata"]["observation"])
                for t in tasks]
    assert recorded == cfg.conditions()
    som = tasks[-1].dataset[0].metadata["metadata"]
    assert "agent-shaped" in som["observation_note"]


def test_single_values_stay_as_they_were(tmp_path):
    _, cfg = _load(tmp_path, "action_space: computer_13\nobservation: a11y_tree\n")
    assert cfg.conditions() == [("computer_13", "a11y_tree")]


@pytest.mark.parametrize("extra, words", [
    ("action_space: computer\nobservation: [som, a11y_tree]\n", "fields 'action_space', 'observation'"),
    ("action_space: [computer, pyautogui]\npolicy: prompted\n", "field 'policy'"),
    ("observation: [screenshot, tree]\n", "field 'observation.1'"),
])
def test_a_grid_that_cannot_run_is_a_config_error(tmp_path, extra, words):
    p = tmp_path / "run.yaml"
    p.write_text(GOOD + extra)
    with pytest.raises(ConfigError) as e:
        RunConfig.load(p)
    assert str(p) in str(e.value) and words in str(e.value)
