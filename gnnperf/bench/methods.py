"""One split run: every method trained on the training side and scored on the test side.

All methods see the same graphs, the same split and the same kernel cost model, and all
learned ones train under the configuration's one budget rule. The kernel cost model is
retrained for each run without the workloads that only its test models have (they would
otherwise leak per-kernel times of the very models scored; a workload a training model
shares is seen by every method through that model's per-kernel labels), and a held-out
CPU is never among the CPUs it learned from. Each method's 90% interval comes from its own
validation errors: the GNN's from its predicted spread (as the product reports it), the
others' split-conformally from their validation log-errors.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from gnnperf.bench.config import BenchConfig
from gnnperf.bench.results import MethodResult, SplitResult
from gnnperf.bench.splits import SplitRun, build_kind, graph_gflop, record_key_parts
from gnnperf.data import LatencyDataset, feature_names, split_indices
from gnnperf.data.label_noise import LabelNoise
from gnnperf.errors import GnnperfError
from gnnperf.estimators.base import LatencyEstimator
from gnnperf.estimators.baselines import (
    CriticalPath,
    KernelModelSum,
    LearnedKernelSum,
    MeasuredKernelSum,
    Roofline,
)
from gnnperf.estimators.gnn.config import TrainConfig
from gnnperf.estimators.gnn.estimator import GNNEstimator
from gnnperf.estimators.kernel import (
    KernelCostModel,
    KernelTable,
    KernelTrainConfig,
    kernel_feature_names,
    load_kernel_model,
    load_kernel_table,
    predict_log_ms,
    ranking_metrics,
    save_kernel_model,
    train_kernel_model,
    workloads_of_models,
)
from gnnperf.features.schema import HARDWARE
from gnnperf.hardware.spec import host_of
from gnnperf.metrics import metrics

#: GNN variants on the kernel graph; ``gnn_onnx_graph`` trains ``gnn`` on operator graphs.
GNN_VARIANTS = {"gnn": {}, "gnn_no_aux": {"aux_weight": 0.0}, "gnn_no_hw": {"use_hw": False}}
BASELINES = ("measured_kernel_sum", "learned_kernel_sum", "kernel_model_sum", "roofline",
             "critical_path")
#: additive methods that learn from data (the GNN must beat the best of them)
LEARNED_ADDITIVE = ("learned_kernel_sum", "kernel_model_sum", "roofline", "critical_path")


def pin_unvaried_hardware(graphs: list[Data], train_idx: Sequence[int],
                          test_idx: Sequence[int]) -> list[str]:
    """Hardware inputs that never varied in training carry no learned meaning: a test
    graph's value is set to the training one (e.g. the reference-kernel times of a held-out
    CPU when no training CPU measured them). Returns the columns pinned."""
    pinned: list[str] = []
    for attr, names in (("x", feature_names()), ("x_kernel", kernel_feature_names()),
                        ("x_candidates", kernel_feature_names())):
        if not hasattr(graphs[train_idx[0]], attr):
            continue
        cols = [j for j, n in enumerate(names) if n.startswith("hw_")]
        if getattr(graphs[train_idx[0]], attr).shape[1] != len(names):
            continue  # operator graphs have their own node columns
        train = torch.cat([getattr(graphs[i], attr)[:, cols] for i in train_idx])
        if not len(train):
            continue  # no training graph has rows of this kind (no best-of candidates)
        lo, hi = train.min(0).values, train.max(0).values
        constant = [k for k in range(len(cols)) if lo[k] == hi[k]]
        for i in test_idx:
            x = getattr(graphs[i], attr)
            differ = [k for k in constant if not torch.all(x[:, cols[k]] == lo[k])]
            if not differ:
                continue
            x = x.clone()  # the dataset's cached items share their tensors
            for k in differ:
                x[:, cols[k]] = lo[k]
                if names[cols[k]] not in pinned:
                    pinned.append(names[cols[k]])
            graphs[i] = graphs[i].clone()
            setattr(graphs[i], attr, x)
    return pinned


def drop_untrained_builds(builds: Sequence[str], train_idx: Sequence[int],
                          test_idx: Sequence[int]) -> tuple[list[int], str]:
    """The test records whose build kind some training record has, and a note naming the
    rest: no method can predict a kind it never saw (a held-out CPU whose training CPUs
    were never measured ``best-of``), so those are left out of the scores, and said."""
    trained = {build_kind(builds[i]) for i in train_idx}
    kept = [i for i in test_idx if build_kind(builds[i]) in trained]
    if len(kept) == len(test_idx):
        return kept, ""
    kinds = sorted({build_kind(builds[i]) for i in test_idx} - trained)
    return kept, (f"{len(test_idx) - len(kept)} test records left out: build "
                  f"{', '.join(kinds)} has no training record")


def held_out_workloads(model_workloads: dict[str, set[str]], test_models: set[str],
                       train_models: set[str]) -> set[str]:
    """Workloads the kernel model of a run must not learn: those of its test models that
    no training model has. A workload a training model shares reaches every other method
    through that model's per-kernel labels, so hiding it from the kernel model alone would
    only handicap the methods that read it."""
    def union(models: set[str]) -> set[str]:
        return set().union(*(w for m, w in model_workloads.items() if m in models))

    return union(test_models) - union(train_models)


@dataclass
class SplitKernelModel:
    """The kernel cost model one run's methods read, or why there is none."""

    path: Path | None
    #: what it was trained on, or why there is none (the run's notes say it)
    note: str
    #: its figures on the workloads it was kept from, in strict runs (unseen workloads)
    unseen: dict[str, Any] | None = None


