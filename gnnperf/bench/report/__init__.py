"""Figures, targets and tables from the stored split runs.

Every figure is recomputed from the runs' predictions: MAPE and friends, interval coverage,
each split broken down by build, the random split by CPU beside that CPU's noise floor,
and a held-out CPU at 0 shots and after the few-shot calibration ``gnnperf calibrate``
fits (:meth:`gnnperf.calibrate.store.Calibration.fit` on the same models' errors).

At 0 shots each method's interval is widened as ``predict`` widens the GNN's on a CPU its
checkpoint never saw (:class:`gnnperf.calibrate.prior.UnseenCpuPrior`), by a prior
fitted on the *other* held-out CPUs' runs of that method, so no CPU's own errors size its
interval.
"""

from gnnperf.bench.report.figures import (
    GAIN_TOLERANCE,
    POOLED,
    THREAD_INVARIANCE_TOLERANCE,
    kernel_model_unseen,
    split_views,
    summarise,
    thread_invariance,
    tuning_gain,
)
from gnnperf.bench.report.markdown import markdown, runs_table
from gnnperf.bench.report.scoring import (
    COLUMNS,
    View,
    calibrated,
    prior_of_others,
    score,
    unseen_cpu_prior,
    widened,
    zero_shot,
)
from gnnperf.bench.report.targets import targets

__all__ = [
    "COLUMNS", "GAIN_TOLERANCE", "POOLED", "THREAD_INVARIANCE_TOLERANCE", "View", "calibrated",
    "kernel_model_unseen", "markdown", "prior_of_others", "runs_table", "score",
    "split_views", "summarise", "targets", "thread_invariance", "tuning_gain",
    "unseen_cpu_prior", "widened", "zero_shot",
]
