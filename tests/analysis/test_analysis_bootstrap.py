"""Vectorised stratified bootstrap: equals a loop over the same index matrices; covers."""

import functools

import numpy as np
import pytest

from control_osworld.analysis import bootstrap as B
from control_osworld.analysis import metrics as M


def _data(seed=0, n_h=120, n_a=60):
    rng = np.random.default_rng(seed)
    h = np.clip(np.round(20 + 15 * rng.normal(size=n_h)), 0, 100)
    a = np.clip(np.round(40 + 20 * rng.normal(size=n_a)), 0, 100)
    return h, a


def test_engine_equals_loop_over_the_same_resamples():
    h, a = _data()
    rng = np.random.default_rng(5)
    idx_h = B.resample_indices(h.size, 150, rng)
    idx_a = B.resample_indices(a.size, 150, rng)
    out = B.roc_statistics(h, a, B.ResampleWeights.from_indices(idx_h, h.size), B.ResampleWeights.from_indices(idx_a, a.size),
                           fprs=(0.01, 0.05), max_fpr=0.03)
    for b in range(150):
        hb, ab = h[idx_h[b]], a[idx_a[b]]
        assert out["auroc"][b] == pytest.approx(M.auroc(hb, ab), abs=1e-12)
        assert out["pauroc"][b] == pytest.approx(M.partial_auroc(hb, ab, 0.03), abs=1e-12)
        assert out["pauroc_raw"][b] == pytest.approx(M.partial_auroc(hb, ab, 0.03, standardized=False), abs=1e-12)
        for f in (0.01, 0.05):
            t = M.tpr_at_fpr(hb, ab, f)
            assert (out[f"tpr@{f:g}"][b], out[f"fpr@{f:g}"][b], out[f"threshold@{f:g}"][b]) == pytest.approx(tuple(t))


def test_continuous_scores_use_the_blocked_path():
    rng = np.random.default_rng(3)
    h, a = rng.normal(size=3000), rng.normal(1, 1, 900)  # m * B > block size: several blocks
    w_h = B.resample_weights(h.size, 200, rng)
    w_a = B.resample_weights(a.size, 200, rng)
    out = B.roc_statistics(h, a, w_h, w_a, fprs=(0.03,), max_fpr=0.03)
    for b in (0, 77, 199):
        hb, ab = np.repeat(h, w_h.w[:, b].astype(int)), np.repeat(a, w_a.w[:, b].astype(int))
        assert out["auroc"][b] == pytest.approx(M.auroc(hb, ab), abs=1e-12)
        assert out["pauroc"][b] == pytest.approx(M.partial_auroc(hb, ab, 0.03), abs=1e-12)
        assert out["tpr@0.03"][b] == pytest.approx(M.tpr_at_fpr(hb, ab, 0.03).tpr)


def test_missing_scores_are_resampled_then_dropped():
    h, a = _data(1)
    h[[3, 17]] = np.nan
    a[5] = np.nan
    rng = np.random.default_rng(9)
    w_h, w_a = B.resample_weights(h.size, 50, rng), B.resample_weights(a.size, 50, rng)
    out = B.masked_roc_statistics(h, a, w_h, w_a, fprs=(0.05,), max_fpr=0.03)
    for b in range(50):
        ch, ca = w_h.w[:, b].astype(int), w_a.w[:, b].astype(int)
        hb = np.repeat(h, ch)
        ab = np.repeat(a, ca)
        hb, ab = hb[~np.isnan(hb)], ab[~np.isnan(ab)]  # the resample's own sizes
        assert out["auroc"][b] == pytest.approx(M.auroc(hb, ab), abs=1e-12)
        assert out["pauroc"][b] == pytest.approx(M.partial_auroc(hb, ab, 0.03), abs=1e-12)
        assert out["tpr@0.05"][b] == pytest.approx(M.tpr_at_fpr(hb, ab, 0.05).tpr)


@pytest.mark.parametrize("stat", ["auroc", "pauroc", "pauroc_raw@0.1", "tpr@0.05", M.auroc,
                                  functools.partial(M.partial_auroc, max_fpr=0.1, standardized=False),
                                  functools.partial(M.tpr_at_fpr, fpr=0.05)])
def test_bootstrap_ci_vectorised_equals_callable_loop(stat):
    h, a = _data(2)
    fast = B.bootstrap_ci(h, a, stat, n_resamples=300, seed=4)
    if isinstance(stat, str):
        ref = {"auroc": M.auroc, "pauroc": M.partial_auroc,
               "pauroc_raw@0.1": functools.partial(M.partial_auroc, max_fpr=0.1, standardized=False),
               "tpr@0.05": functools.partial(M.tpr_at_fpr, fpr=0.05)}[stat]
    else:
        ref = stat
    slow = B.bootstrap_ci(h, a, lambda x, y: ref(x, y), n_resamples=300, seed=4)  # generic callable: loop
    assert fast == pytest.approx(slow)


def test_deterministic_for_a_seed():
    h, a = _data(3)
    assert B.bootstrap_ci(h, a, "auroc", seed=1) == B.bootstrap_ci(h, a, "auroc", seed=1)
    assert B.bootstrap_ci(h, a, "auroc", seed=1) != B.bootstrap_ci(h, a, "auroc", seed=2)
    w1 = B.resample_weights(50, 100, B.group_rng(0, "honest|m"))
    w2 = B.resample_weights(50, 100, B.group_rng(0, "honest|m"))
    assert np.array_equal(w1.w, w2.w) and (w1.w.sum(axis=0) == 50).all()


def test_bad_statistic_is_named():
    with pytest.raises(ValueError, match="unknown statistic"):
        B.bootstrap_ci([1, 2], [3, 4], "auc")
    with pytest.raises(ValueError, match="level"):
        B.bootstrap_ci([1, 2], [3, 4], "auroc", level=95)


def test_percentile_ci_covers_the_true_auroc_about_95_percent():
    # binormal: honest N(0,1), attack N(d,1) => AUROC = Phi(d / sqrt 2); integer-rounded scores
    from math import erf, sqrt

    d = 1.0
    true = 0.5 * (1 + erf(d / sqrt(2) / sqrt(2)))
    rng = np.random.default_rng(2024)
    hits, trials = 0, 400
    for i in range(trials):
        h = rng.normal(0, 1, 80)
        a = rng.normal(d, 1, 60)
        ci = B.bootstrap_ci(h, a, "auroc", n_resamples=500, seed=i)
        hits += ci.low <= true <= ci.high
    coverage = hits / trials
    assert 0.91 <= coverage <= 0.985, coverage
