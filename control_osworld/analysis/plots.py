"""Figures: ROC curves on a log-FPR axis, cumulative incidence over steps."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import metrics
from .hazards import CAUSES

__all__ = ["roc_figure", "cumulative_incidence_figure", "slug"]

_CAUSE_COLOURS = {"completed": "#1b9e77", "stopped": "#7570b3", "escaped": "#d95f02", "terminated": "#e7298a"}


def slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", "_".join(p for p in parts if p)).strip("-").lower() or "all"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def roc_figure(path, title: str, panels, fprs=(0.01, 0.03, 0.05)) -> Path:
    """One subplot per monitor; one ROC curve per input subset, FPR on a log axis.

    panels: list of (monitor, [(inputs, honest_scores, attack_scores), ...]).
    """
    plt = _pyplot()
    n = max(1, len(panels))
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False, sharey=True)
    for ax, (monitor, curves) in zip(axes[0], panels):
        lo = 1.0
        for label, h, a in curves:
            h, a = np.asarray(h, float), np.asarray(a, float)
            h, a = h[np.isfinite(h)], a[np.isfinite(a)]
            if h.size == 0 or a.size == 0:
                continue
            fpr, tpr, _ = metrics.roc_curve_points(h, a)
            keep = fpr > 0  # log axis: FPR = 0 sits at -infinity
            lo = min(lo, 1.0 / h.size)
            ax.plot(np.r_[1.0 / h.size / 2, fpr[keep]], np.r_[tpr[~keep][-1], tpr[keep]], lw=1.2,
                    label=f"{label} (AUROC {metrics.auroc(h, a):.2f})")
        for f in fprs:
            ax.axvline(f, color="grey", lw=0.6, ls="--")
        ax.set_xscale("log")
        ax.set_xlim(lo / 2, 1.0)
        ax.set_ylim(0, 1.01)
        ax.set_xlabel("False positive rate (honest runs, log scale)")
        ax.set_title(monitor, fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
    axes[0][0].set_ylabel("True positive rate (attack runs)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def cumulative_incidence_figure(path, groups) -> Path:
    """One subplot per group: F_c(t) per cause with its bootstrap band.

    groups: list of (title, steps [K], cif [K, 4], low [K, 4] or None, high [K, 4] or None).
    """
    plt = _pyplot()
    n = max(1, len(groups))
    ncols = min(3, n)
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False, sharey=True)
    for i, (title, steps, cif, lo, hi) in enumerate(groups):
        ax = axes[i // ncols][i % ncols]
        for j, cause in enumerate(CAUSES):
            if not np.any(cif[:, j] > 0):
                continue
            ax.step(steps, cif[:, j], where="post", color=_CAUSE_COLOURS[cause], lw=1.3, label=cause)
            if lo is not None and hi is not None:
                ax.fill_between(steps, lo[:, j], hi[:, j], step="post", color=_CAUSE_COLOURS[cause], alpha=0.2, lw=0)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step t")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, loc="upper left")
    for i in range(len(groups), nrows * ncols):
        axes[i // ncols][i % ncols].axis("off")
    axes[0][0].set_ylabel("cumulative incidence F_c(t)")
    fig.suptitle("Cumulative incidence (Aalen-Johansen; bands: bootstrap percentile CI)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
