"""Scoring one method's predictions: the metrics and interval coverage, and its
predictions as a held-out CPU sees them, at 0 shots (intervals widened by the other
held-out CPUs' prior) and after few-shot calibration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gnnperf.bench.results import MethodResult, SplitResult
from gnnperf.bench.splits import record_build_threads
from gnnperf.calibrate.prior import UnseenCpuPrior
from gnnperf.calibrate.store import MIN_MODELS, Calibration, CalibrationPoint
from gnnperf.errors import GnnperfError
from gnnperf.estimators.gnn.training import INTERVAL_Z
from gnnperf.metrics import metrics

COLUMNS = ("mape", "rmspe", "acc5", "acc10", "spearman", "kendall", "coverage")

#: what a split's figures are computed from: each run, its methods' predictions (calibrated
#: ones for a held-out CPU after N shots) and the mask of the models scored
View = list[tuple[SplitResult, dict[str, MethodResult], np.ndarray]]


def score(pred: np.ndarray, low: np.ndarray, high: np.ndarray, true: np.ndarray
          ) -> dict[str, float]:
    """:func:`gnnperf.metrics.metrics` plus the share of models inside their interval."""
    row = metrics(pred, true)
    row["coverage"] = float(np.mean((true >= low) & (true <= high)) * 100)
    return row


def calibrated(result: MethodResult, test: dict[str, list[Any]], shots: Sequence[int],
               per_cell: bool = True) -> MethodResult:
    """The method's predictions corrected as ``gnnperf calibrate`` corrects the GNN's: the
    records ``shots`` fit a :class:`~gnnperf.calibrate.store.Calibration` (a median
    measured/predicted ratio per build kind and thread count; one for all of them with
    ``per_cell=False``), each prediction is multiplied by its cell's factor and its interval
    widened by that cell's spread of ratios, in quadrature."""
    true = np.array(test["true_ms"], dtype=float)
    configs = [record_build_threads(k) for k in test["key"]]
    points = [CalibrationPoint(str(i), float(result.pred_ms[i]), float(true[i]), 0.0,
                               *(configs[i] if per_cell else ("", 0)))
              for i in shots if np.isfinite(result.pred_ms[i])]
    if len(points) < MIN_MODELS:  # a method that could not predict them stays uncorrected
        nan = np.full_like(result.pred_ms, np.nan)
        return MethodResult(nan, nan, nan, result.training)
    fit = Calibration.fit(points, cpu_id="held-out", checkpoint_sha256="", hw_id="", build="")
    log_factor, log_spread = np.array([fit.correction(*c) for c in configs]).T
    return _spread_out(result, result.pred_ms * np.exp(log_factor), log_spread)


def _spread_out(result: MethodResult, pred: np.ndarray, log_spread: np.ndarray
                ) -> MethodResult:
    """``result`` predicting ``pred``, its interval's log half-width widened by
    ``log_spread`` (a standard deviation) in quadrature, centred on ``pred`` in log."""
    half = np.hypot(np.log(result.high_ms / result.low_ms) / 2, INTERVAL_Z * log_spread)
    return MethodResult(pred, pred * np.exp(-half), pred * np.exp(half), result.training)


def unseen_cpu_prior(runs: Sequence[SplitResult], method: str, source: str = ""
                     ) -> UnseenCpuPrior | None:
    """``method``'s prior on an unseen CPU from held-out-CPU runs: each run's holdout is
    a CPU the method never trained on; None when no run holds the method."""
    records = []
    for r in runs:
        if method not in r.methods:
            continue
        pred = r.methods[method].pred_ms
        for i, (key, true) in enumerate(zip(r.test["key"], r.true_ms, strict=True)):
            records.append((str(r.run.holdout), *record_build_threads(key), float(true),
                            float(pred[i])))
    try:
        return UnseenCpuPrior.from_records(records, source)
    except GnnperfError:
        return None


def widened(result: MethodResult, test: dict[str, list[Any]], prior: UnseenCpuPrior
            ) -> MethodResult:
    """The method's interval widened by ``prior``'s spread for each record's cell, in
    quadrature (the interval stays centred on the prediction, in log)."""
    spread = np.array([prior.log_spread(*record_build_threads(k)) for k in test["key"]])
    return _spread_out(result, result.pred_ms, spread)


def prior_of_others(run: SplitResult, runs: Sequence[SplitResult], method: str
                    ) -> UnseenCpuPrior | None:
    """``method``'s prior from the runs that held out another CPU than ``run`` did."""
    return unseen_cpu_prior([r for r in runs if r.run.holdout != run.run.holdout], method)


def zero_shot(run: SplitResult, runs: Sequence[SplitResult]) -> dict[str, MethodResult]:
    """``run``'s methods at 0 shots: each interval widened by the prior that method's runs
    on the other held-out CPUs give (unchanged where there are none)."""
    out = {}
    for name, result in run.methods.items():
        prior = prior_of_others(run, runs, name)
        out[name] = result if prior is None else widened(result, run.test, prior)
    return out

