"""Detection metrics against scikit-learn and brute force over every threshold."""

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from control_osworld.analysis import metrics as M


def _samples(rng, n_h, n_a, integer):
    h = rng.normal(0, 1, n_h)
    a = rng.normal(0.8, 1.2, n_a)
    if integer:  # 0-10 scores: many ties within and between classes
        h = np.clip(np.round(3 + 2 * h), 0, 10)
        a = np.clip(np.round(3 + 2 * a), 0, 10)
    return h, a


def _brute_auroc(h, a):
    return sum((x > y) + 0.5 * (x == y) for x in a for y in h) / (len(a) * len(h))


def _brute_tpr(h, a, alpha):
    """Every candidate threshold: the most permissive one (flag > t) whose FPR stays <= floor(alpha n)/n."""
    k = math.floor(alpha * len(h) + 1e-9)
    best = None
    for t in sorted(set(h) | {-math.inf}):
        fp = sum(y > t for y in h)
        if fp <= k and (best is None or t < best):
            best = t
    return np.mean([x > best for x in a]), np.mean([y > best for y in h]), best


def _brute_partial_raw(h, a, max_fpr):
    """Raw partial area: ROC from every threshold, trapezoids, interpolated at max_fpr."""
    pts = [(0.0, 0.0)]
    for t in sorted(set(h) | set(a), reverse=True):
        pts.append((np.mean([y >= t for y in h]), np.mean([x >= t for x in a])))
    area = 0.0
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 >= max_fpr:
            break
        if x1 > max_fpr:
            y1 = y0 + (y1 - y0) * (max_fpr - x0) / (x1 - x0)
            x1 = max_fpr
        area += (x1 - x0) * (y0 + y1) / 2
    return area / max_fpr


@pytest.mark.parametrize("integer", [False, True])
def test_auroc_and_standardised_pauc_match_sklearn(integer):
    rng = np.random.default_rng(7)
    for _ in range(60):
        h, a = _samples(rng, rng.integers(2, 80), rng.integers(2, 80), integer)
        y = np.r_[np.zeros(h.size), np.ones(a.size)]
        s = np.r_[h, a]
        assert M.auroc(h, a) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        for mf in (0.03, 0.1, 0.5):
            assert M.partial_auroc(h, a, mf) == pytest.approx(roc_auc_score(y, s, max_fpr=mf), abs=1e-12)


@pytest.mark.parametrize("integer", [False, True])
def test_small_samples_against_brute_force(integer):
    rng = np.random.default_rng(11)
    for _ in range(40):
        h, a = _samples(rng, rng.integers(1, 25), rng.integers(1, 25), integer)
        assert M.auroc(h, a) == pytest.approx(_brute_auroc(h, a), abs=1e-12)
        for mf in (0.03, 0.2, 0.6):
            assert M.partial_auroc(h, a, mf, standardized=False) == pytest.approx(_brute_partial_raw(h, a, mf), abs=1e-12)
        for alpha in (0.01, 0.05, 0.2, 0.5):
            tpr, fpr, thr = M.tpr_at_fpr(h, a, alpha)
            bt, bf, bthr = _brute_tpr(h, a, alpha)
            assert (tpr, fpr, thr) == pytest.approx((bt, bf, bthr))


def test_raw_and_standardised_conventions():
    h = np.arange(100.0)
    assert M.partial_auroc(h, h + 1000, 0.03, standardized=False) == 1.0  # perfect
    assert M.partial_auroc(h, h + 1000, 0.03) == pytest.approx(1.0)
    assert M.partial_auroc(h, h - 1000, 0.03, standardized=False) == 0.0
    # worst case: raw area 0 -> McClish 0.5 (1 + (0 - a_min) / (a_max - a_min)), a_min = 0.03**2 / 2
    assert M.partial_auroc(h, h - 1000, 0.03) == pytest.approx(0.5 * (1 - 0.00045 / (0.03 - 0.00045)))
    # a chance-level classifier (identical distributions, all tied) sits at 0.5 McClish, max_fpr/2 raw
    z = np.zeros(50)
    assert M.partial_auroc(z, z, 0.03) == pytest.approx(0.5)
    assert M.partial_auroc(z, z, 0.03, standardized=False) == pytest.approx(0.015)


def test_tpr_rule_with_integer_scores_reports_achieved_fpr():
    # 100 honest scores: 95 zeros, 5 tens. FPR 3%: k = 3, tau = 4th largest = 10, so nothing
    # above tau: achieved FPR 0, not 3 %. A naive >= quantile rule would flag all five tens (5 %).
    h = np.r_[np.zeros(95), np.full(5, 10.0)]
    a = np.r_[np.full(10, 10.0), np.full(10, 5.0)]
    tpr, fpr, thr = M.tpr_at_fpr(h, a, 0.03)
    assert (tpr, fpr, thr) == (0.0, 0.0, 10.0)
    tpr, fpr, thr = M.tpr_at_fpr(h, a, 0.05)  # k = 5: tau = 6th largest = 0
    assert (tpr, fpr, thr) == (1.0, 0.05, 0.0)
    # floor with float slack: 0.29 * 100 must give k = 29, not 28
    assert M.allowed_false_positives(0.29, 100) == 29


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="honest"):
        M.auroc([], [1.0])
    with pytest.raises(ValueError, match="attack.*missing"):
        M.auroc([1.0], [np.nan])
    with pytest.raises(ValueError, match="fpr"):
        M.tpr_at_fpr([1.0], [2.0], 1.5)
    with pytest.raises(ValueError, match="max_fpr"):
        M.partial_auroc([1.0], [2.0], 0)
