"""Training the latency GNN: splits, loss, early stopping on validation, checkpoints.

The loss works in log space, so it is a relative error: the whole-model head is
trained with squared error of log-latency, its spread head with a Gaussian negative
log-likelihood (on the detached mean, so uncertainty never pulls the estimate), and
the per-kernel head with squared log error on measured kernels, weighted by
``aux_weight``. The checkpoint kept is the epoch with the best validation MAPE; the
test split is only evaluated once, at the end, for the report.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.utils import scatter
from tqdm import tqdm

from gnnperf.atomic import write_text
from gnnperf.data import (
    FeatureScaler,
    LatencyDataset,
    calibration_mask,
    feature_names,
    split_indices,
)
from gnnperf.data.label_noise import LabelNoise
from gnnperf.errors import CheckpointError, GnnperfError
from gnnperf.estimators.base import INTERVAL_COVERAGE
from gnnperf.estimators.gnn.checkpoint import INTERVAL_Z, Checkpoint, interval_ms
from gnnperf.estimators.gnn.config import TrainConfig
from gnnperf.estimators.gnn.network import (
    EnsembleGNN,
    LatencyGNN,
    ModelConfig,
    attach_kernel_outputs,
)
from gnnperf.estimators.kernel import KernelCostModel, kernel_feature_names, load_kernel_model
from gnnperf.estimators.types import SHIPPED
from gnnperf.features.schema import HARDWARE as HW_FEATURE_NAMES
from gnnperf.hardware.spec import ISA_LEVELS, host_of
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.metrics import breakdown, conformal_quantile, metrics
from gnnperf.seeding import seed_everything

#: the kernel cost model ``python train.py`` reads (``gnnperf train-kernels`` writes it)
DEFAULT_KERNEL_MODEL = SHIPPED / "kernel_model.pt"


def error_breakdowns(pred_ms: np.ndarray, true_ms: np.ndarray,
                    dataset: LatencyDataset | Sequence[Data], indices: Sequence[int]
                    ) -> dict[str, dict[str, dict[str, float]]]:
    """Test metrics per machine (hosts differ in their noise floor, docs/measurement.md)
    and per build, for the graphs ``indices`` of ``dataset`` in prediction order."""
    return {
        "test_by_host": breakdown(pred_ms, true_ms,
                                  [host_of(dataset[i].hw_id) for i in indices]),
        "test_by_build": breakdown(pred_ms, true_ms, [str(dataset[i].build) for i in indices]),
    }


@dataclass
class Predictions:
    mu: np.ndarray
    sigma: np.ndarray
    y: np.ndarray

    def ms(self) -> np.ndarray:
        return np.exp(self.mu)


@torch.no_grad()
def predict_loader(model: LatencyGNN | EnsembleGNN, loader: DataLoader, device: str = "cpu"
                   ) -> Predictions:
    model.eval()
    mus, sigmas, ys = [], [], []
    for batch in loader:
        batch = batch.to(device)
        out = model(batch)
        mus.append(out.mu.cpu())
        sigmas.append(out.log_sigma.exp().cpu())
        ys.append(batch.y.cpu())
    return Predictions(torch.cat(mus).numpy(), torch.cat(sigmas).numpy(),
                       torch.cat(ys).numpy())


def _regression(pred: torch.Tensor, target: torch.Tensor, cfg: TrainConfig,
                weight: torch.Tensor | None = None) -> torch.Tensor:
    """Error of log-latencies: squared, or Huber (quadratic within ``huber_delta``, linear
    beyond it, so a mislabelled record pulls less); a weighted mean if ``weight`` is given."""
    if cfg.loss == "huber":
        err = torch.nn.functional.huber_loss(pred, target, delta=cfg.huber_delta,
                                             reduction="none")
    else:
        err = (pred - target) ** 2
    if weight is None:
        return err.mean()
    return (err * weight).sum() / weight.sum().clamp_min(1e-12)


def kernel_share_weights(y_kernel: torch.Tensor, batch: torch.Tensor, mask: torch.Tensor,
                         power: float) -> torch.Tensor:
    """Per labelled kernel, (its share of its graph's measured kernel sum) ** ``power``.

    A kernel taking 1% of a model's time barely moves the whole-model latency, so with
    ``power`` > 0 the auxiliary loss spends its capacity on the kernels that matter.
    """
    ms = torch.where(mask, y_kernel.exp(), torch.zeros_like(y_kernel))
    n_graphs = int(batch.max()) + 1 if batch.numel() else 0
    total = scatter(ms, batch, dim=0, dim_size=n_graphs, reduce="sum")
    share = ms / total[batch].clamp_min(1e-12)
    return share[mask].clamp_min(1e-6) ** power


def build_balance_weights(builds: Sequence[str], power: float) -> dict[str, float]:
    """Per build kind, (records per kind on average / records of this kind) ** ``power``.

    Why: ``best-of`` records are a few percent of the data, so an unweighted loss spends
    almost nothing on them; with ``power`` 1 every kind weighs as much in the whole-model
    loss as any other, with 0 the records weigh equally. Weights average 1 over records.
    """
    kinds = [BuildConfig.parse(b).kind for b in builds]
    counts = Counter(kinds)
    raw = {k: (len(kinds) / len(counts) / n) ** power for k, n in counts.items()}
    mean = sum(raw[k] for k in kinds) / max(len(kinds), 1)
    return {k: w / mean for k, w in raw.items()}


def record_weights(batch: Any, cfg: TrainConfig) -> torch.Tensor | None:
    """Per graph: 1 for a v2 label, ``legacy_weight`` for one from before measurement v2,
    times the weights training attached: the build kind's balance (``build_weight``) and
    the label's noise (``noise_weight``, :meth:`LabelNoise.weights`)."""
    weight = None
    v2 = getattr(batch, "v2", None)
    if v2 is not None and cfg.legacy_weight != 1.0:
        weight = torch.where(v2.view(-1), 1.0, cfg.legacy_weight).to(batch.y.dtype)
    for name in ("build_weight", "noise_weight"):
        factor = getattr(batch, name, None)
        if factor is not None:
            factor = factor.view(-1).to(batch.y.dtype)
            weight = factor if weight is None else weight * factor
    return weight


def attach_noise_weights(train_set: Sequence[Data], noise: LabelNoise,
                         model_sigma: float) -> None:
    """Set each training graph's ``noise_weight`` (mean 1 over the set) from its label's
    noise on its machine and build."""
    weights = noise.weights([(str(d.hw_id), str(d.build)) for d in train_set], model_sigma)
    for d, w in zip(train_set, weights, strict=True):
        d.noise_weight = torch.tensor([w], dtype=torch.float32)


def _loss(model: LatencyGNN | EnsembleGNN, batch: Any, cfg: TrainConfig) -> torch.Tensor:
    out = model(batch)
    y = batch.y.view(-1)
    sigma = out.log_sigma.exp()
    nll = torch.mean(0.5 * ((y - out.mu.detach()) / sigma) ** 2 + out.log_sigma)
    loss = _regression(out.mu, y, cfg, record_weights(batch, cfg)) + 0.1 * nll
    if cfg.correction_weight > 0:
        # prefer the additive structure unless the data keeps asking for a correction
        loss = loss + cfg.correction_weight * torch.mean(out.correction ** 2)
    if cfg.aux_weight > 0:
        mask = batch.kernel_mask
        if bool(mask.any()):
            weight = None
            if cfg.aux_share_power > 0:
                weight = kernel_share_weights(batch.y_kernel, batch.batch, mask,
                                              cfg.aux_share_power)
            loss = loss + cfg.aux_weight * _regression(out.kernel_mu[mask],
                                                       batch.y_kernel[mask], cfg, weight)
    return loss


@dataclass
class TrainResult:
    model: EnsembleGNN
    scaler: FeatureScaler
    sigma_scale: float
    metrics: dict[str, Any]
    indices: dict[str, list[int]]
    history: list[dict[str, float]] = field(default_factory=list)
    test_pred_ms: np.ndarray | None = None
    test_predict_s: float = 0.0
    #: the nominal-coverage interval of each test prediction (ms)
    test_low_ms: np.ndarray | None = None
    test_high_ms: np.ndarray | None = None


def resolve_kernel_model(cfg: TrainConfig) -> KernelCostModel | None:
    """The kernel cost model ``cfg.kernel_model`` names, checked against the features this
    code gives it; None for "none", for "auto" without a shipped one, and without hardware."""
    if cfg.kernel_model == "none" or not cfg.use_hw:
        return None
    path = DEFAULT_KERNEL_MODEL if cfg.kernel_model == "auto" else Path(cfg.kernel_model)
    if cfg.kernel_model == "auto" and not path.exists():
        return None
    model, payload = load_kernel_model(path)
    if payload["feature_names"] != kernel_feature_names():
        raise CheckpointError(f"kernel model {path} reads other features than this gnnperf "
                              "gives; retrain it with `gnnperf train-kernels`")
    return model


def _fit_member(mcfg: ModelConfig, cfg: TrainConfig, train_set: list[Any],
                val_loader: DataLoader, seed: int, minutes: float, progress: bool,
                desc: str, kernel_state: dict[str, Any] | None = None
                ) -> tuple[LatencyGNN, list[dict[str, float]], bool]:
    """One network: AdamW with cosine decay; the epoch with the best validation MAPE.

    Also says whether the time cap ended it: then the result depends on machine speed
    (fixed seeds give the same result twice only when epochs or patience end training).
    """
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True, generator=gen)
    model = LatencyGNN(mcfg)
    if model.kernel_model is not None and kernel_state is not None:
        model.kernel_model.load_state_dict(kernel_state)
    model = model.to(cfg.device)
    # An exponential moving average of the weights is what gets validated and kept: the
    # raw weights' predictions for unseen models swing by several MAPE points per epoch.
    averaged = (AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema))
                if cfg.ema > 0 else None)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs, eta_min=cfg.lr / 50)
    best_state, best_val, bad_epochs, time_capped = None, math.inf, 0, False
    history: list[dict[str, float]] = []
    start = time.time()
    bar = tqdm(range(cfg.epochs), desc=desc, unit="epoch", disable=not progress)
    for epoch in bar:
        model.train()
        total, count = 0.0, 0
        for batch in train_loader:
            batch = batch.to(cfg.device)
            opt.zero_grad()
            loss = _loss(model, batch, cfg)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            if averaged is not None:
                averaged.update_parameters(model)
            total += float(loss.detach()) * batch.num_graphs
            count += batch.num_graphs
        sched.step()
        kept: LatencyGNN = averaged.module if averaged is not None else model  # type: ignore[assignment]
        val = predict_loader(kept, val_loader, cfg.device)
        val_mape = metrics(val.ms(), np.exp(val.y))["mape"]
        history.append({"epoch": epoch, "train_loss": total / max(count, 1),
                        "val_mape": val_mape})
        bar.set_postfix(loss=f"{total / max(count, 1):.4f}", val_mape=f"{val_mape:.2f}%")
        if val_mape < best_val - 1e-6:
            best_val, bad_epochs = val_mape, 0
            best_state = {k: v.detach().clone() for k, v in kept.state_dict().items()}
        else:
            bad_epochs += 1
        if bad_epochs >= cfg.patience:
            break
        if (time.time() - start) / 60 > minutes:
            time_capped = True
            break
    bar.close()
    if best_state is None:
        raise GnnperfError("training diverged: validation MAPE was never finite")
    model.load_state_dict(best_state)
    return model, history, time_capped


