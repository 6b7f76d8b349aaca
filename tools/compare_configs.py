"""Compare training configurations by grouped cross-validation, never touching test.

The test set of the random split (seed 0, what ``train.py`` reports) is set aside; the
remaining models are cut into K groups of whole ONNX models. Each configuration is
trained K times, each time early-stopping on an inner validation slice and scored on
the held-out fold. Prints fold MAPE mean ± std per configuration.

    python tools/compare_configs.py --folds 3 '{}' '{"loss": "huber"}' '{"hidden": 64}'

Each argument is a JSON object of ``TrainConfig`` overrides. Heavy: run it on a quiet
machine (the collector's guard pauses while it runs).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from gnnperf.data import LatencyDataset, split_indices
from gnnperf.estimators.gnn.training import TrainConfig, train_model

Split = tuple[list[int], list[int], list[int]]


def folds(ds: LatencyDataset, k: int, seed: int = 0) -> list[Split]:
    """(inner train, inner val, fold) index triples over the non-test part of the split."""
    train, val, _ = split_indices(ds, "random", seed=0)
    pool = np.array(sorted(train + val))
    groups = np.array([str(ds[int(i)].group) for i in pool])
    names = np.random.default_rng(seed).permutation(sorted(set(groups)))
    out = []
    for f in range(k):
        held = set(names[f::k])
        fold = [int(i) for i, g in zip(pool, groups, strict=True) if g in held]
        rest_names = [n for n in names if n not in held]
        inner_val_names = set(rest_names[: max(1, len(rest_names) // 9)])
        inner_val = [int(i) for i, g in zip(pool, groups, strict=True) if g in inner_val_names]
        inner_train = [int(i) for i, g in zip(pool, groups, strict=True)
                       if g not in held and g not in inner_val_names]
        out.append((inner_train, inner_val, fold))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="+", help="JSON objects of TrainConfig overrides")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--root", default=None)
    ap.add_argument("--max-minutes", type=float, default=3.0, help="per training")
    ap.add_argument("--device", default="cpu", help="torch device to train on (cuda: a GPU)")
    args = ap.parse_args()
    ds = LatencyDataset(args.root)
    cuts = folds(ds, args.folds)
    for text in args.configs:
        overrides = json.loads(text)
        cfg = TrainConfig(**{"ensemble": 1, "max_minutes": args.max_minutes,
                             "device": args.device, **overrides})
        runs = [train_model(ds, cfg, progress=False, indices=cut).metrics for cut in cuts]
        scores = [m["test"]["mape"] for m in runs]
        # a configuration stopped by the cap rather than by early stopping had less than
        # it needed: say so beside its score
        print(f"{text:50s} fold MAPE {np.mean(scores):6.2f} ± {np.std(scores):5.2f}  "
              f"({', '.join(f'{s:.2f}' for s in scores)}); epochs "
              f"{', '.join(str(m['epochs_run']) for m in runs)}, best "
              f"{', '.join(str(m['best_epochs'][0]) for m in runs)}, "
              f"{sum(m['members_stopped_by_time_cap'] for m in runs)} of {len(runs)} "
              f"stopped by the {cfg.max_minutes:g}-min cap", flush=True)


if __name__ == "__main__":
    main()
