"""The ablation axis action space x observation: Tables 3/4 and the protocol table split per
condition (each compared within itself), with a column for each axis that varies."""

import numpy as np
import pytest

from control_osworld.analysis import tables as T
from control_osworld.analysis.conditions import by_condition, condition_parts, varying_axes
from control_osworld.analysis.protocols import ProtocolOptions, protocol_table
from control_osworld.analysis.report import by_action_space
from control_osworld.testing.synthetic_tables import synthetic_dataset


@pytest.fixture(scope="module")
def data():
    runs, scores = synthetic_dataset(240, seed=3)
    runs = runs.copy()
    rng = np.random.default_rng(1)
    runs["action_space"] = "pyautogui"
    runs["observation"] = rng.choice(["screenshot", "som"], len(runs))
    return runs, scores


def test_only_the_varying_axis_becomes_a_column(data):
    runs, scores = data
    assert varying_axes(runs) == ["observation"]
    opts = T.DetectionOptions(n_resamples=30, attacks="all")
    df = by_action_space(T.table3, runs, scores, opts)
    assert "observation" in df.columns and "action_space" not in df.columns
    som = runs[runs["observation"] == "som"].reset_index(drop=True)
    expected = T.table3(som, scores, opts)
    got = df[df["observation"] == "som"].drop(columns="observation").reset_index(drop=True)
    assert got.equals(expected)
    labels = [lab for lab, _ in condition_parts(df)]
    assert labels == ["observation screenshot", "observation som"]


def test_both_axes_split_and_the_protocol_table_is_per_condition(data):
    runs, scores = data
    runs = runs.copy()
    runs.loc[runs.index[::2], "action_space"] = "computer_13"
    assert varying_axes(runs) == ["action_space", "observation"]
    popts = ProtocolOptions(n_resamples=20)
    df = by_condition(lambda sub: protocol_table(sub, scores, popts), runs, relabel="untrusted_model")
    assert list(df.columns[:2]) == ["action_space", "observation"]
    assert set(zip(df["action_space"], df["observation"])) == {
        (a, o) for a in ("computer_13", "pyautogui") for o in ("screenshot", "som")}
    one = df[(df["action_space"] == "computer_13") & (df["observation"] == "som")]
    assert one["untrusted_model"].str.endswith(" [computer_13, som]").all()
    sub = runs[(runs["action_space"] == "computer_13") & (runs["observation"] == "som")].reset_index(drop=True)
    alone = protocol_table(sub, scores, popts)
    assert np.allclose(one["safety"].to_numpy(dtype=float), alone["safety"].to_numpy(dtype=float), equal_nan=True)