def train_model(dataset: LatencyDataset | Sequence[Data], cfg: TrainConfig,
                progress: bool = True,
                indices: tuple[list[int], list[int], list[int]] | None = None,
                label_noise: LabelNoise | None = None) -> TrainResult:
    """Fit on the training split, pick each member's epoch by validation MAPE, report on test.

    ``indices`` (train, val, test) replaces the split named in ``cfg`` (cross-validation,
    and a plain list of graphs, such as the benchmark's, which needs them).
    ``label_noise`` weighs the records (``cfg.label_noise_weighting``); by default it is
    read from a :class:`LatencyDataset`'s folder, and a plain list without it is unweighted.
    """
    seed_everything(cfg.seed)
    train_idx, val_idx, test_idx = indices or split_indices(
        dataset, cfg.split, seed=cfg.seed, val_frac=cfg.val_frac, test_frac=cfg.test_frac,
        holdout=cfg.holdout, legacy_in_test=cfg.legacy_in_test)
    raw_train = [dataset[i] for i in train_idx]
    scaler = FeatureScaler.fit(raw_train)
    train_set = [scaler(d) for d in raw_train]
    if cfg.build_balance > 0:
        kind_weight = build_balance_weights([d.build for d in train_set], cfg.build_balance)
        for d in train_set:
            d.build_weight = torch.tensor([kind_weight[BuildConfig.parse(d.build).kind]])
    if cfg.label_noise_weighting:
        if label_noise is None and isinstance(dataset, LatencyDataset):
            label_noise = LabelNoise.of(dataset.folder)
        if label_noise is not None:
            attach_noise_weights(train_set, label_noise, cfg.model_sigma)
    val_set = [scaler(dataset[i]) for i in val_idx]
    test_set = [scaler(dataset[i]) for i in test_idx]
    val_loader = DataLoader(val_set, batch_size=256)
    test_loader = DataLoader(test_set, batch_size=256)
    members = max(1, cfg.ensemble)
    kernel = resolve_kernel_model(cfg)
    if kernel is not None:  # frozen: its outputs are computed once, not every epoch
        for graphs in (train_set, val_set, test_set):
            attach_kernel_outputs(kernel, graphs)
    mcfg = ModelConfig(in_dim=train_set[0].x.shape[1], hw_dim=len(HW_FEATURE_NAMES),
                       hidden=cfg.hidden, layers=cfg.layers, dropout=cfg.dropout,
                       use_hw=cfg.use_hw, members=members,
                       kernel_model=kernel.cfg.to_dict() if kernel is not None else None,
                       kernel_residual=cfg.kernel_residual and kernel is not None,
                       size_safe_head=cfg.size_safe_head, ratio_bound=cfg.ratio_bound)
    start = time.time()
    nets: list[LatencyGNN] = []
    history: list[dict[str, float]] = []
    capped = 0
    for k in range(members):
        left = cfg.max_minutes - (time.time() - start) / 60
        net, hist, time_capped = _fit_member(
            mcfg, cfg, train_set, val_loader, seed=cfg.seed * 1000 + k,
            minutes=left / (members - k), progress=progress,
            desc=f"train {k + 1}/{members}" if members > 1 else "train",
            kernel_state=kernel.state_dict() if kernel is not None else None)
        nets.append(net)
        capped += time_capped
        history += [{**h, "member": k} for h in hist]
    model = EnsembleGNN(mcfg, nets)
    val = predict_loader(model, val_loader, cfg.device)
    # widen/narrow sigma so that the nominal coverage holds on the validation records of
    # the kind tested on (v2 labels), by the split-conformal quantile (a few dozen records)
    calib = calibration_mask(val_set, cfg.legacy_in_test)
    z = np.abs(val.y - val.mu)[calib] / np.maximum(val.sigma[calib], 1e-6)
    sigma_scale = conformal_quantile(z, INTERVAL_COVERAGE) / INTERVAL_Z if len(z) else 1.0
    result_metrics: dict[str, Any] = {
        "split": cfg.split,
        "holdout": cfg.holdout,
        "val": metrics(val.ms(), np.exp(val.y)),
        # per build on validation, where configurations may be compared (never on test)
        "val_by_build": breakdown(val.ms(), np.exp(val.y), [str(d.build) for d in val_set]),
    }
    test_ms = low = high = None
    test_predict_s = 0.0
    if test_set:  # an estimator fitted for later use has no test split
        predict_start = time.perf_counter()
        test = predict_loader(model, test_loader, cfg.device)
        test_predict_s = time.perf_counter() - predict_start
        low, high = interval_ms(test.mu, sigma_scale * test.sigma)
        true = np.exp(test.y)
        test_ms = test.ms()
        result_metrics.update({
            "test": metrics(test_ms, true),
            "test_interval_coverage": float(np.mean((true >= low) & (true <= high)) * 100),
            **error_breakdowns(test_ms, true, dataset, test_idx),
        })
    result_metrics.update({
        "interval_nominal_coverage": INTERVAL_COVERAGE * 100,
        "members": members,
        "epochs_run": len(history),
        "best_epochs": [int(np.argmin([h["val_mape"] for h in history if h["member"] == k]))
                        for k in range(members)],
        "train_minutes": (time.time() - start) / 60,
        "members_stopped_by_time_cap": capped,
        "train_graphs": len(train_set),
        # the label noise each record's weight followed (log sigma per machine/build kind)
        "label_noise": (dict(label_noise.sigmas)
                        if cfg.label_noise_weighting and label_noise is not None else None),
        "val_graphs": len(val_set),
        "test_graphs": len(test_set),
    })
    return TrainResult(model, scaler, sigma_scale, result_metrics,
                       {"train": train_idx, "val": val_idx, "test": test_idx}, history,
                       test_ms, test_predict_s, low, high)


