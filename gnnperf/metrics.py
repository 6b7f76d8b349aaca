"""Accuracy figures shared by every estimator: errors in percent and rank agreement."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def metrics(pred_ms: np.ndarray, true_ms: np.ndarray) -> dict[str, float]:
    """MAPE, RMSPE, Acc@5%/10% (percent) and rank correlations."""
    pred_ms, true_ms = np.asarray(pred_ms, float), np.asarray(true_ms, float)
    rel = (pred_ms - true_ms) / true_ms
    out = {
        "mape": float(np.mean(np.abs(rel)) * 100),
        "rmspe": float(np.sqrt(np.mean(rel**2)) * 100),
        "acc5": float(np.mean(np.abs(rel) <= 0.05) * 100),
        "acc10": float(np.mean(np.abs(rel) <= 0.10) * 100),
        "n": int(len(true_ms)),
    }
    if len(true_ms) > 2:
        from scipy import stats as sps  # scipy.stats costs 0.6 s to import: only when used

        out["spearman"] = float(sps.spearmanr(pred_ms, true_ms).statistic)
        out["kendall"] = float(sps.kendalltau(pred_ms, true_ms).statistic)
    return out


def breakdown(pred_ms: np.ndarray, true_ms: np.ndarray, labels: Sequence[str]
              ) -> dict[str, dict[str, float]]:
    """:func:`metrics` per label (a machine, a build): where the error lives."""
    pred_ms, true_ms, tags = np.asarray(pred_ms), np.asarray(true_ms), np.asarray(labels)
    return {str(k): metrics(pred_ms[tags == k], true_ms[tags == k]) for k in sorted(set(labels))}


def group_error_decomposition(pred_log: np.ndarray, true_log: np.ndarray, groups: Sequence[str]
                              ) -> dict[str, float]:
    """Where a per-schedule log-time error lives: in each group's shared bias (the workload's
    level misjudged) or within the group (its schedules misjudged against each other).

    ``between``: mean |group mean error| per row; ``within``: mean |error - its group's mean|;
    ``mape_without_bias``: the MAPE left once each group's mean error is removed.
    """
    err = np.asarray(pred_log, float) - np.asarray(true_log, float)
    _, owner = np.unique(np.asarray(groups), return_inverse=True)
    bias = (np.bincount(owner, err) / np.bincount(owner))[owner]
    within = err - bias
    return {"between": float(np.mean(np.abs(bias))), "within": float(np.mean(np.abs(within))),
            "mape_without_bias": float(np.mean(np.abs(np.expm1(within))) * 100)}


def conformal_quantile(scores: np.ndarray, coverage: float) -> float:
    """The split-conformal ``coverage`` quantile of calibration ``scores``: the
    ceil((n + 1) * coverage)-th smallest (the largest for small n), so that a new score
    falls at or below it with probability at least ``coverage``. NaN without scores."""
    finite = np.sort(np.asarray(scores, dtype=float)[np.isfinite(scores)])
    if not len(finite):
        return math.nan
    rank = min(len(finite), math.ceil((len(finite) + 1) * coverage))
    return float(finite[rank - 1])
