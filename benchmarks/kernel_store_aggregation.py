"""Does more of MetaSchedule's PerStoreFeature than its mean over stores carry across workloads?

The kernel model reads PerStoreFeature averaged over a program's stores
(:func:`gnnperf.features.analyses.ms_store_features`). The average mixes the main
computation's store with its padding, cache and epilogue stores, and it forgets how many
there are; TVM's own cost model instead scores each store and sums. This benchmark replays
a sample of the kernel dataset's programs (every record of a stable hash-sampled share of
the workloads), extracts their per-store matrices and sets the kernel model's trees
(XGBoost with the shipped settings) on the kernel model's columns against the same plus
four aggregates of the stores: their maximum, the main store's row (most loop iterations,
then most arithmetic), the log of their sum and the store count.

Scored on workloads no training row has: a random workload split, and the benchmark's
held-out-architecture folds (test: every workload of fold T's models; validation: those
only fold T+1's models have). Validation is where the choice would be made; test is
reported.

    python benchmarks/kernel_store_aggregation.py [--root datasets] [--fraction 0.45]
        [--seeds 2] [--folds 0,1,2,3,4] [--cache /tmp/store_sample.npz]
        [--out benchmarks/kernel_store_aggregation.json]

Replaying costs ~12 ms a program on the 2-core guests (~25 min for 45% of the dataset;
``--cache`` keeps the sample). Training only, no measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from gnnperf.atomic import write_bytes, write_text
from gnnperf.estimators.kernel import dataset as kernel_dataset
from gnnperf.estimators.kernel import group_split, ranking_metrics
from gnnperf.estimators.kernel.boosted import booster_log_ms, fit_booster
from gnnperf.features.vocabulary import MS_FEATURE_DIM
from gnnperf.metrics import breakdown, group_error_decomposition, metrics
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.shards import iter_shard, shard_paths

sys.path.insert(0, str(Path(__file__).parent))
from kernel_model import architecture_split  # noqa: E402  (a sibling benchmark)

#: PerStoreFeature's columns: the first 7 count float arithmetic, column 161 is the
#: store's outer loop product (its iterations); values are log2(1 + x)
ARITHMETIC = slice(0, 7)
ITERATIONS = 161
AGGREGATES = ("max", "main", "log_sum")


def _sampled(workload_id: str, fraction: float) -> bool:
    return int(hashlib.sha256(workload_id.encode()).hexdigest()[:8], 16) / 2**32 < fraction


def _records(folder: DatasetFolder, fraction: float
             ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Every workload's MetaSchedule JSON, and a stream of the sampled workloads' records
    (two passes, so the records are never all in memory)."""
    workloads: dict[str, Any] = {}
    for path in shard_paths(folder.kernels):
        for o in iter_shard(path, lambda line: '"kind":"kernel_record"' not in line):
            if o.get("kind") == "kernel_workload":
                workloads[o["workload_id"]] = o["ms_workload"]

    def keep(line: str) -> bool:
        found = kernel_dataset._WORKLOAD_ID.search(line)
        return '"kind":"kernel_record"' in line and found is not None \
            and _sampled(found.group(1), fraction)

    def stream() -> Iterator[dict[str, Any]]:
        for path in shard_paths(folder.kernels):
            for o in iter_shard(path, keep):
                if o.get("kind") == "kernel_record" and o["workload_id"] in workloads \
                        and o.get("features"):
                    yield o

    return workloads, stream()


def aggregate(stores: np.ndarray) -> np.ndarray:
    """(max, main store, log2 of the sum) of a program's per-store rows, and their count."""
    if not len(stores):
        return np.zeros(len(AGGREGATES) * MS_FEATURE_DIM + 1, dtype=np.float32)
    arithmetic = np.log2(np.sum(2.0 ** stores[:, ARITHMETIC] - 1, axis=1) + 1)
    main = np.lexsort((arithmetic, stores[:, ITERATIONS]))[-1]
    return np.concatenate([stores.max(0), stores[main],
                           np.log2(np.sum(2.0 ** stores - 1, axis=0) + 1),
                           [len(stores)]]).astype(np.float32)