# -- checkpoints ----------------------------------------------------------------------------


def hw_ranges(dataset: LatencyDataset, indices: list[int]) -> dict[str, list[float]]:
    """Per hardware feature, the [min, max] seen in training (for out-of-range warnings)."""
    n_hw = len(HW_FEATURE_NAMES)
    rows = torch.stack([dataset[i].x[0, -n_hw:] for i in indices])
    return {name: [float(rows[:, j].min()), float(rows[:, j].max())]
            for j, name in enumerate(HW_FEATURE_NAMES)}


def gflop_ranges(dataset: LatencyDataset, indices: list[int]) -> dict[str, list[float]]:
    """Per build kind, the [min, max] total GFLOP of the training models (for warnings).

    Keyed by kind (``sampled``, not ``sampled:0``): every seed of a sampled build schedules
    the same models, so a new seed should be checked against the same range.
    """
    col = feature_names().index("log_flops")
    out: dict[str, list[float]] = {}
    for i in indices:
        d = dataset[i]
        gflop = float(torch.expm1(d.x[:, col].double()).sum()) / 1e9
        kind = BuildConfig.parse(str(d.build)).kind
        lo, hi = out.setdefault(kind, [gflop, gflop])
        out[kind] = [min(lo, gflop), max(hi, gflop)]
    return out


