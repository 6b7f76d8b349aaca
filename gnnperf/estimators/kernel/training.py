"""Training the kernel cost model on the kernel dataset, and what it gets right.

Loss: squared error of log time, plus a pairwise ranking loss (RankNet's logistic loss on
predicted log-time differences) among the schedules of one workload on one hardware
config, so the model learns what a schedule does *relative to its siblings* as well as
absolutely; plus the tuned head's squared error against each group's best time. Pairs
closer than the kernel noise floor are not ranked. Early stopping on validation groups;
test groups are only scored. Then, by default, gradient-boosted trees on the same rows and
split (:mod:`.boosted`) take over the per-schedule time, except on unscheduled kernels
where the network predicts the validation workloads' better (:func:`choose_head_rows`);
the tuned offset is fitted on what predicts.
"""

from __future__ import annotations

import copy
import math
import os
from collections import defaultdict
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gnnperf.atomic import atomic_path
from gnnperf.errors import CheckpointError, TrainingConfigError
from gnnperf.estimators.kernel.boosted import (
    EARLY_STOPPING_ROUNDS,
    MAX_ROUNDS,
    booster_to_bytes,
    fit_booster,
)
from gnnperf.estimators.kernel.dataset import KernelTable, group_split
from gnnperf.estimators.kernel.model import KernelCostModel, KernelModelConfig
from gnnperf.hardware.spec import host_of
from gnnperf.metrics import metrics
from gnnperf.seeding import seed_everything
from gnnperf.standardize import column_mean_std

# 2: the tuned offset of the best candidate; 3: clipped inputs; 4: the booster's bytes;
# 5: the rows the time head keeps beside the booster
CHECKPOINT_FORMAT = 5
#: formats this gnnperf reads (a format-2 model keeps its unclipped inputs; before 4, none
#: has a booster; before 5, the booster predicts every row)
READABLE_FORMATS = (2, 3, 4, 5)
#: the flag column of unscheduled kernels (:mod:`gnnperf.features.schedule`)
UNSCHEDULED_COLUMN = "sched_unscheduled"
#: schedules whose times differ by less than this (log ratio, ~5%) are not ranked
RANK_MARGIN = 0.05


@dataclass
class KernelTrainConfig:
    hidden: int = 256
    embed_dim: int = 64
    layers: int = 3
    dropout: float = 0.1
    lr: float = 2e-3
    weight_decay: float = 1e-4
    epochs: int = 300
    patience: int = 30
    groups_per_batch: int = 32
    #: chosen on validation workloads (2026-11-25, docs/method.md "Chosen on validation"; 1.0 and 0
    #: in benchmarks/kernel_model_val.json, 0.25 on the same split): 1.0 cost schedule MAPE
    #: (40.9% against 37.6% at 0), 0.25 kept most of it (38.5%) and predicted tuned
    #: kernels best (best candidate 29.5%)
    rank_weight: float = 0.25
    tuned_weight: float = 0.5
    val_frac: float = 0.15
    test_frac: float = 0.15
    seed: int = 0
    #: feature columns replaced by zeros (ablations: ``sched_`` drops the schedule features)
    drop_prefixes: tuple[str, ...] = ()
    #: trees predict the schedule times (False: the time head, as before format 4)
    booster: bool = True
    #: the trees' most boosting rounds, and how many without a better validation error
    #: end them sooner
    booster_rounds: int = MAX_ROUNDS
    booster_patience: int = EARLY_STOPPING_ROUNDS

    def validate(self) -> None:
        if self.epochs < 1 or self.patience < 1 or self.groups_per_batch < 1 \
                or self.booster_rounds < 1 or self.booster_patience < 1:
            raise TrainingConfigError("epochs, patience, groups_per_batch, booster_rounds and "
                                      "booster_patience must be >= 1")
        if not (0 < self.val_frac < 1 and 0 < self.test_frac < 1
                and self.val_frac + self.test_frac < 1):
            raise TrainingConfigError("val_frac and test_frac must be in (0, 1), summing < 1")


