"""Test-split metrics of a checkpoint, overall and per machine and build.

Rebuilds the split the checkpoint was trained with (its ``train_config``) on the dataset
it names by fingerprint, predicts the test graphs, and prints where the error lives.
Checkpoints written since ``test_by_host`` was added carry the same figures in
``metrics.json``; this script gives them for older ones.

    python tools/evaluate_checkpoint.py [--checkpoint checkpoints/] [--root datasets/]
        [--members]

``--members`` adds each ensemble member's test MAPE alone: what the ensemble adds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from torch_geometric.loader import DataLoader

from gnnperf.data import LatencyDataset, split_indices
from gnnperf.errors import CheckpointError
from gnnperf.estimators.gnn.checkpoint import Checkpoint
from gnnperf.estimators.gnn.network import EnsembleGNN
from gnnperf.estimators.gnn.training import (
    TrainConfig,
    error_breakdowns,
    metrics,
    predict_loader,
)
from gnnperf.prediction.api import DEFAULT_CHECKPOINT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    ap.add_argument("--root", type=Path, default=None, help="dataset folder (default: shipped)")
    ap.add_argument("--members", action="store_true", help="also score each member alone")
    args = ap.parse_args()
    checkpoint = Checkpoint.load(args.checkpoint)
    ds = LatencyDataset(args.root)
    if ds.fingerprint != checkpoint.dataset_fingerprint:
        raise CheckpointError(f"checkpoint was trained on dataset "
                              f"{checkpoint.dataset_fingerprint}, this one is {ds.fingerprint}: "
                              "the split would differ")
    cfg = TrainConfig(**checkpoint.train_config)
    _, _, test_idx = split_indices(ds, cfg.split, seed=cfg.seed, val_frac=cfg.val_frac,
                                   test_frac=cfg.test_frac, holdout=cfg.holdout)
    model, scaler = checkpoint.model()
    loader = DataLoader([scaler(ds[i]) for i in test_idx], batch_size=256)
    test = predict_loader(model, loader)
    pred, true = test.ms(), np.exp(test.y)
    report = {"test": metrics(pred, true), **error_breakdowns(pred, true, ds, test_idx)}
    if args.members:
        report["member_test_mape"] = [
            metrics(predict_loader(EnsembleGNN(model.config, [m]), loader).ms(), true)["mape"]
            for m in model.members]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
