"""Gradient-boosted trees over the kernel model's rows: its per-schedule time.

Why: on validation workloads XGBoost on the same columns errs less per schedule than the
MLP's time head at its default ranking weight (36.8% MAPE against 38.5%), ranks a
workload's schedules better (Spearman 0.714 against 0.684) and picks the fastest one better
(top-1 regret 28.4% against 44.1%): docs/method.md, "Ranking weight, chosen on
validation". The best of a workload's candidates it predicts about as well (30.0% against
29.5%), so one learner gives every schedule time, candidates' included. The MLP keeps what
trees cannot give: the embedding the GNN reads on every node and the tuned head.

The trees travel inside the kernel model as the bytes of XGBoost's own UBJSON model
format, so every checkpoint that holds the kernel model's weights (the GNN's too) holds
them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: chosen on validation workloads (benchmarks/kernel_model.py, ``xgb-all-features``)
BOOSTER_PARAMS: dict[str, Any] = {
    "objective": "reg:squarederror",
    "eta": 0.05,
    "max_depth": 6,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
    "tree_method": "hist",
}
MAX_ROUNDS = 2000
EARLY_STOPPING_ROUNDS = 100


def _threads(n_jobs: int | None) -> int:
    """As many threads as torch may use: a benchmark worker's share of the cores."""
    return n_jobs or torch.get_num_threads()


def fit_booster(x: np.ndarray, y: np.ndarray, train: np.ndarray, val: np.ndarray, seed: int,
                max_rounds: int = MAX_ROUNDS, patience: int = EARLY_STOPPING_ROUNDS,
                n_jobs: int | None = None, overrides: dict[str, Any] | None = None) -> Any:
    """Trees regressing ``y`` (log ms) on ``x``'s ``train`` rows, stopped after ``patience``
    rounds without a better validation error on ``val``'s and cut to their best round, so
    that every later prediction uses exactly that many. ``overrides`` replace some of
    :data:`BOOSTER_PARAMS` (what a benchmark compares them against)."""
    import xgboost

    params = {**BOOSTER_PARAMS, **(overrides or {}), "seed": seed, "nthread": _threads(n_jobs)}
    dtrain = xgboost.DMatrix(x[train], label=y[train])
    dval = xgboost.DMatrix(x[val], label=y[val])
    booster = xgboost.train(params, dtrain, num_boost_round=max_rounds,
                            evals=[(dval, "val")], early_stopping_rounds=patience,
                            verbose_eval=False)
    return booster[: booster.best_iteration + 1]


def booster_to_bytes(booster: Any) -> bytes:
    return bytes(booster.save_raw(raw_format="ubj"))


def booster_from_bytes(raw: bytes) -> Any:
    import xgboost

    booster = xgboost.Booster()
    booster.load_model(bytearray(raw))
    booster.set_param({"nthread": _threads(None)})
    return booster


def booster_log_ms(booster: Any, x: np.ndarray) -> np.ndarray:
    """Predicted log ms of each row of ``x`` (float32 predictions, as the trees give).

    Each distinct row is predicted once: a batch repeats rows many times over (a
    transformer's layers run the same kernels; ``advise`` encodes one lowered graph for
    every build and thread count), and walking the trees costs more than finding them."""
    if not len(x):
        return np.zeros(0, dtype=np.float32)
    rows = np.ascontiguousarray(x, dtype=np.float32)
    # one opaque value per row: np.unique over them is 30 times faster than over axis 0
    keys = rows.view(np.dtype((np.void, rows.itemsize * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    pred = np.asarray(booster.inplace_predict(rows[first]), dtype=np.float32)
    return pred[inverse.reshape(-1)]
