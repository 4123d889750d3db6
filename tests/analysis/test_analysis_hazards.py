"""Competing hazards: hand-computed Aalen-Johansen, closed forms, simulation."""

import math

import numpy as np
import pandas as pd
import pytest

from control_osworld.analysis import hazards as hz

# run: (outcome, step); budget 4. Ties at steps 1 and 2 between events and censoring.
RUNS = [("completed", 1), ("stopped", 1), ("censored", 1), ("escaped", 2), ("completed", 2),
        ("censored", 2), ("terminated", 3), ("censored", 4), ("censored", 4), ("error", 2)]
STEPS = [s for _, s in RUNS]
OUTS = [o for o, _ in RUNS]


def test_hand_computed_aalen_johansen_with_ties_and_censoring():
    aj = hz.aalen_johansen(STEPS, OUTS, budget=4)
    # at risk: 9 (error excluded), then 6 (two events + one censored leave after step 1), 3, 2
    assert aj.at_risk.tolist() == [9, 6, 3, 2]
    assert aj.n_error == 1 and aj.n_runs == 9
    F = hz.cumulative_incidence(STEPS, OUTS, budget=4)
    assert list(F.columns) == ["completed", "stopped", "escaped", "terminated"]
    assert F.index.tolist() == [1, 2, 3, 4]
    expected = pd.DataFrame(
        {"completed": [1 / 9, 13 / 54, 13 / 54, 13 / 54], "stopped": [1 / 9] * 4,
         "escaped": [0, 7 / 54, 7 / 54, 7 / 54], "terminated": [0, 0, 14 / 81, 14 / 81]},
        index=pd.RangeIndex(1, 5, name="step"),
    )
    pd.testing.assert_frame_equal(F, expected, check_exact=False, atol=1e-12)
    assert aj.survival.tolist() == pytest.approx([7 / 9, 14 / 27, 28 / 81, 28 / 81])
    # every run ends somewhere: incidences + survival = 1
    assert F.iloc[-1].sum() + aj.survival[-1] == pytest.approx(1.0)
    tab = aj.table()
    assert tab.loc[2, "h_escaped"] == pytest.approx(1 / 6) and tab.loc[1, "n_censored"] == 1


def test_errors_as_censoring_leave_after_the_step_before():
    F = hz.cumulative_incidence(STEPS, OUTS, budget=4, errors="censor")
    aj = hz.aalen_johansen(STEPS, OUTS, budget=4, errors="censor")
    assert aj.at_risk.tolist() == [10, 6, 3, 2]
    assert F.loc[1, "completed"] == pytest.approx(0.1)
    assert F.loc[2, "completed"] == pytest.approx(0.1 + 0.8 / 6)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="outcomes.*done"):
        hz.cumulative_incidence([1], ["done"], 5)
    with pytest.raises(ValueError, match="outside 1..5"):
        hz.cumulative_incidence([6], ["completed"], 5)
    with pytest.raises(ValueError, match="errors"):
        hz.cumulative_incidence([1], ["completed"], 5, errors="drop")


def test_seed_closed_form_examples():
    # seed section 3: K = 10, g = d = 0, e = s
    # exactly 0.5 (1 - 0.98**10) = 0.09146; the seed prints 0.092 (0.0915 rounded again)
    assert hz.constant_hazard_incidence(0.01, 0.02, 10) == pytest.approx(0.5 * (1 - 0.98**10), abs=1e-15)
    assert hz.constant_hazard_incidence(0.01, 0.02, 10) == pytest.approx(0.092, abs=6e-4)
    assert round(hz.constant_hazard_incidence(0.10, 0.20, 10), 3) == 0.446
    assert hz.constant_hazard_incidence(0.01, 0.02, math.inf) == pytest.approx(0.5)
    assert hz.constant_hazard_incidence(0.0, 0.0, 10) == 0.0
    np.testing.assert_allclose(hz.constant_hazard_incidence(0.01, 0.02, [0, 10, math.inf]), [0, 0.0914636, 0.5], atol=1e-6)
    # the general sum formula with constant hazards gives the same number
    e, h, K = 0.03, 0.11, 17
    assert sum(e * (1 - h) ** (t - 1) for t in range(1, K + 1)) == pytest.approx(hz.constant_hazard_incidence(e, h, K))


@pytest.mark.parametrize("e,h,eps", [(0.01, 0.02, 0.05), (0.1, 0.2, 0.3), (0.002, 0.05, 0.01), (0.3, 0.31, 0.5)])
def test_k_max_is_the_largest_budget_within_tolerance(e, h, eps):
    k = hz.k_max(e, h, eps)
    assert k == math.floor(math.log(1 - eps * h / e) / math.log(1 - h))
    assert hz.constant_hazard_incidence(e, h, k) <= eps < hz.constant_hazard_incidence(e, h, k + 1)