def split_kernel_model(root: Path, test_models: set[str], train_models: set[str],
                       holdout_cpu: str | None, seed: int, cfg: BenchConfig, folder: Path,
                       strict: bool = False) -> SplitKernelModel:
    """The kernel cost model this run's methods read, trained without the workloads only
    its test models have (``strict``: without any workload of theirs, and then scored on
    them: the kernel model on workloads it never saw) and without a held-out CPU."""
    try:
        table = load_kernel_table(root, progress=False)
    except GnnperfError as exc:
        return SplitKernelModel(None, f"no kernel model: {exc}")
    model_workloads = workloads_of_models(root)
    leaked = held_out_workloads(model_workloads, test_models, train_models)
    if strict:  # held-out architectures: none of their workloads, shared or not
        leaked |= set().union(*(w for m, w in model_workloads.items() if m in test_models))
    hidden = np.isin(table.workload, list(leaked))
    on_cpu = np.ones(len(hidden), dtype=bool)
    if holdout_cpu is not None:
        on_cpu = np.array([host_of(str(h)) != holdout_cpu for h in table.hw_id])
    kept = table.subset(np.flatnonzero(~hidden & on_cpu))
    workloads = len(np.unique(kept.workload))
    if workloads < 10:
        return SplitKernelModel(
            None, "no kernel model: fewer than 10 workloads outside the test models")
    kcfg = KernelTrainConfig(seed=seed, epochs=cfg.rule.max_epochs,
                             patience=cfg.rule.patience_epochs, val_frac=0.15, test_frac=0.05,
                             booster_rounds=cfg.rule.max_trees,
                             booster_patience=cfg.rule.patience_trees)
    result = train_kernel_model(kept, kcfg, progress=False, scored=("val",))
    path = save_kernel_model(result, kcfg, kept, folder / "kernel_model.pt")
    left_out = ("every workload of the test models" if strict
                else "the workloads only test models have")
    note = (f"kernel model: {len(kept)} schedules of {workloads} workloads "
            f"({len(leaked)} workloads left out: {left_out})")
    unseen_rows = np.flatnonzero(hidden & on_cpu)
    unseen = None
    if strict and len(unseen_rows):
        unseen = unseen_workload_figures(result.model, table, unseen_rows)
    return SplitKernelModel(path, note, unseen)