@dataclass
class KernelTrainResult:
    model: KernelCostModel
    metrics: dict[str, Any]
    indices: dict[str, np.ndarray] = field(repr=False)
    best_epoch: int = 0


def _columns_kept(names: list[str], drop_prefixes: tuple[str, ...]) -> np.ndarray:
    return np.asarray([not n.startswith(drop_prefixes) for n in names], dtype=np.float32)


def _groups(table: KernelTable, rows: np.ndarray) -> list[np.ndarray]:
    by: dict[str, list[int]] = defaultdict(list)
    for r, g in zip(rows, table.group[rows], strict=True):
        by[str(g)].append(int(r))
    return [np.asarray(v) for v in by.values()]


def _pairs_within_groups(group: Tensor) -> tuple[Tensor, Tensor]:
    """Every ordered pair of rows (i, j) of the same group, as two index tensors: the
    groups' own pairs only, not the N x N matrix of a batch (a validation set has ~10^4
    rows in groups of ~20)."""
    order = torch.argsort(group, stable=True)
    _, counts = torch.unique_consecutive(group[order], return_counts=True)
    size = torch.repeat_interleave(counts, counts)  # per sorted row: its group's size
    first = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    i = torch.repeat_interleave(torch.arange(len(group), device=group.device), size)
    within = torch.arange(len(i), device=group.device) - torch.repeat_interleave(
        torch.cumsum(size, 0) - size, size)
    j = torch.repeat_interleave(first, size) + within
    return order[i], order[j]


def rank_loss(pred: Tensor, true: Tensor, group: Tensor) -> Tensor:
    """RankNet's loss over the pairs of rows of the same group whose true times differ by
    more than :data:`RANK_MARGIN`; zero when there are none."""
    i, j = _pairs_within_groups(group)
    faster = (true[j] - true[i]) > RANK_MARGIN  # row i truly faster than row j
    if not bool(faster.any()):
        return pred.sum() * 0.0
    diff = pred[i[faster]] - pred[j[faster]]  # should be negative: row i is faster
    return torch.nn.functional.softplus(diff).mean()


