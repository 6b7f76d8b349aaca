"""The kernel cost model: per-schedule latency from the kernel dataset.

Every learned estimator starts here: the additive baseline sums its predictions and the
GNN reads its embedding and predicted time on every node. Modules: :mod:`.dataset` (the
kernel shards as a feature table), :mod:`.model` (the network and its two heads),
:mod:`.boosted` (the gradient-boosted trees that predict its schedule times) and
:mod:`.training` (losses, early stopping, figures, checkpoints).
"""

from __future__ import annotations

from gnnperf.estimators.kernel.dataset import (
    KernelTable,
    candidate_rows,
    group_split,
    kernel_input_vector,
    load_kernel_table,
    tuned_candidates,
    workloads_of_models,
)
from gnnperf.estimators.kernel.model import KernelCostModel, KernelModelConfig
from gnnperf.estimators.kernel.training import (
    KernelTrainConfig,
    KernelTrainResult,
    evaluate,
    fit_tuned_offset,
    load_kernel_model,
    predict_log_ms,
    rank_loss,
    ranking_metrics,
    save_kernel_model,
    train_kernel_model,
)
from gnnperf.features.schema import kernel_feature_names

__all__ = [
    "KernelCostModel",
    "KernelModelConfig",
    "KernelTable",
    "KernelTrainConfig",
    "KernelTrainResult",
    "evaluate",
    "fit_tuned_offset",
    "candidate_rows",
    "group_split",
    "kernel_feature_names",
    "kernel_input_vector",
    "load_kernel_model",
    "load_kernel_table",
    "predict_log_ms",
    "rank_loss",
    "ranking_metrics",
    "save_kernel_model",
    "train_kernel_model",
    "tuned_candidates",
    "workloads_of_models",
]
