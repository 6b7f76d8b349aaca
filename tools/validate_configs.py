"""Compare training configurations on the validation records of ``train.py``'s split.

The random split of seed 0 (what ``python train.py`` reports) is used as is, and its
test records are never read: each configuration early-stops on an inner slice of the
training models (one in nine) and is scored on the split's validation records measured
under v2, overall and per build. The kernel model the networks read is trained the way
the benchmark trains one (:func:`gnnperf.bench.methods.split_kernel_model`): without the
workloads only validation or test models have.

    python tools/validate_configs.py '{}' '{"kernel_residual": false}'

Each argument is a JSON object of ``TrainConfig`` overrides. Heavy (a kernel model,
then one network per configuration): run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from gnnperf.bench.config import BenchConfig
from gnnperf.bench.methods import split_kernel_model
from gnnperf.data import LatencyDataset, is_testable, split_indices
from gnnperf.estimators.gnn.training import TrainConfig, train_model
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.metrics import breakdown, metrics


def inner_split(ds: LatencyDataset, train: list[int], seed: int = 0
                ) -> tuple[list[int], list[int]]:
    """(inner train, inner validation): one in nine training groups stop training early."""
    groups = {i: str(ds[i].group) for i in train}
    names = np.random.default_rng(seed).permutation(sorted(set(groups.values())))
    stop = set(names[: max(1, len(names) // 9)])
    return ([i for i in train if groups[i] not in stop], [i for i in train if groups[i] in stop])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="+", help="JSON objects of TrainConfig overrides")
    ap.add_argument("--root", default=None)
    ap.add_argument("--max-minutes", type=float, default=6.0, help="per training")
    ap.add_argument("--ensemble", type=int, default=1)
    args = ap.parse_args()
    ds = LatencyDataset(args.root)
    train, val, test = split_indices(ds, "random", seed=0)
    scored = [i for i in val if is_testable(ds[i])]
    inner_train, inner_val = inner_split(ds, train)
    models = {i: str(ds[i].model_id) for i in range(len(ds))}
    with tempfile.TemporaryDirectory(prefix="gnnperf-validate-") as tmp:
        kernel = split_kernel_model(
            ds.folder.root, {models[i] for i in val + test}, {models[i] for i in train},
            None, 0, BenchConfig(), Path(tmp))
        kernel_path = kernel.path
        print(kernel.note, flush=True)
        builds = [BuildConfig.parse(str(ds[i].build)).kind for i in scored]
        true = np.array([float(np.exp(float(ds[i].y))) for i in scored])
        for text in args.configs:
            overrides = json.loads(text)
            cfg = TrainConfig(**{"ensemble": args.ensemble, "max_minutes": args.max_minutes,
                                 "kernel_model": str(kernel_path or "none"), **overrides})
            result = train_model(ds, cfg, progress=False,
                                 indices=(inner_train, inner_val, scored))
            pred = np.asarray(result.test_pred_ms)
            per_build = breakdown(pred, true, builds)
            print(f"{text:40s} v2 validation MAPE {metrics(pred, true)['mape']:6.2f} "
                  f"({len(scored)} records; "
                  + ", ".join(f"{k} {v['mape']:.2f}/{v['n']}" for k, v in per_build.items())
                  + f"; {result.metrics['train_minutes']:.1f} min)", flush=True)


if __name__ == "__main__":
    main()
