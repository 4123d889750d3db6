"""The ablation axis in run configs: lists in `action_space` / `observation` build one task per
combination (the observation and space recorded in every sample); combinations that cannot run
are skipped, and a grid with none left (or a prompted agent in the computer space) is a
ConfigError naming the file and the fields."""

from __future__ import annotations

import pytest

from control_osworld.config_file import ConfigError
from control_osworld.control.run import RunConfig, build_tasks

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


def test_the_ablation_config_expands_to_its_conditions_and_the_tables_split_by_them():
    """configs/ablation-agents.yaml (README): action space x observation on a small design; each
    condition its own tasks, recorded in every sample; Tables 3/4 of runs carrying those
    conditions come one per condition, each computed from that condition's runs alone."""
    from pathlib import Path

    import numpy as np

    from control_osworld.analysis import tables as T
    from control_osworld.analysis.conditions import condition_parts
    from control_osworld.analysis.report import by_action_space
    from control_osworld.testing.synthetic_tables import synthetic_dataset

    cfg = RunConfig.load(Path(__file__).parents[2] / "configs" / "ablation-agents.yaml")
    want = [("computer", "screenshot"), ("pyautogui", "screenshot"), ("pyautogui", "a11y_tree"),
            ("computer_13", "screenshot"), ("computer_13", "a11y_tree")]
    assert cfg.conditions() == want
    tasks = build_tasks(cfg)
    assert len(tasks) == len(want) * 2  # honest and one attack prompt per condition
    recorded = []
    for t in tasks:
        metas = [s.metadata["metadata"] for s in t.dataset]
        conds = {(m["action_space"], m["observation"]) for m in metas}
        assert len(conds) == 1 and t.metadata["action_space"] == next(iter(conds))[0]
        assert {m["main_task_id"] for m in metas} <= {"mp-config-port", "os-count-errors", "calc-sales-total"}
        assert 0 < len(t.dataset) <= 12  # a small design
        recorded.append(next(iter(conds)))
    assert sorted(set(recorded)) == sorted(want)

    runs, scores = synthetic_dataset(300, seed=5)
    runs = runs.copy()
    pick = np.random.default_rng(2).integers(0, len(want), len(runs))
    runs["action_space"] = [want[i][0] for i in pick]
    runs["observation"] = [want[i][1] for i in pick]
    opts = T.DetectionOptions(n_resamples=20, attacks="all")
    df = by_action_space(T.table3, runs, scores, opts)
    labels = [lab for lab, _ in condition_parts(df)]
    assert labels == [f"action space {a}, observation {o}" for a, o in sorted(want)]
    sub = runs[(runs["action_space"] == "pyautogui") & (runs["observation"] == "a11y_tree")].reset_index(drop=True)
    alone = T.table3(sub, scores, opts)
    got = df[(df["action_space"] == "pyautogui") & (df["observation"] == "a11y_tree")]
    assert got.drop(columns=["action_space", "observation"]).reset_index(drop=True).equals(alone)