def unseen_workload_figures(model: KernelCostModel, table: KernelTable, rows: np.ndarray
                            ) -> dict[str, Any]:
    """The kernel model on ``rows`` (schedules of workloads it never saw): per-schedule
    MAPE and within-workload Spearman, over all rows and per CPU, because each CPU's
    labels carry their own noise floor (Zen 3's kernel A/A error is about twice Zen 4's)
    and a pooled figure cannot say how much of the error is the labels'."""
    pred = predict_log_ms(model, table.x[rows])
    true = table.log_ms[rows]
    host = {h: host_of(str(h)) for h in np.unique(table.hw_id[rows])}
    cpus = np.array([host[h] for h in table.hw_id[rows]])

    def figures(mask: np.ndarray) -> dict[str, Any]:
        rank = ranking_metrics(pred[mask], true[mask], table.group[rows[mask]])
        rho = rank["group_spearman"]
        return {"schedules": int(mask.sum()),
                "workloads": int(len(np.unique(table.workload[rows[mask]]))),
                "schedule_mape": metrics(np.exp(pred[mask]), np.exp(true[mask]))["mape"],
                # JSON has no NaN: None where no group could be ranked
                "group_spearman": float(rho) if math.isfinite(rho) else None,
                "ranked_groups": int(rank["ranked_groups"])}

    return {**figures(np.ones(len(rows), dtype=bool)),
            "by_cpu": {str(c): figures(cpus == c) for c in sorted(set(cpus))}}


def one_state_twins(test: Sequence[Data]) -> dict[int, Data]:
    """The ``default`` test graphs at one machine state: what thread invariance means to a
    user, who predicts one model at 1 and 2 threads from one ``gnnperf hw`` description.

    Each record carries the machine state measured beside its own label, so a model's
    1-thread and 2-thread records are otherwise predicted at two states. Per (model, CPU
    and ISA), the record at the most threads is the anchor; each record of the group (by
    test position) gets a twin: its own graph with every hardware column set to the
    anchor's. Only groups whose graphs are serial throughout (every kernel and candidate
    reads the one-thread view) are twinned: there the anchor's columns *are* that state's
    one-thread view, the same at every thread count."""
    width = len(HARDWARE)
    groups: dict[str, list[tuple[int, int]]] = {}
    for i, g in enumerate(test):
        if build_kind(str(g.build)) != "default":
            continue
        model, machine, threads, _ = record_key_parts(str(g.key))
        if bool(g.node_serial.all()) and bool(g.candidates_serial.all()):
            groups.setdefault(f"{model}|{machine}", []).append((threads, i))
    twins: dict[int, Data] = {}
    for members in groups.values():
        if len({t for t, _ in members}) < 2:
            continue
        anchor = test[max(members)[1]]
        for _, i in members:
            twin = test[i].clone()
            for table in ("x", "x_kernel"):
                rows = getattr(twin, table)
                tail = getattr(anchor, table)[0, -width:].expand(rows.shape[0], width)
                setattr(twin, table, torch.cat([rows[:, :-width], tail], dim=1))
            twins[i] = twin
    return twins


def _gnn_config(run: SplitRun, cfg: BenchConfig, kernel_model: str, overrides: dict[str, Any],
                device: str) -> TrainConfig:
    """The one training configuration of every GNN variant of a run (the budget rule's)."""
    rule = cfg.rule
    return TrainConfig(split=run.kind, holdout=run.holdout, seed=run.seed,
                       epochs=rule.max_epochs, patience=rule.patience_epochs, hidden=cfg.hidden,
                       layers=cfg.layers, batch_size=cfg.batch_size, lr=cfg.lr,
                       max_minutes=rule.safety_minutes, ensemble=cfg.ensemble,
                       kernel_model=kernel_model, device=device, **overrides)


def _score(estimator: LatencyEstimator, train: Sequence[Data], val: Sequence[Data],
           test: Sequence[Data], twins: dict[int, Data] | None = None) -> MethodResult:
    """Fit ``estimator`` and predict the test graphs (and ``twins``, test position →
    graph: :func:`one_state_twins`): one method's result."""
    fitted = estimator.fit(train, val)
    est = fitted.predict(test)
    if len(est.ms) != len(test):
        raise GnnperfError(f"{estimator.name} was not scored on every test graph")
    twin_ms = None
    if twins:
        positions = sorted(twins)
        twin_ms = np.full(len(test), np.nan)
        twin_ms[positions] = fitted.predict([twins[i] for i in positions]).ms
    return MethodResult(est.ms, est.low_ms, est.high_ms, est.training, twin_ms)


