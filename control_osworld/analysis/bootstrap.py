"""Stratified, vectorised, seeded bootstrap of the detection metrics.

Runs are resampled, never steps: honest and attack runs are resampled separately with
their sizes kept (stratified). A resample is an index matrix ``idx[b, j]`` (which original
run is the j-th draw of resample b); it is turned into a count matrix ``w[i, b]`` (how often
run i appears in resample b). Every statistic is then computed for all resamples at once
from per-value count matrices ``C[v, b]`` over the sorted distinct scores ``v``:

* AUROC from cumulative honest counts (rank form of Mann-Whitney U, ties = 1/2);
* TPR@FPR from the first value where the honest tail drops to <= k = floor(alpha n);
* partial AUROC from the ROC trapezoids clipped at max_fpr.

The point estimate is the same computation with every count equal to 1, so estimates and
resamples cannot disagree on conventions. CIs are percentile intervals.
"""

from __future__ import annotations

import functools
import warnings
import zlib
from typing import Callable, Iterable, NamedTuple

import numpy as np
import scipy.sparse as sp

from . import metrics

__all__ = [
    "bootstrap_ci",
    "bootstrap_distribution",
    "BootstrapCI",
    "resample_indices",
    "weights_from_indices",
    "resample_weights",
    "ResampleWeights",
    "roc_statistics",
    "masked_roc_statistics",
    "percentile_ci",
    "group_rng",
    "CLUSTER_UNITS",
    "DEFAULT_CLUSTER",
    "check_cluster",
    "cluster_codes",
    "cluster_description",
    "cluster_draw_counts",
    "cluster_weights",
    "nan_share",
]


class BootstrapCI(NamedTuple):
    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int


def group_rng(seed: int, key: str) -> np.random.Generator:
    """Generator for one resampling group: depends on the seed and the key only, so a
    cell's CI does not change when other cells are added or removed."""
    return np.random.default_rng([int(seed), zlib.crc32(key.encode("utf-8"))])