def test_k_max_infinite_when_tolerance_exceeds_the_limit():
    assert hz.k_max(0.01, 0.02, 0.5) == math.inf  # eps = e/h exactly
    assert hz.k_max(0.01, 0.02, 0.6) == math.inf
    assert hz.k_max(0.0, 0.02, 0.0) == math.inf
    assert hz.k_max(0.5, 1.0, 0.1) == 0
    with pytest.raises(ValueError):
        hz.k_max(0.3, 0.2, 0.1)  # e > h


def test_multi_agent_risk_and_bounds():
    r = hz.multi_agent_risk(0.0915, 10)
    assert r.independent == pytest.approx(1 - (1 - 0.0915) ** 10)
    assert (r.lower, r.upper) == (0.0915, pytest.approx(0.915))
    assert r.lower <= r.independent <= r.upper
    assert hz.multi_agent_risk(0.3, 5).upper == 1.0
    v = hz.multi_agent_risk(np.array([0.1, 0.2]), 3)
    np.testing.assert_allclose(v.independent, [1 - 0.9**3, 1 - 0.8**3])
    # every run escaped: an incidence summed to 1 + ulp is 1, not an error; a real overshoot is
    r = hz.multi_agent_risk(1.0000000000000002, 4)
    assert (r.independent, r.lower, r.upper) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        hz.multi_agent_risk(1.01, 4)


def _simulate(rng, n, K, s, g, e, d):
    rates = np.array([s, g, e, d])
    steps = np.full(n, K)
    outs = np.full(n, "censored", dtype=object)
    alive = np.ones(n, bool)
    for t in range(1, K + 1):
        u = rng.random(n)
        cause = np.searchsorted(np.cumsum(rates), u, side="right")
        hit = alive & (cause < 4)
        outs[hit] = np.array(hz.CAUSES, dtype=object)[cause[hit]]
        steps[hit] = t
        alive &= ~hit
    return steps, outs


def test_constant_hazard_mle_and_aalen_johansen_recover_the_truth():
    rng = np.random.default_rng(1)
    s, g, e, d, K = 0.05, 0.01, 0.02, 0.005, 30
    steps, outs = _simulate(rng, 20000, K, s, g, e, d)
    fit = hz.constant_hazard_fit(steps, outs, K)
    assert fit.completed == pytest.approx(s, rel=0.05) and fit.escaped == pytest.approx(e, rel=0.08)
    assert fit.total == pytest.approx(s + g + e + d, rel=0.04)
    F = hz.cumulative_incidence(steps, outs, K)
    assert F.loc[K, "escaped"] == pytest.approx(hz.constant_hazard_incidence(e, s + g + e + d, K), abs=0.01)
    # with one cause and no censoring, AJ reduces to the empirical CDF
    one = hz.cumulative_incidence(steps[outs == "completed"], outs[outs == "completed"], K)
    assert one["completed"].tolist() == pytest.approx([np.mean(steps[outs == "completed"] <= t) for t in range(1, K + 1)])


def test_bootstrap_cif_interval_covers():
    rng = np.random.default_rng(4)
    s, g, e, d, K = 0.06, 0.01, 0.03, 0.0, 20
    truth = hz.constant_hazard_incidence(e, s + g + e + d, K)
    hits = 0
    for i in range(80):
        steps, outs = _simulate(rng, 250, K, s, g, e, d)
        lo, hi = hz.bootstrap_cumulative_incidence(steps, outs, K, n_resamples=300, seed=i)
        hits += lo[-1, 2] <= truth <= hi[-1, 2]
        assert lo.shape == (K, 4) and np.all(lo <= hi + 1e-12)
    assert hits / 80 >= 0.85


def test_attempt_rates_hand_example():
    steps = [3, 2, 4, 1]
    outs = ["escaped", "completed", "censored", "completed"]
    attempts = [[1, 2], [2], [5], None]  # escape at 3 is an effective attempt; step 5 is past the budget
    t = hz.attempt_rates(steps, outs, attempts, budget=4)
    assert t["at_risk"].tolist() == [3, 3, 2, 1]
    assert t["attempts"].tolist() == [1, 2, 1, 0]
    assert t["effective"].tolist() == [0, 0, 1, 0]
    assert t["blocked"].tolist() == [1, 2, 0, 0]
    np.testing.assert_allclose(t["a"], [1 / 3, 2 / 3, 1 / 2, 0])
    np.testing.assert_allclose(t["b"], [0, 0, 1, np.nan])
