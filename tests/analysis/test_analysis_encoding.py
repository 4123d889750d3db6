"""The score store's encoding (tables._Rows): block-wise factorization and one encoding for both kinds."""

import numpy as np
import pandas as pd
import pytest

from control_osworld.analysis import tables as T
from control_osworld.testing.synthetic_tables import synthetic_dataset


def _decoded(codes, uni):
    uni = np.asarray(uni, dtype=object)
    return [None if c < 0 else uni[c] for c in codes]


@pytest.mark.parametrize("layout", ["blocks", "shuffled"])
def test_factorize_equals_pandas_on_every_layout_and_dtype(layout):
    rng = np.random.default_rng(0)
    blocks = np.repeat(np.array(["per_step_rules", None, "ft", "per_step_rules", "x" * 40], dtype=object), [900, 300, 5, 700, 100])
    values = blocks if layout == "blocks" else blocks[rng.permutation(blocks.size)]
    for col in (pd.Series(values, dtype=object), pd.Series(values, dtype="str"), pd.Series(values, dtype="category")):
        codes, uni = T._factorize(col)
        assert codes.dtype == np.int32
        assert _decoded(codes, uni) == [None if v is None else v for v in values]
        if not isinstance(col.dtype, pd.CategoricalDtype):
            ref, ref_uni = pd.factorize(col)
            assert np.array_equal(codes, ref) and list(uni) == list(ref_uni)  # first-appearance order kept


def test_one_encoding_for_both_kinds_equals_each_kind_alone():
    runs, scores = synthetic_dataset(120, seed=4)
    scores = scores.sample(frac=1, random_state=0).reset_index(drop=True)  # rows in no particular order
    scores.loc[:3, "run_id"] = "not-a-run"  # unmatched rows are left out
    both = T.score_rows(runs, scores)
    for kind in ("full_trajectory", "per_step"):
        alone = T._Rows(runs, scores, kind)
        shared = both[kind]
        assert shared.cells == alone.cells
        assert shared.n_unmatched == alone.n_unmatched
        for name in ("run", "codes", "step", "score"):
            assert np.array_equal(getattr(shared, name), getattr(alone, name), equal_nan=True), name
        assert shared.score_points() == alone.score_points()
        # every row decodes to its own run, monitor and inputs
        keep = scores[(scores.monitor_kind == kind) & (scores.run_id != "not-a-run")]
        got = sorted(zip(runs["run_id"].to_numpy()[shared.run], [shared.cells[c] for c in shared.codes]))
        assert got == sorted(zip(keep["run_id"], zip(keep["monitor"], keep["inputs"])))
    assert both["per_step"].n_unmatched + both["full_trajectory"].n_unmatched == 4


def test_cells_with_two_config_hashes_are_split_and_score_points_checked():
    runs, scores = synthetic_dataset(60, seed=1)
    ps = scores[scores.monitor_kind == "per_step"].copy()
    first = ps.monitor.iloc[0]
    sel = (ps.monitor == first) & (ps.inputs == "A")
    ps.loc[sel & (ps.step == 1), "config_hash"] = "otherhash0000"
    rows = T._Rows(runs, ps, "per_step")
    labels = [m for m, i in rows.cells if i == "A" and m.startswith(first)]
    assert len(labels) == 2 and all("[" in m for m in labels)
    ps.loc[sel & (ps.step == 2), "score_point"] = "post_action" if ps.loc[sel, "score_point"].iloc[0] == "pre_action" else "pre_action"
    with pytest.raises(ValueError, match="score_point"):
        T._Rows(runs, ps, "per_step").score_points()


def test_factorize_falls_back_when_neighbours_cannot_be_compared():
    class NoTruth(str):
        def __ne__(self, other):
            raise TypeError("ambiguous")

    values = np.array([NoTruth("a")] * 1500 + [NoTruth("b")] * 600, dtype=object)
    codes, uni = T._factorize(pd.Series(values, dtype=object))
    assert list(uni) == ["a", "b"] and codes.tolist() == [0] * 1500 + [1] * 600
