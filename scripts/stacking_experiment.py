"""Experiment: does the GNN gain from reading per-kernel tree predictions on its nodes?

The learned kernel sum (gradient-boosted trees on in-model kernel labels, summed) beats
the GNN on `sampled` and `tuned` builds, and the GNN's own per-kernel head over-predicts
the tuned kernels of models it never saw. Here every node also reads the trees'
predicted log time (stacking): out-of-fold for training graphs (``--folds`` folds of
whole-model groups, so no node reads a prediction of trees fitted on its own label), and
from trees fitted on every training graph for validation and test. Scored on
validation only (configurations are never chosen on test); ``--no-stack`` trains the
same GNN without the column, for the baseline.

    python scripts/stacking_experiment.py --root DIR [--folds 5] [--max-minutes 14]
        [--no-stack] [--out FILE.json]

Training only, no measurement.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from gnnperf.atomic import write_text
from gnnperf.data import LatencyDataset, split_indices
from gnnperf.estimators.baselines import LearnedKernelModel
from gnnperf.estimators.gnn.training import TrainConfig, predict_loader, train_model
from gnnperf.hardware.spec import FEATURE_NAMES as HW_FEATURE_NAMES
from gnnperf.metrics import breakdown, metrics


def _with_column(graph: Data, log_ms: np.ndarray) -> Data:
    """The graph with one more node column, before the hardware block (kept last)."""
    out = graph.clone()
    hw = len(HW_FEATURE_NAMES)
    col = torch.tensor(log_ms, dtype=out.x.dtype).unsqueeze(-1)
    out.x = torch.cat([out.x[:, :-hw], col, out.x[:, -hw:]], dim=-1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--max-minutes", type=float, default=14.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-stack", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cfg = TrainConfig(ensemble=1, max_minutes=args.max_minutes, seed=args.seed)
    ds = LatencyDataset(args.root)
    train, val, test = split_indices(ds, "random", seed=cfg.seed, val_frac=cfg.val_frac,
                                     test_frac=cfg.test_frac)
    graphs = [ds[i] for i in range(len(ds))]
    started = time.time()
    trees_val = {}
    if not args.no_stack:
        rng = np.random.default_rng(args.seed)
        groups = sorted({str(graphs[i].group) for i in train})
        fold_of = dict(zip(groups, rng.permutation(len(groups)) % args.folds, strict=True))
        log_ms: dict[int, np.ndarray] = {}
        for k in range(args.folds):
            inside = [i for i in train if fold_of[str(graphs[i].group)] == k]
            trees = LearnedKernelModel(seed=args.seed).fit(
                [graphs[i] for i in train if fold_of[str(graphs[i].group)] != k])
            log_ms.update({i: np.log(trees.kernel_ms(graphs[i])) for i in inside})
        trees = LearnedKernelModel(seed=args.seed).fit([graphs[i] for i in train])
        log_ms.update({i: np.log(trees.kernel_ms(graphs[i])) for i in val + test})
        val_true = np.array([float(graphs[i].y.exp()) for i in val])
        trees_val = metrics(trees.predict_sum([graphs[i] for i in val]), val_true)
        graphs = [_with_column(g, log_ms[i]) if i in log_ms else g
                  for i, g in enumerate(graphs)]
    trees_minutes = (time.time() - started) / 60
    result = train_model(graphs, cfg, progress=False, indices=(train, val, test))
    loader = DataLoader([result.scaler(graphs[i]) for i in val], batch_size=256)
    pred = predict_loader(result.model, loader).ms()
    true = np.array([float(graphs[i].y.exp()) for i in val])
    by_kind = breakdown(pred, true, [str(graphs[i].build).split(":")[0] for i in val])
    m = result.metrics
    report = {
        "stacked": not args.no_stack, "folds": args.folds, "dataset": ds.fingerprint,
        "trees_minutes": round(trees_minutes, 2), "train_minutes": round(m["train_minutes"], 2),
        "best_epochs": m["best_epochs"], "val_graphs": m["val_graphs"], "val": m["val"],
        "val_by_build_kind": by_kind, "learned_kernel_sum_val": trees_val,
    }
    print(f"GNN{' + stacked trees' if report['stacked'] else ''}: validation MAPE "
          f"{m['val']['mape']:.2f}% on {m['val_graphs']} graphs; by build kind: "
          + ", ".join(f"{k} {v['mape']:.1f}% ({v['n']})" for k, v in by_kind.items()))
    if trees_val:
        print(f"learned kernel sum (the same trees, summed): validation MAPE "
              f"{trees_val['mape']:.2f}%")
    if args.out:
        write_text(args.out, json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