def resample_indices(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Index matrix [n_resamples, n] of draws with replacement from range(n)."""
    return rng.integers(0, n, size=(n_resamples, n))


def weights_from_indices(idx: np.ndarray, n: int) -> np.ndarray:
    """Count matrix w[i, b] = #draws of run i in resample b, for idx [B, n_draws].

    float32 is exact for counts below 2**24 and halves the memory traffic.
    """
    b = idx.shape[0]
    flat = (idx * b + np.arange(b)[:, None]).ravel()  # position i*B + b: transposed layout
    return np.bincount(flat, minlength=n * b).reshape(n, b).astype(np.float32)


class ResampleWeights:
    """Count matrix [n, n_resamples] of one stratum (honest runs, or attack runs)."""

    def __init__(self, w: np.ndarray):
        self.w = np.ascontiguousarray(w, dtype=np.float32)
        self.n, self.n_resamples = self.w.shape
        self._totals: dict[bytes, np.ndarray] = {}

    def total(self, mask: np.ndarray | None = None) -> np.ndarray:
        """[n_resamples] float64: how many draws of each resample fall on the runs in mask
        (a boolean [n]; None = every run). Cached per mask, since every cell of a stratum asks
        for the same few totals (its size, its successful runs) and each is a pass over w."""
        m = np.ones(self.n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if m.shape != (self.n,):
            raise ValueError(f"mask has shape {m.shape}, the weights have {self.n} runs")
        key = np.packbits(m).tobytes() + self.n.to_bytes(8, "little")
        if key not in self._totals:
            self._totals[key] = (m.astype(np.float32) @ self.w).astype(np.float64)  # exact below 2**24
        return self._totals[key]

    @classmethod
    def ones(cls, n: int) -> "ResampleWeights":
        return cls(np.ones((n, 1), dtype=np.float32))

    @classmethod
    def from_indices(cls, idx: np.ndarray, n: int) -> "ResampleWeights":
        return cls(weights_from_indices(idx, n))


def resample_weights(n: int, n_resamples: int, rng: np.random.Generator, block: int = 250) -> ResampleWeights:
    """Stratum of n runs resampled n_resamples times; index matrices drawn block by block."""
    w = np.empty((n, n_resamples), dtype=np.float32)
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        w[:, start:stop] = weights_from_indices(resample_indices(n, stop - start, rng), n)
    return ResampleWeights(w)


def _onehot(codes: np.ndarray, rows: np.ndarray, m: int, n: int) -> sp.csr_matrix:
    """[m, n] indicator: run rows[j] has distinct value codes[j]; C = onehot @ w sums the
    resample counts per value (rows not listed, i.e. missing scores, count nowhere)."""
    return sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (codes, rows)), shape=(m, n))


_BLOCK_ELEMS = 1 << 19
STAT_AUROC = "auroc"
STAT_PAUROC = "pauroc"          # McClish-standardised
STAT_PAUROC_RAW = "pauroc_raw"  # raw area / max_fpr


def roc_statistics(
    honest,
    attack,
    w_honest: ResampleWeights | None = None,
    w_attack: ResampleWeights | None = None,
    *,
    fprs: Iterable[float] = (),
    max_fpr: float | None = None,
    auroc: bool = True,
) -> dict[str, np.ndarray]:
    """Detection statistics for every resample at once.

    honest, attack: finite scores. w_honest, w_attack: ResampleWeights with one row per
    score (None = the original sample, one "resample" of all ones). Returns arrays of
    length n_resamples under "auroc"; "pauroc" (McClish) and "pauroc_raw" (area/max_fpr)
    if max_fpr is given; and for each alpha in fprs "tpr@alpha", "fpr@alpha" (achieved)
    and "threshold@alpha", alpha formatted with "%g".
    """
    h = metrics.as_scores(honest, "honest")
    a = metrics.as_scores(attack, "attack")
    return masked_roc_statistics(h, a, w_honest, w_attack, fprs=fprs, max_fpr=max_fpr, auroc=auroc)


def masked_roc_statistics(h, a, w_honest=None, w_attack=None, *, fprs=(), max_fpr=None, auroc=True):
    """roc_statistics where NaN scores mark runs left out (a monitor failed on them).

    The weights still cover every run of the stratum, so a cell with missing scores shares
    its resamples with the other cells; its resampled sizes then vary a little, and every
    statistic uses each resample's own n_honest and n_attack.
    """
    h = np.asarray(h, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    w_honest = w_honest or ResampleWeights.ones(h.size)
    w_attack = w_attack or ResampleWeights.ones(a.size)
    if w_honest.n != h.size or w_attack.n != a.size:
        raise ValueError("weight matrices must have one row per score")
    if w_honest.n_resamples != w_attack.n_resamples:
        raise ValueError("honest and attack weights need the same number of resamples")
    fprs = [metrics._check_fpr(f) for f in fprs]
    if max_fpr is not None:
        max_fpr = float(max_fpr)
        if not 0.0 < max_fpr <= 1.0:
            raise ValueError(f"max_fpr must be in (0, 1], got {max_fpr}")
    rows_h = np.flatnonzero(~np.isnan(h))
    rows_a = np.flatnonzero(~np.isnan(a))
    if rows_h.size == 0 or rows_a.size == 0:
        raise ValueError("need at least one honest and one attack score")
    hv, av = h[rows_h], a[rows_a]
    values, codes = np.unique(np.concatenate([hv, av]), return_inverse=True)
    m = values.size
    oh_h = _onehot(codes[: hv.size], rows_h, m, h.size)
    oh_a = _onehot(codes[hv.size :], rows_a, m, a.size)
    n_b = w_honest.n_resamples
    out: dict[str, np.ndarray] = {}
    if auroc:
        out[STAT_AUROC] = np.empty(n_b)
    if max_fpr is not None:
        out[STAT_PAUROC] = np.empty(n_b)
        out[STAT_PAUROC_RAW] = np.empty(n_b)
    for f in fprs:
        for key in ("tpr", "fpr", "threshold"):
            out[f"{key}@{f:g}"] = np.empty(n_b)
    tails = bool(fprs) or max_fpr is not None

    # Blocks of resamples keep the [m, block] work arrays small and reused: fresh
    # multi-megabyte allocations (page faults) cost more than the arithmetic here.
    block = n_b if m * n_b <= _BLOCK_ELEMS else max(16, _BLOCK_ELEMS // m)
    buf: dict[int, tuple[np.ndarray, ...]] = {}
    for s0 in range(0, n_b, block):
        s1 = min(n_b, s0 + block)
        c = s1 - s0
        if c not in buf:
            buf[c] = tuple(np.empty((m, c)) for _ in range(3))
        ch, ca, ch_cum = buf[c]
        np.copyto(ch, oh_h @ w_honest.w[:, s0:s1])  # [m, c] honest count per distinct value
        np.copyto(ca, oh_a @ w_attack.w[:, s0:s1])
        np.cumsum(ch, axis=0, out=ch_cum)  # #honest <= v
        n_h = ch_cum[-1].copy()  # resample sizes (fixed unless scores are missing)
        n_a = ca.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            if auroc:
                # U = sum_v ca[v] * (#honest < v + 0.5 #honest == v)
                u = np.einsum("vb,vb->b", ca, ch_cum) - 0.5 * np.einsum("vb,vb->b", ca, ch)
                out[STAT_AUROC][s0:s1] = u / (n_a * n_h)
            if not tails:
                continue
            ks = [np.floor(f * n_h + 1e-9) for f in fprs]  # k = floor(alpha n) per resample
            tail = np.maximum.reduce(ks + ([max_fpr * n_h] if max_fpr is not None else []))
            # Rows whose strict honest tail (n_h - ch_cum) exceeds every tail of interest in
            # every resample cannot matter for TPR@FPR or the partial area: skip them.
            top = int(np.min(np.count_nonzero(ch_cum < n_h - tail - 0.5, axis=0)))
            ch_s, ca_s, ch_cum_s = ch[top:], ca[top:], ch_cum[top:]
            a_ge = np.cumsum(ca_s[::-1], axis=0)[::-1]  # #attack >= v
            a_gt = a_ge - ca_s
            cols = np.arange(c)
            for f, k in zip(fprs, ks):
                # tau = first value whose strict honest tail is <= k: the (k+1)-th largest
                vstar = np.count_nonzero(ch_cum_s < (n_h - k) - 0.5, axis=0)
                vstar = np.minimum(vstar, ch_s.shape[0] - 1)
                out[f"tpr@{f:g}"][s0:s1] = a_gt[vstar, cols] / n_a
                out[f"fpr@{f:g}"][s0:s1] = (n_h - ch_cum_s[vstar, cols]) / n_h
                out[f"threshold@{f:g}"][s0:s1] = values[top + vstar]
            if max_fpr is not None:
                raw = _partial_area(ch_s, n_h - ch_cum_s, a_gt, ca_s, n_h, n_a, max_fpr)
                out[STAT_PAUROC_RAW][s0:s1] = raw / max_fpr
                out[STAT_PAUROC][s0:s1] = metrics.mcclish(raw, max_fpr) if max_fpr < 1 else raw
    return out


def _partial_area(ch, h_gt, a_gt, ca, n_h, n_a, max_fpr):
    """Raw ROC area over FPR in [0, max_fpr] per column, from counts.

    The ROC segment at value v (thresholds descending) runs from (#h > v, #a > v) to
    (#h >= v, #a >= v); it is clipped at x = max_fpr * n_h and integrated as a trapezoid.
    """
    xmax = max_fpr * n_h
    x0, y0 = h_gt, a_gt
    x1 = x0 + ch
    width = np.clip(np.minimum(x1, xmax) - x0, 0.0, None)
    dx = np.where(x1 > x0, ch, 1.0)
    area = np.sum(width * (2.0 * y0 + (ca / dx) * width), axis=0) * 0.5
    return area / (n_h * n_a)


def percentile_ci(dist: np.ndarray, level: float = 0.95, axis: int = -1):
    """Percentile interval (low, high) of a bootstrap distribution.

    NaN-robust: resamples whose statistic is undefined (NaN, e.g. a resample without a scored
    run of one class) are left out of the interval instead of turning it NaN; ``nan_share``
    says how many were left out (report it beside the CI). All NaN: (NaN, NaN)."""
    tail = (1.0 - level) / 2.0
    d = np.asarray(dist, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN slice gives NaN, as it should
        lo, hi = np.nanquantile(d, [tail, 1.0 - tail], axis=axis)
    return lo, hi


def _vectorised_spec(statistic) -> tuple[str, dict] | None:
    """Map a statistic given by name, metrics function or functools.partial to the engine."""
    if isinstance(statistic, str):
        name = statistic.strip().lower()
        if name == "auroc":
            return "auroc", {}
        for prefix, std in (("pauroc_raw", False), ("pauroc", True)):
            if name == prefix or name.startswith(prefix + "@"):
                mf = float(name.split("@", 1)[1]) if "@" in name else 0.03
                return "pauroc", {"max_fpr": mf, "standardized": std}
        if name.startswith("tpr@"):
            return "tpr", {"fpr": float(name.split("@", 1)[1])}
        raise ValueError(
            f"unknown statistic {statistic!r}: use 'auroc', 'pauroc[@max_fpr]', "
            "'pauroc_raw[@max_fpr]', 'tpr@<fpr>' or a callable"
        )
    func, kwargs = statistic, {}
    if isinstance(statistic, functools.partial) and not statistic.args:
        func, kwargs = statistic.func, dict(statistic.keywords)
    if func is metrics.auroc and not kwargs:
        return "auroc", {}
    if func is metrics.partial_auroc and set(kwargs) <= {"max_fpr", "standardized"}:
        return "pauroc", {"max_fpr": kwargs.get("max_fpr", 0.03), "standardized": kwargs.get("standardized", True)}
    if func is metrics.tpr_at_fpr and set(kwargs) == {"fpr"}:
        return "tpr", {"fpr": kwargs["fpr"]}
    return None


def _engine_values(kind, params, h, a, w_h, w_a):
    if kind == "auroc":
        return roc_statistics(h, a, w_h, w_a)[STAT_AUROC]
    if kind == "pauroc":
        r = roc_statistics(h, a, w_h, w_a, auroc=False, max_fpr=params["max_fpr"])
        return r[STAT_PAUROC if params["standardized"] else STAT_PAUROC_RAW]
    f = metrics._check_fpr(params["fpr"])
    return roc_statistics(h, a, w_h, w_a, auroc=False, fprs=[f])[f"tpr@{f:g}"]


def bootstrap_distribution(honest, attack, statistic, n_resamples: int = 2000, seed: int = 0):
    """(estimate, distribution[n_resamples]) of a statistic under the stratified bootstrap.

    statistic: "auroc", "pauroc[@max_fpr]" (McClish), "pauroc_raw[@max_fpr]",
    "tpr@<fpr>", one of the metrics functions (or a functools.partial of one), all
    vectorised; or any callable f(honest, attack) -> float (or a tuple whose first item is
    the value), evaluated in a Python loop over the same resamples.
    """
    h = metrics.as_scores(honest, "honest")
    a = metrics.as_scores(attack, "attack")
    if int(n_resamples) < 1:
        raise ValueError("n_resamples must be >= 1")
    rng = np.random.default_rng(seed)
    idx_h = resample_indices(h.size, n_resamples, rng)
    idx_a = resample_indices(a.size, n_resamples, rng)
    spec = _vectorised_spec(statistic)
    if spec is not None:
        kind, params = spec
        est = float(_engine_values(kind, params, h, a, None, None)[0])
        dist = _engine_values(kind, params, h, a, ResampleWeights.from_indices(idx_h, h.size), ResampleWeights.from_indices(idx_a, a.size))
        return est, dist

    def value(hh, aa):
        v = statistic(hh, aa)
        return float(v[0] if isinstance(v, tuple) else v)

    est = value(h, a)
    dist = np.array([value(h[idx_h[b]], a[idx_a[b]]) for b in range(n_resamples)])
    return est, dist


def bootstrap_ci(honest, attack, statistic: str | Callable = "auroc", n_resamples: int = 2000, seed: int = 0, level: float = 0.95) -> BootstrapCI:
    """Point estimate and percentile CI of a detection statistic.

    Stratified bootstrap over runs (honest and attack resampled separately, sizes kept),
    n_resamples resamples from numpy's default_rng(seed); see bootstrap_distribution for
    the accepted statistics. Deterministic for a seed.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    est, dist = bootstrap_distribution(honest, attack, statistic, n_resamples, seed)
    lo, hi = percentile_ci(dist, level)
    return BootstrapCI(est, float(lo), float(hi), float(level), int(n_resamples))


# ---------------------------------------------------------------- cluster bootstrap

CLUSTER_UNITS = ("none", "side_task", "main_task", "both")
"""What a cluster resample draws whole: nothing (the run bootstrap only), side-task templates,
main tasks, or both at once (two-way: a run's weight = its side task's draw count x its main
task's draw count, the pigeonhole bootstrap of McCullagh 2000 / Owen 2007)."""
DEFAULT_CLUSTER = "side_task"
"""The report's default: attack runs replay a few side-task oracles, so whole side-task
templates are the unit a claim about new side tasks must resample."""


def cluster_description(unit: str) -> str:
    """How a table header names the cluster bootstrap."""
    return {
        "none": "no cluster bootstrap",
        "side_task": "whole side-task templates resampled (honest runs by the side task of their environment)",
        "main_task": "whole main tasks resampled",
        "both": "two-way: side-task templates and main tasks resampled at once (run weight = product of the two draw counts)",
    }[check_cluster(unit)]


def check_cluster(unit: str) -> str:
    if unit not in CLUSTER_UNITS:
        raise ValueError(f"cluster must be one of {', '.join(CLUSTER_UNITS)}, got {unit!r}")
    return unit


def cluster_codes(keys) -> tuple[np.ndarray, int]:
    """(int64 code per run, number of clusters) of cluster keys in order of first appearance;
    a missing key (None / NaN) is a cluster of its own run."""
    out = np.empty(len(keys), dtype=np.int64)
    seen: dict = {}
    nxt = 0
    for i, k in enumerate(keys):
        if k is None or (isinstance(k, float) and k != k):
            out[i] = nxt
            nxt += 1
            continue
        if k not in seen:
            seen[k] = nxt
            nxt += 1
        out[i] = seen[k]
    return out, nxt


def cluster_draw_counts(n_clusters: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """[n_clusters, n_resamples] float32: how often each cluster is drawn when n_clusters
    clusters are drawn with replacement."""
    if n_clusters < 1:
        raise ValueError("need at least one cluster")
    return weights_from_indices(resample_indices(n_clusters, n_resamples, rng), n_clusters)


def cluster_weights(side_keys, main_keys, unit: str, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """[n_runs, n_resamples] float32 weights of a cluster bootstrap over one population of runs.

    side_keys / main_keys: per run, its side-task template and main task (missing = own
    cluster). A run's weight is its cluster's draw count (one-way) or the product of its side
    task's and its main task's draw counts (two-way, ``unit="both"``). Resample sizes vary."""
    unit = check_cluster(unit)
    if unit == "none":
        raise ValueError("cluster_weights needs a cluster unit (side_task, main_task or both)")
    n = len(side_keys)
    if len(main_keys) != n:
        raise ValueError("side_keys and main_keys need one entry per run")
    w = np.ones((n, n_resamples), dtype=np.float32)
    for name, keys in (("side_task", side_keys), ("main_task", main_keys)):
        if unit in (name, "both"):
            codes, g = cluster_codes(keys)
            w *= cluster_draw_counts(g, n_resamples, rng)[codes]
    return w


def nan_share(dist: np.ndarray) -> float:
    """Share of resamples whose statistic is undefined (NaN), e.g. no scored run of a class."""
    d = np.asarray(dist, dtype=np.float64)
    return float(np.mean(np.isnan(d))) if d.size else float("nan")
