"""Discrete-time competing hazards over agent steps (competing-hazards paper, section 3).

Steps t = 1..K (K = the step budget). A run ends at its first terminal event:
completed (S), stopped (G, a safe stop), escaped (E, the side task took effect) or
terminated (D, a live monitor/protocol ended it); a run still going after step K is
right-censored at K (administrative censoring); ``error`` (infrastructure failure, X) is
kept apart.

Conventions (exact discrete-time Aalen-Johansen, no jittering of tied steps):

* A run whose outcome happened at step t is at risk at steps 1..t. A run censored at step c
  is at risk at steps 1..c (it survived step c without an event): at a tied step, events
  come before censoring.
* Errors: an error's step s is the step the infrastructure failed in (0: before step 1, e.g.
  setup; budget + 1: after the run's end, e.g. scoring): steps 1..s-1 completed, step s did
  not. ``errors="exclude"`` (default) drops error runs from the estimator and counts them
  separately; ``errors="censor"`` treats an error at step s as censoring after step s-1:
  the run was at risk through s-1 (it survived those steps) and the failed step's outcome
  is unknown. An error at step 0 or 1 is never at risk.
* hazard_c(t) = events_c(t) / at_risk(t); S(t) = prod_{j<=t} (1 - sum_c hazard_c(j));
  F_c(t) = sum_{j<=t} S(j-1) hazard_c(j).
* Attempts (where recorded): a_t = attempts at t / at risk at t; b_t = effective attempts
  (escapes) at t / attempts at t; e_t = a_t * b_t.
* Constant hazards: the MLE of each cause's per-step hazard is events_c / person-steps at
  risk; F_E(K) = (e/h)(1 - (1-h)^K), F_E(inf) = e/h.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from control_osworld.trajectory import OUTCOMES

__all__ = [
    "CAUSES",
    "OUTCOMES",
    "AalenJohansen",
    "aalen_johansen",
    "cumulative_incidence",
    "bootstrap_cumulative_incidence",
    "attempt_rates",
    "ConstantHazards",
    "constant_hazard_fit",
    "constant_hazard_incidence",
    "k_max",
    "MultiAgentRisk",
    "multi_agent_risk",
    "ConstantHazardCheck",
    "constant_hazard_check",
    "GOF_ALPHA",
]

CAUSES = ("completed", "stopped", "escaped", "terminated")
ERRORS_MODES = ("exclude", "censor")


def _prepare(steps, outcomes, budget, errors):
    """(last_at_risk_step, cause index or -1 for censoring, n_error) per usable run."""
    steps = np.asarray(steps)
    outcomes = np.asarray(outcomes, dtype=object)
    if steps.shape != outcomes.shape or steps.ndim != 1:
        raise ValueError("steps and outcomes must be 1-D and of the same length")
    if errors not in ERRORS_MODES:
        raise ValueError(f"errors must be one of {ERRORS_MODES}, got {errors!r}")
    budget = int(budget)
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    bad = [o for o in set(outcomes.tolist()) if o not in OUTCOMES]
    if bad:
        raise ValueError(f"outcomes: unknown value(s) {sorted(map(str, bad))}; allowed: {', '.join(OUTCOMES)}")
    try:
        st = steps.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"steps: not numeric ({exc})") from None
    if np.any(~np.isfinite(st)) or np.any(st != np.round(st)):
        raise ValueError("steps: every step must be a whole number")
    st = st.astype(np.int64)
    is_err = outcomes == "error"
    n_error = int(is_err.sum())
    cause = np.full(st.size, -1, dtype=np.int64)
    for i, c in enumerate(CAUSES):
        cause[outcomes == c] = i
    ev = cause >= 0
    if np.any(ev & ((st < 1) | (st > budget))):
        raise ValueError(f"steps: an event step is outside 1..{budget} (budget)")
    cens = outcomes == "censored"
    if np.any(cens & ((st < 0) | (st > budget))):
        raise ValueError(f"steps: a censoring step is outside 0..{budget} (budget)")
    if errors == "censor":
        if np.any(is_err & ((st < 0) | (st > budget + 1))):
            raise ValueError(f"steps: an error step is outside 0..{budget + 1} (budget + 1)")
        last = np.where(is_err, np.maximum(st - 1, 0), st)
        keep = np.ones(st.size, dtype=bool)
    else:
        last = st
        keep = ~is_err
    return last[keep], cause[keep], n_error


def _estimate(counts: np.ndarray, budget: int):
    """Aalen-Johansen from count arrays. counts: [budget+1, 5, B] with axis 1 = the four
    causes then censoring, axis 0 = last step at risk (0..budget)."""
    events = counts[1:, :4, :]  # [K, 4, B]
    exits = counts.sum(axis=1)  # [K+1, B] runs whose last step at risk is t
    at_risk = np.cumsum(exits[::-1], axis=0)[::-1][1:]  # at risk at t = last step >= t
    with np.errstate(invalid="ignore", divide="ignore"):
        hazards = np.where(at_risk[:, None, :] > 0, events / np.maximum(at_risk[:, None, :], 1), 0.0)
    surv = np.cumprod(1.0 - hazards.sum(axis=1), axis=0)  # [K, B]
    surv_before = np.vstack([np.ones((1, surv.shape[1])), surv[:-1]])
    cif = np.cumsum(surv_before[:, None, :] * hazards, axis=0)
    return at_risk, events, hazards, surv, cif


def _counts(last, cause, budget, w=None):
    """[budget+1, 5, B] counts (weights w [n, B] for bootstrap resamples)."""
    slot = np.where(cause >= 0, cause, 4)
    flat = last * 5 + slot
    size = (budget + 1) * 5
    if w is None:
        return np.bincount(flat, minlength=size).astype(np.float64).reshape(budget + 1, 5, 1)
    onehot = sp.csr_matrix((np.ones(flat.size, dtype=np.float32), (flat, np.arange(flat.size))), shape=(size, flat.size))
    return np.asarray(onehot @ w, dtype=np.float64).reshape(budget + 1, 5, -1)


@dataclass
class AalenJohansen:
    """Exact discrete-time Aalen-Johansen estimate over steps 1..budget."""

    budget: int
    at_risk: np.ndarray  # [K]
    events: np.ndarray  # [K, 4]
    censored: np.ndarray  # [K] censored after step t
    hazards: np.ndarray  # [K, 4]
    survival: np.ndarray  # [K] S(t)
    cif: np.ndarray  # [K, 4] F_c(t)
    n_runs: int
    n_error: int
    errors: str

    def table(self) -> pd.DataFrame:
        idx = pd.RangeIndex(1, self.budget + 1, name="step")
        df = pd.DataFrame({"at_risk": self.at_risk.astype(np.int64)}, index=idx)
        for i, c in enumerate(CAUSES):
            df[f"n_{c}"] = self.events[:, i].astype(np.int64)
        df["n_censored"] = self.censored.astype(np.int64)
        for i, c in enumerate(CAUSES):
            df[f"h_{c}"] = self.hazards[:, i]
        df["survival"] = self.survival
        for i, c in enumerate(CAUSES):
            df[f"F_{c}"] = self.cif[:, i]
        return df


def aalen_johansen(steps, outcomes, budget: int, errors: str = "exclude") -> AalenJohansen:
    """Aalen-Johansen estimate with at-risk counts, events, hazards, survival and CIF.

    steps: the step of each run's outcome (for censored runs, the last observed step,
    normally the budget); outcomes: names from OUTCOMES; see the module docstring.
    """
    last, cause, n_error = _prepare(steps, outcomes, budget, errors)
    counts = _counts(last, cause, int(budget))
    at_risk, events, hazards, surv, cif = _estimate(counts, int(budget))
    censored = counts[1:, 4, 0]
    return AalenJohansen(int(budget), at_risk[:, 0], events[:, :, 0], censored, hazards[:, :, 0], surv[:, 0], cif[:, :, 0], int(last.size), n_error, errors)


def cumulative_incidence(steps, outcomes, budget: int, errors: str = "exclude") -> pd.DataFrame:
    """Cumulative incidence F_c(t): a table indexed by step 1..budget, one column per cause
    (completed, stopped, escaped, terminated). See the module docstring for conventions."""
    aj = aalen_johansen(steps, outcomes, budget, errors)
    return pd.DataFrame(aj.cif, index=pd.RangeIndex(1, aj.budget + 1, name="step"), columns=list(CAUSES))


def bootstrap_cumulative_incidence(steps, outcomes, budget: int, n_resamples: int = 2000, seed: int = 0, level: float = 0.95, errors: str = "exclude", weights=None):
    """Percentile CIs of F_c(t) from resampling runs (vectorised).

    Returns (low, high) arrays [budget, 4]. weights: optional ResampleWeights-like object
    with attribute ``w`` [n_usable_runs, B] (to share resamples with other statistics).
    """
    from .bootstrap import resample_weights

    last, cause, _ = _prepare(steps, outcomes, budget, errors)
    if last.size == 0:
        nan = np.full((int(budget), 4), np.nan)
        return nan, nan.copy()
    w = weights.w if weights is not None else resample_weights(last.size, n_resamples, np.random.default_rng(seed)).w
    cif = _estimate(_counts(last, cause, int(budget), w), int(budget))[4]  # [K, 4, B]
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(cif, [tail, 1.0 - tail], axis=2)
    return lo, hi


def attempt_rates(steps, outcomes, attempt_steps: Sequence, budget: int, errors: str = "exclude") -> pd.DataFrame:
    """Per-step attempt propensity a_t and boundary yield b_t, from runs that record attempts.

    attempt_steps: per run, the steps with an out-of-scope attempt (blocked or effective),
    or None when the run does not record attempts (such runs are left out). An escape at
    step t is an effective attempt at t even if t is missing from the list. Attempts after
    a run's last step at risk are ignored. Returns a table indexed by step with at_risk,
    attempts, effective, blocked, a, b (NaN where the denominator is 0).
    """
    steps = np.asarray(steps)
    outcomes = np.asarray(outcomes, dtype=object)
    if len(attempt_steps) != steps.size:
        raise ValueError("attempt_steps must have one entry per run")
    recorded = np.array([a is not None and not (isinstance(a, float) and math.isnan(a)) for a in attempt_steps], dtype=bool)
    budget = int(budget)
    k = np.arange(1, budget + 1)
    at_risk = np.zeros(budget)
    attempts = np.zeros(budget)
    effective = np.zeros(budget)
    if recorded.any():
        sel = np.flatnonzero(recorded)
        last, cause, _ = _prepare(steps[sel], outcomes[sel], budget, errors)
        kept = sel if errors == "censor" else sel[outcomes[sel] != "error"]
        for run, lst, c in zip(kept, last, cause):
            at_risk[:lst] += 1
            att = {int(s) for s in attempt_steps[run] if 1 <= int(s) <= lst}
            if c == CAUSES.index("escaped"):
                att.add(int(lst))
                effective[lst - 1] += 1
            for s in att:
                attempts[s - 1] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(at_risk > 0, attempts / np.where(at_risk > 0, at_risk, 1), np.nan)
        b = np.where(attempts > 0, effective / np.where(attempts > 0, attempts, 1), np.nan)
    return pd.DataFrame(
        {"at_risk": at_risk.astype(np.int64), "attempts": attempts.astype(np.int64), "effective": effective.astype(np.int64),
         "blocked": (attempts - effective).astype(np.int64), "a": a, "b": b},
        index=pd.Index(k, name="step"),
    )


class ConstantHazards(NamedTuple):
    completed: float  # s
    stopped: float  # g
    escaped: float  # e
    terminated: float  # d
    total: float  # h = s + g + e + d
    person_steps: int
    events: tuple[int, int, int, int]


def constant_hazard_fit(steps, outcomes, budget: int, errors: str = "exclude") -> ConstantHazards:
    """MLE of constant per-step cause-specific hazards: events_c / person-steps at risk."""
    last, cause, _ = _prepare(steps, outcomes, budget, errors)
    person_steps = int(last.sum())
    ev = tuple(int(np.sum(cause == i)) for i in range(4))
    rates = [e / person_steps if person_steps else math.nan for e in ev]
    s, g, e, d = rates
    total = float(sum(rates)) if person_steps else math.nan
    return ConstantHazards(s, g, e, d, total, person_steps, (ev[0], ev[1], ev[2], ev[3]))


def _check_rates(e, h):
    e = np.asarray(e, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64)
    if np.any((e < 0) | (h > 1) | (e > h + 1e-15)):
        raise ValueError("need 0 <= e <= h <= 1 (e: escape hazard, h: total hazard)")
    return e, h


def constant_hazard_incidence(e, h, budget):
    """F_E(K) = (e/h)(1 - (1-h)^K) for constant hazards; budget may be math.inf (F = e/h).

    Vectorised over array-like arguments; returns a float for scalar input.
    """
    e, h = _check_rates(e, h)
    k = np.asarray(budget, dtype=np.float64)
    if np.any(k < 0):
        raise ValueError("budget must be >= 0")
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(h > 0, e / np.where(h > 0, h, 1.0), 0.0)
        tail = np.where(np.isinf(k), 0.0, np.power(1.0 - h, np.where(np.isinf(k), 0.0, k)))
    out = ratio * (1.0 - tail)
    return float(out) if out.ndim == 0 else out


def k_max(e: float, h: float, eps: float) -> float:
    """Largest budget K with F_E(K) <= eps under constant hazards (seed eq. for K_max).

    floor(ln(1 - eps*h/e) / ln(1 - h)) when eps < e/h; math.inf when eps >= e/h (no finite
    budget exceeds the tolerance), including e = 0. A bound conditional on the model.
    """
    e, h = (float(x) for x in _check_rates(e, h))
    eps = float(eps)
    if not eps >= 0:
        raise ValueError("eps must be >= 0")
    if e == 0 or eps >= e / h:
        return math.inf
    if h >= 1.0:
        return 0  # every run ends at step 1; F_E(1) = e > eps
    k = math.floor(math.log1p(-eps * h / e) / math.log1p(-h))
    # guard the floor against rounding at exact integers
    while k > 0 and constant_hazard_incidence(e, h, k) > eps:
        k -= 1
    while constant_hazard_incidence(e, h, k + 1) <= eps:
        k += 1
    return k


class MultiAgentRisk(NamedTuple):
    independent: float  # 1 - (1 - F)^N
    lower: float  # F: fully dependent agents
    upper: float  # min(1, N F): union bound


def multi_agent_risk(f_e, n) -> MultiAgentRisk:
    """Probability that at least one of N agents escapes, each with incidence F_E(K).

    independent = 1 - (1 - F)^N (own budgets, no sharing, conditionally independent);
    under arbitrary dependence it lies in [F, min(1, N F)]. Vectorised.
    """
    f = np.asarray(f_e, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    # An incidence summed from hazards may land an ulp outside [0, 1] (1.0000000000000002 when
    # every run escapes): that is rounding, not a bad argument.
    eps = 1e-9
    if np.any((f < -eps) | (f > 1 + eps)):
        raise ValueError("f_e must be in [0, 1]")
    f = np.clip(f, 0.0, 1.0)
    if np.any(n < 1):
        raise ValueError("n must be >= 1")
    ind = 1.0 - np.power(1.0 - f, n)
    lo = np.broadcast_to(f, ind.shape).astype(np.float64)
    hi = np.minimum(1.0, n * f)
    conv = (lambda x: float(x)) if ind.ndim == 0 else (lambda x: x)
    return MultiAgentRisk(conv(ind), conv(lo), conv(hi))


class ConstantHazardCheck(NamedTuple):
    """Goodness of fit of the constant-hazard model, checked before any projection from it."""

    verdict: str  # "fits" | "does not fit" | "untestable"
    lr_statistic: float  # 2 (ll per-step hazards - ll constant hazards)
    df: int
    p_value: float
    fitted: np.ndarray  # [K] constant-hazard F_E(t), t = 1..K
    observed: np.ndarray  # [K] Aalen-Johansen F_E(t)
    max_gap: float  # max_t |observed - fitted|
    max_gap_step: int
    outside_band: int  # steps where the fitted F_E(t) leaves the AJ pointwise CI (-1: no band given)
    reason: str


GOF_ALPHA = 0.05


def constant_hazard_check(steps, outcomes, budget: int, errors: str = "exclude", band=None,
                          alpha: float = GOF_ALPHA) -> ConstantHazardCheck:
    """Observed (Aalen-Johansen) against constant-hazard F_E per step, with a verdict.

    Test: likelihood ratio of the discrete-time model with one hazard per cause and step
    (the Aalen-Johansen estimate is its MLE) against one hazard per cause for all steps
    (``constant_hazard_fit``); df = (steps with runs at risk - 1) x (causes with events),
    chi-square reference. band: optional (low, high) [K] pointwise CI of the AJ F_E(t); the
    fit must also stay inside it at every step. Verdict "fits" only when the test does not
    reject at alpha and the fit stays in the band; "untestable" without events or with
    fewer than two steps at risk (a projection cannot be checked, so it is withheld too).
    """
    from scipy.stats import chi2

    budget = int(budget)
    aj = aalen_johansen(steps, outcomes, budget, errors)
    fit = constant_hazard_fit(steps, outcomes, budget, errors)
    observed = aj.cif[:, CAUSES.index("escaped")]
    t = np.arange(1, budget + 1)
    ok = fit.person_steps > 0 and fit.total == fit.total and fit.total > 0
    fitted = constant_hazard_incidence(fit.escaped, fit.total, t) if ok else np.full(budget, np.nan)
    fitted = np.asarray(fitted, dtype=np.float64)
    gap = np.abs(observed - fitted)
    gi = int(np.nanargmax(gap)) if ok and np.isfinite(gap).any() else 0
    max_gap = float(gap[gi]) if ok else math.nan
    n_t = aj.at_risk.astype(np.float64)
    d = aj.events  # [K, 4]
    active = n_t > 0
    causes = int(np.count_nonzero(d.sum(axis=0) > 0))
    dfree = (int(active.sum()) - 1) * causes
    if not ok or dfree <= 0:
        why = "no events" if not ok or causes == 0 else "fewer than two steps with runs at risk"
        return ConstantHazardCheck("untestable", math.nan, max(dfree, 0), math.nan, fitted, observed, max_gap, gi + 1, -1, why)

    def xlogy(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x > 0, x * np.log(np.where(y > 0, y, 1.0)), 0.0)

    n_a, d_a = n_t[active], d[active]
    rest = n_a - d_a.sum(axis=1)
    ll1 = float(xlogy(d_a, d_a / n_a[:, None]).sum() + xlogy(rest, rest / n_a).sum())
    big_n = float(fit.person_steps)
    tot = d.sum(axis=0)
    none = big_n - float(tot.sum())
    ll0 = float(xlogy(tot, tot / big_n).sum() + xlogy(np.array(none), np.array(none / big_n)))
    lr = max(0.0, 2.0 * (ll1 - ll0))
    p = float(chi2.sf(lr, dfree))
    outside = -1
    if band is not None:
        lo, hi = (np.asarray(x, dtype=np.float64) for x in band)
        tol = 1e-12
        outside = int(np.count_nonzero(active & ((fitted < lo - tol) | (fitted > hi + tol))))
    reasons = []
    if p < alpha:
        reasons.append(f"constant hazards rejected (LR {lr:.1f}, df {dfree}, p {p:.2g} < {alpha:g})")
    if outside > 0:
        reasons.append(f"fitted F_E(t) outside the AJ {'' if band is None else 'pointwise '}CI at {outside} step(s)")
    verdict = "does not fit" if reasons else "fits"
    if not reasons:
        reasons.append(f"LR {lr:.1f}, df {dfree}, p {p:.2g} >= {alpha:g}" + ("; fit inside the AJ CI at every step" if outside == 0 else ""))
    return ConstantHazardCheck(verdict, lr, dfree, p, fitted, observed, max_gap, gi + 1, outside, "; ".join(reasons))