def _best_per_group(table: KernelTable, groups: list[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(row of the unscheduled kernel, best log time over its schedules) per group that
    has both."""
    rows, best = [], []
    for g in groups:
        unscheduled = g[table.unscheduled[g]]
        sampled = g[~table.unscheduled[g]]
        if len(unscheduled) and len(sampled):
            rows.append(int(unscheduled[0]))
            best.append(float(table.log_ms[sampled].min()))
    return np.asarray(rows, dtype=np.int64), np.asarray(best)


def _losses(model: KernelCostModel, x: Tensor, y: Tensor, gid: Tensor, tuned_x: Tensor,
            tuned_y: Tensor, cfg: KernelTrainConfig) -> Tensor:
    pred = model(x)
    loss = torch.mean((pred - y) ** 2) + cfg.rank_weight * rank_loss(pred, y, gid)
    if len(tuned_y):
        loss = loss + cfg.tuned_weight * torch.mean((model.tuned(tuned_x) - tuned_y) ** 2)
    return loss


def _tensors(table: KernelTable, rows: np.ndarray, keep: np.ndarray
             ) -> tuple[Tensor, Tensor, Tensor]:
    x = torch.from_numpy(table.x[rows] * keep)
    y = torch.from_numpy(table.log_ms[rows].astype(np.float32))
    _, gid = np.unique(table.group[rows], return_inverse=True)
    return x, y, torch.from_numpy(gid)


def predict_log_ms(model: KernelCostModel, x: np.ndarray, time_head: bool = False
                   ) -> np.ndarray:
    """Predicted log ms of each row: what the model predicts with (its booster where it has
    one), or with ``time_head`` the MLP's own head."""
    model.eval()
    with torch.no_grad():
        rows = torch.from_numpy(np.asarray(x, dtype=np.float32))
        pred = model(rows) if time_head else model.schedule_log_ms(rows)
    return pred.numpy().astype(float)


def ranking_metrics(pred_log: np.ndarray, true_log: np.ndarray, groups: np.ndarray
                    ) -> dict[str, float]:
    """Within-group agreement: mean Spearman / Kendall over groups of >= 3 schedules, and
    top-1 regret: how much slower the schedule predicted fastest is than the fastest (%)."""
    from scipy import stats as sps  # scipy.stats costs 0.6 s to import: only when used

    spear, kend, regret = [], [], []
    for g in np.unique(groups):
        m = groups == g
        if m.sum() < 2:
            continue
        p, t = pred_log[m], true_log[m]
        regret.append(math.exp(t[np.argmin(p)] - t.min()) - 1.0)
        if m.sum() >= 3 and np.ptp(t) > 0 and np.ptp(p) > 0:
            spear.append(sps.spearmanr(p, t).statistic)
            kend.append(sps.kendalltau(p, t).statistic)
    return {
        "group_spearman": float(np.mean(spear)) if spear else float("nan"),
        "group_kendall": float(np.mean(kend)) if kend else float("nan"),
        "top1_regret_pct": float(np.mean(regret) * 100) if regret else float("nan"),
        "groups": len(regret),
        # the groups the Spearman and Kendall means are over (3+ schedules, times varied)
        "ranked_groups": len(spear),
    }


def _unscheduled_column(table: KernelTable) -> int | None:
    names = list(table.feature_names)
    return names.index(UNSCHEDULED_COLUMN) if UNSCHEDULED_COLUMN in names else None


def unscheduled_flag(table: KernelTable) -> np.ndarray:
    """Per row, whether the model sees it as unscheduled: its :data:`UNSCHEDULED_COLUMN`
    (also set for a schedule whose trace is empty), else the record's own label."""
    column = _unscheduled_column(table)
    if column is not None:
        return table.x[:, column] > 0.5
    return np.asarray(table.unscheduled, dtype=bool)


def _by_kind(pred: np.ndarray, true: np.ndarray, unscheduled: np.ndarray
             ) -> dict[str, dict[str, float]]:
    """Per-row figures of the unscheduled kernels and of the scheduled ones apart."""
    return {kind: metrics(np.exp(pred[m]), np.exp(true[m]))
            for kind, m in (("unscheduled", unscheduled), ("scheduled", ~unscheduled))
            if m.any()}


def evaluate(model: KernelCostModel, table: KernelTable, rows: np.ndarray,
             keep: np.ndarray | None = None) -> dict[str, Any]:
    """Accuracy on ``rows``: per-schedule error, within-workload ranking, tuned head."""
    keep = keep if keep is not None else np.ones(table.x.shape[1], dtype=np.float32)
    x = table.x[rows] * keep
    pred = predict_log_ms(model, x)
    true = table.log_ms[rows]
    out: dict[str, Any] = {"schedules": metrics(np.exp(pred), np.exp(true))}
    out.update(ranking_metrics(pred, true, table.group[rows]))
    flag = unscheduled_flag(table)[rows]
    out["by_kind"] = _by_kind(pred, true, flag)
    if model.has_booster:  # what the MLP alone would give, for the comparison
        head = predict_log_ms(model, x, time_head=True)
        out["time_head"] = {"schedules": metrics(np.exp(head), np.exp(true)),
                            **ranking_metrics(head, true, table.group[rows]),
                            "by_kind": _by_kind(head, true, flag)}
    tuned_rows, best = _best_per_group(table, _groups(table, rows))
    if len(tuned_rows):
        with torch.no_grad():
            tuned = model.tuned(torch.from_numpy(table.x[tuned_rows] * keep)).numpy()
        out["tuned"] = metrics(np.exp(tuned.astype(float)), np.exp(best))
        # the same workloads as the tuned head's (those whose unscheduled kernel was timed)
        same = rows[np.isin(table.group[rows], table.group[tuned_rows])]
        cand_best, cand_true = _candidate_best(model, table, same, keep)
        out["tuned_from_candidates"] = metrics(np.exp(cand_best), np.exp(cand_true))
    return out


def _candidate_best(model: KernelCostModel, table: KernelTable, rows: np.ndarray,
                    keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group of ``rows`` with sampled schedules: (the model's tuned time from them: best
    prediction plus ``tuned_offset``, the best measured time)."""
    sampled = rows[~table.unscheduled[rows]]
    _, owner = np.unique(table.group[sampled], return_inverse=True)
    n = int(owner.max()) + 1 if len(owner) else 0
    with torch.no_grad():
        pred, _ = model.best_candidate(torch.from_numpy(table.x[sampled] * keep),
                                       torch.from_numpy(owner), n)
    true = np.full(n, np.inf)
    np.minimum.at(true, owner, table.log_ms[sampled])
    return pred.numpy().astype(float), true


def choose_head_rows(model: KernelCostModel, table: KernelTable, rows: np.ndarray,
                     keep: np.ndarray) -> dict[str, Any]:
    """Let the time head predict the unscheduled kernels (a ``default`` build's) where, on
    ``rows`` (validation workloads), its MAPE on them is lower than the booster's: the
    trees were chosen for what schedules decide, and a held-out fold saw them err more
    on kernels no schedule touched (benchmarks/kernel_trees). Returns both figures and
    the choice."""
    model.keep_head_for(None)
    column = _unscheduled_column(table)
    if column is None or not keep[column]:
        return {}
    # the rows the flag marks, as the model will tell them apart when it predicts
    unscheduled = rows[table.x[rows, column] > 0.5]
    if not len(unscheduled):
        return {}
    x = table.x[unscheduled] * keep
    true = np.exp(table.log_ms[unscheduled])
    trees = metrics(np.exp(predict_log_ms(model, x)), true)["mape"]
    head = metrics(np.exp(predict_log_ms(model, x, time_head=True)), true)["mape"]
    if head < trees:
        model.keep_head_for(column)
    return {"rows": int(len(unscheduled)), "trees_mape": trees, "time_head_mape": head,
            "predicted_by": "time_head" if head < trees else "trees"}


def fit_tuned_offset(model: KernelCostModel, table: KernelTable, rows: np.ndarray,
                     keep: np.ndarray) -> float:
    """Set the model's ``tuned_offset`` to the mean log gap, over the groups of ``rows``,
    between the best measured schedule and the best predicted one (the minimum of noisy
    predictions is lower than the true minimum)."""
    model.tuned_offset.zero_()
    pred, true = _candidate_best(model, table, rows, keep)
    offset = float(np.mean(true - pred)) if len(pred) else 0.0
    model.tuned_offset.fill_(offset)
    return offset


def train_kernel_model(table: KernelTable, cfg: KernelTrainConfig | None = None, *,
                       progress: bool = True,
                       scored: Collection[str] = ("train", "val", "test")) -> KernelTrainResult:
    """Fit a :class:`KernelCostModel` on ``table``, split by workload (a workload's
    schedules on every hardware config stay on one side). Its figures are computed on the
    ``scored`` sides only (the training side's take a minute on the full dataset)."""
    cfg = cfg or KernelTrainConfig()
    cfg.validate()
    seed_everything(cfg.seed)
    train, val, test = group_split(table.workload, (cfg.val_frac, cfg.test_frac), cfg.seed)
    if not len(train) or not len(val):
        raise TrainingConfigError("too few workloads to split into training and validation")
    keep = _columns_kept(table.feature_names, cfg.drop_prefixes)
    x_train = table.x[train] * keep
    mean, std = column_mean_std(torch.from_numpy(x_train))
    model = KernelCostModel(KernelModelConfig(table.x.shape[1], cfg.hidden, cfg.embed_dim,
                                              cfg.layers, cfg.dropout), mean, std)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs)
    train_groups = _groups(table, train)
    val_tensors = _tensors(table, val, keep)
    val_tuned_rows, val_best = _best_per_group(table, _groups(table, val))
    val_tuned = (torch.from_numpy(table.x[val_tuned_rows] * keep),
                 torch.from_numpy(val_best.astype(np.float32)))
    rng = np.random.default_rng(cfg.seed)
    best_loss, best_state, best_epoch, stale = math.inf, None, 0, 0
    from tqdm import tqdm

    bar = tqdm(range(cfg.epochs), desc="kernel model", disable=not progress, unit="epoch")
    for epoch in bar:
        model.train()
        order = rng.permutation(len(train_groups))
        for start in range(0, len(order), cfg.groups_per_batch):
            chosen = [train_groups[i] for i in order[start:start + cfg.groups_per_batch]]
            rows = np.concatenate(chosen)
            x, y, gid = _tensors(table, rows, keep)
            t_rows, t_best = _best_per_group(table, chosen)
            loss = _losses(model, x, y, gid, torch.from_numpy(table.x[t_rows] * keep),
                           torch.from_numpy(t_best.astype(np.float32)), cfg)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
        sched.step()
        model.eval()
        with torch.no_grad():
            val_loss = float(_losses(model, *val_tensors, *val_tuned, cfg))
        bar.set_postfix(val=f"{val_loss:.4f}")
        if val_loss < best_loss - 1e-5:
            best_loss, best_state, best_epoch, stale = (
                val_loss, copy.deepcopy(model.state_dict()), epoch, 0)
        else:
            stale += 1
            if stale >= cfg.patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    choice: dict[str, Any] = {}
    if cfg.booster:
        x = table.x if keep.all() else table.x * keep
        booster = fit_booster(x, table.log_ms, train, val, cfg.seed,
                              max_rounds=cfg.booster_rounds, patience=cfg.booster_patience)
        model.set_booster(booster_to_bytes(booster))
        choice = choose_head_rows(model, table, val, keep)
    fit_tuned_offset(model, table, val, keep)
    indices = {"train": train, "val": val, "test": test}
    result_metrics: dict[str, Any] = {
        split: evaluate(model, table, rows, keep) for split, rows in indices.items()
        if len(rows) and split in scored}
    if choice:
        result_metrics["unscheduled_choice"] = choice
    result_metrics["best_epoch"] = best_epoch
    result_metrics["workloads"] = {k: int(len(np.unique(table.workload[v])))
                                   for k, v in indices.items()}
    return KernelTrainResult(model, result_metrics, indices, best_epoch)


def save_kernel_model(result: KernelTrainResult, cfg: KernelTrainConfig, table: KernelTable,
                      path: str | os.PathLike[str]) -> Path:
    """Write the checkpoint atomically: weights, config, feature names and the figures."""
    path = Path(path)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "kind": "gnnperf-kernel-model",
        "model_config": result.model.cfg.to_dict(),
        "train_config": asdict(cfg),
        "feature_names": list(table.feature_names),
        # the CPUs whose kernels it learned: a benchmark holding one of them out cannot use it
        "cpus": sorted({host_of(str(h)) for h in table.hw_id}),
        "state_dict": result.model.state_dict(),
        "metrics": result.metrics,
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return path


def load_kernel_model(path: str | os.PathLike[str]) -> tuple[KernelCostModel, dict[str, Any]]:
    """A saved kernel model and its payload; a one-line error for anything else."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"kernel model {path} not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises many types for a corrupt file
        raise CheckpointError(f"kernel model {path} cannot be read: {exc}") from None
    if not isinstance(payload, dict) or payload.get("kind") != "gnnperf-kernel-model":
        raise CheckpointError(f"{path} is not a gnnperf kernel model")
    if payload.get("format") not in READABLE_FORMATS:
        raise CheckpointError(f"kernel model {path} has format {payload.get('format')}, "
                              f"this gnnperf reads {' or '.join(map(str, READABLE_FORMATS))}")
    config = {"clip_inputs": False, **payload["model_config"]}  # format 2 did not clip
    model = KernelCostModel(KernelModelConfig(**config))
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return model, payload