def sample(root: str, fraction: float) -> dict[str, np.ndarray]:
    """The sampled records' kernel-model rows, labels and per-store aggregates."""
    from tvm.s_tir.meta_schedule.database import Workload

    from gnnperf.features.analyses import ms_store_matrix

    workloads, records = _records(DatasetFolder.resolve(root), fraction)
    parsed: dict[str, Any] = {}
    columns: dict[str, list[Any]] = {k: [] for k in ("workload", "hw_id", "log_ms", "x", "a")}
    for rec in tqdm(records, desc="replaying", unit="program"):
        wid = rec["workload_id"]
        if wid not in parsed:
            parsed[wid] = Workload.from_json(workloads[wid])
        func, target = kernel_dataset._scheduled(kernel_dataset._ms_record(rec), parsed[wid])
        stores = ms_store_matrix(func, target)
        columns["workload"].append(wid)
        columns["hw_id"].append(rec["hw_id"])
        columns["log_ms"].append(float(np.log(rec["latency"]["median_ms"])))
        columns["x"].append(kernel_dataset._row(rec, kernel_dataset._stored_statics(rec)))
        columns["a"].append(aggregate(stores[:, :MS_FEATURE_DIM]))
    return {"workload": np.asarray(columns["workload"], dtype=str),
            "hw_id": np.asarray(columns["hw_id"], dtype=str),
            "log_ms": np.asarray(columns["log_ms"]),
            "x": np.asarray(columns["x"], dtype=np.float32),
            "a": np.asarray(columns["a"], dtype=np.float32)}


def _scores(pred: np.ndarray, data: dict[str, np.ndarray], rows: np.ndarray,
            group: np.ndarray) -> dict[str, Any]:
    true = data["log_ms"][rows]
    cpu = [h.split("/")[0] for h in data["hw_id"][rows]]
    return {"mape": metrics(np.exp(pred), np.exp(true))["mape"], "schedules": int(len(rows)),
            **ranking_metrics(pred, true, group[rows]),
            **group_error_decomposition(pred, true, group[rows]),
            "mape_by_cpu": {k: v["mape"] for k, v in
                            breakdown(np.exp(pred), np.exp(true), cpu).items()}}


def compare(data: dict[str, np.ndarray], root: str, seeds: int, folds: list[int]
            ) -> Iterator[tuple[str, dict[str, Any]]]:
    """Base columns against base + store aggregates, per split (each yielded as it is
    done), on validation and test."""
    group = np.char.add(np.char.add(data["workload"], "|"), data["hw_id"])
    splits = {f"random workloads, seed {s}": (s, group_split(data["workload"], (0.15, 0.15), s))
              for s in range(seeds)}

    class _Rows:  # what architecture_split reads of a kernel table
        workload = data["workload"]

        def __len__(self) -> int:
            return len(data["log_ms"])

    for fold in folds:
        splits[f"held-out architectures, fold {fold}"] = (
            0, architecture_split(_Rows(), root, fold, (fold + 1) % 5))  # type: ignore[arg-type]
    inputs = {"kernel-model columns": data["x"],
              "+ store max, main, log-sum, count": np.hstack([data["x"], data["a"]])}
    for split, (seed, (train, val, test)) in splits.items():
        parts = (("train", train), ("val", val), ("test", test))
        entry: dict[str, Any] = {"workloads": {k: int(len(np.unique(data["workload"][r])))
                                               for k, r in parts}}
        for name, x in inputs.items():
            booster = fit_booster(x, data["log_ms"], train, val, seed)
            entry[name] = {
                part: _scores(booster_log_ms(booster, x[rows]).astype(float), data, rows,
                              group)
                for part, rows in (("val", val), ("test", test))}
            s = entry[name]
            print(f"{split:34s} {name:34s} val {s['val']['mape']:5.1f}% "
                  f"test {s['test']['mape']:5.1f}% (Spearman {s['test']['group_spearman']:.3f}, "
                  f"within {s['test']['within']:.3f}, between {s['test']['between']:.3f})",
                  flush=True)
        yield split, entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="datasets")
    parser.add_argument("--fraction", type=float, default=0.45,
                        help="share of the workloads sampled (by a stable hash of the id)")
    parser.add_argument("--seeds", type=int, default=2, help="random workload splits")
    parser.add_argument("--folds", default="0,1,2,3,4",
                        help="held-out-architecture folds to test on (comma-separated)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="npz that keeps the replayed sample between calls")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).with_name("kernel_store_aggregation.json"))
    args = parser.parse_args()
    if args.cache is not None and args.cache.exists():
        with np.load(args.cache, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    else:
        data = sample(args.root, args.fraction)
        if args.cache is not None:
            buf = io.BytesIO()
            np.savez_compressed(buf, **data)
            write_bytes(args.cache, buf.getvalue())
    report: dict[str, Any] = {"fraction": args.fraction, "schedules": int(len(data["log_ms"])),
                              "workloads": int(len(np.unique(data["workload"]))),
                              "hardware": sorted(set(data["hw_id"].tolist()))}
    for split, entry in compare(data, args.root, args.seeds,
                                [int(f) for f in args.folds.split(",") if f]):
        report[split] = entry
        write_text(args.out, json.dumps(report, indent=1) + "\n")  # each split as it lands
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