def kernel_counts(dataset: LatencyDataset, indices: list[int]) -> list[int]:
    """The fewest and most kernels of a training graph (for warnings)."""
    sizes = [dataset[i].num_nodes for i in indices]
    return [min(sizes), max(sizes)]


def trained_isas(dataset: LatencyDataset, indices: list[int]) -> list[str]:
    """The ISAs of the training hardware, oldest first (``local`` predictions pick from them)."""
    col = len(HW_FEATURE_NAMES) - HW_FEATURE_NAMES.index("isa_level")
    levels = {round(float(dataset[i].x[0, -col])) for i in indices}
    return [isa for level, isa in enumerate(ISA_LEVELS) if level in levels]


def trained_cpu_ids(dataset: LatencyDataset, indices: list[int]) -> list[str]:
    """The CPU signature ids of the training records measured under v2 (any other CPU is
    predicted at 0 shots with the unseen-CPU prior). Records from before v2 carry a tag
    (``local``, ``amd-epyc``), not a signature id, so their CPUs count as unseen."""
    ids = dataset.record_ids()
    return sorted({host_of(str(ids[i].hw_id)) for i in indices if bool(ids[i].v2)})


def save_checkpoint(result: TrainResult, cfg: TrainConfig, dataset: LatencyDataset,
                    out: str | os.PathLike[str]) -> Path:
    """Write ``gnnperf.pt`` and ``metrics.json`` into ``out`` (temp files, then rename)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    train = result.indices["train"]
    build_counts = Counter(dataset[i].build for i in train)
    Checkpoint(
        model_config=result.model.config.to_dict(),
        train_config=cfg.to_dict(),
        # half precision keeps a three-member checkpoint at a few MB; a weight's rounding
        # error (< 0.05%) is far below the model's own error. Not the frozen kernel model:
        # its input standardisation (means of log sizes ~20, small spreads) needs float32
        state_dict={k: v.to(torch.float16)
                    if v.is_floating_point() and ".kernel_model." not in k else v
                    for k, v in result.model.state_dict().items()},
        scaler=result.scaler.state_dict(),
        sigma_scale=result.sigma_scale,
        interval_coverage=INTERVAL_COVERAGE,
        feature_names=feature_names(),
        dataset_fingerprint=dataset.fingerprint,
        hw_ranges=hw_ranges(dataset, train),
        gflop_ranges=gflop_ranges(dataset, train),
        kernel_counts=kernel_counts(dataset, train),
        builds=sorted(build_counts),
        build_counts=dict(sorted(build_counts.items())),
        isas=trained_isas(dataset, train),
        hosts=trained_cpu_ids(dataset, train),
        metrics=result.metrics,
    ).save(out / "gnnperf.pt")
    write_text(out / "metrics.json", json.dumps(
        {"dataset_fingerprint": dataset.fingerprint, "train_config": cfg.to_dict(),
         **result.metrics}, indent=1))
    return out / "gnnperf.pt"