def run_split(ds: LatencyDataset, ds_onnx: LatencyDataset, run: SplitRun, cfg: BenchConfig,
              device: str = "cpu") -> SplitResult:
    """Train and score every method on ``run`` (the networks on ``device``)."""
    start = time.time()
    train_idx, val_idx, test_idx = split_indices(ds, run.kind, seed=run.seed,
                                                 holdout=run.holdout)
    test_idx, note = drop_untrained_builds([str(d.build) for d in ds.record_ids()],
                                           train_idx, test_idx)
    notes = [note] if note else []
    indices = (train_idx, val_idx, test_idx)
    graphs = [ds[i] for i in range(len(ds))]
    onnx_graphs = [ds_onnx[i] for i in range(len(ds_onnx))]
    holdout_cpu = run.holdout if run.kind == "leave-cpu-out" else None
    pinned = pin_unvaried_hardware(graphs, train_idx, test_idx)
    pin_unvaried_hardware(onnx_graphs, train_idx, test_idx)
    if pinned:
        notes.append("hardware inputs no training record varied, set to the training value on "
                     "the test side: " + ", ".join(pinned))
    train = [graphs[i] for i in train_idx]
    val = [graphs[i] for i in val_idx]
    test = [graphs[i] for i in test_idx]
    methods: dict[str, MethodResult] = {}
    noise = LabelNoise.of(ds.folder)  # what each GNN's loss weights follow
    twins = one_state_twins(test)
    with tempfile.TemporaryDirectory(prefix="gnnperf-bench-") as tmp:
        split_kernel = split_kernel_model(
            ds.folder.root, {str(g.model_id) for g in test}, {str(g.model_id) for g in train},
            holdout_cpu, run.seed, cfg, Path(tmp),
            strict=run.kind == "leave-architecture-out")
        kernel_path = split_kernel.path
        notes.append(split_kernel.note)
        kernel_model = str(kernel_path) if kernel_path is not None else "none"
        for name, overrides in GNN_VARIANTS.items():
            gnn = GNNEstimator(_gnn_config(run, cfg, kernel_model, overrides, device), name,
                               noise)
            methods[name] = _score(gnn, train, val, test, twins if name == "gnn" else None)
        onnx_gnn = GNNEstimator(_gnn_config(run, cfg, "none", {}, device), "gnn_onnx_graph",
                                noise)
        onnx_train, onnx_val, onnx_test = ([onnx_graphs[i] for i in idx] for idx in indices)
        methods["gnn_onnx_graph"] = _score(onnx_gnn, onnx_train, onnx_val, onnx_test)
        if kernel_path is not None:
            summed = KernelModelSum(load_kernel_model(kernel_path)[0])
            methods["kernel_model_sum"] = _score(summed, train, val, test)
    methods["measured_kernel_sum"] = _score(MeasuredKernelSum(), train, val, test)
    rule = cfg.rule
    learned = LearnedKernelSum(seed=run.seed, max_rounds=rule.max_trees,
                               patience=rule.patience_trees)
    methods["learned_kernel_sum"] = _score(learned, train, val, test)
    methods["critical_path"] = _score(CriticalPath(trees=learned.trees), train, val, test)
    methods["roofline"] = _score(Roofline(), train, val, test)
    test_info = {
        "key": [str(g.key) for g in test],
        "true_ms": [math.exp(float(g.y)) for g in test],
        "build": [build_kind(str(g.build)) for g in test],
        "cpu": [host_of(str(g.hw_id)) for g in test],
        "family": [str(g.family) for g in test],
        "model_id": [str(g.model_id) for g in test],
        "gflop": [round(graph_gflop(g), 6) for g in test],
    }
    return SplitResult(run, test_info, methods, notes, (time.time() - start) / 60,
                       kernel_model_unseen=split_kernel.unseen)
