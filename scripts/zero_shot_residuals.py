"""What is left of the GNN's error on a held-out CPU, and what could take it out.

Reads the benchmark's stored leave-one-CPU-out runs (their test records' predictions) and
the dataset's records, and prints per held-out CPU:

- the MAPE after one factor per calibration cell (build kind × threads), fitted on all of
  the CPU's test records: the best a per-cell few-shot correction could do;
- the same with, besides, a weight per kernel class (dense conv, depthwise conv, matmul,
  reductions, data movement) on each record's share of kernel time, also fitted on all
  test records (an oracle): whether a richer few-shot fit by kernel class would help;
- the MAPE after scaling each prediction by (the record's reference-kernel times / the
  training CPUs' mean at its thread count) ** alpha (gemm and stream, geometric mean), for
  alpha from 0 to 1, and alpha chosen on the other held-out CPUs: whether the references
  timed beside a label would carry a new CPU's speed as an offset.

    python scripts/zero_shot_residuals.py benchmarks/interim/runs/*/leave_cpu_out-*.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from typing import Any

import numpy as np

from gnnperf.calibrate.store import cell_of
from gnnperf.hardware.spec import host_of
from gnnperf.store.shards import iter_lines, latest_records

CLASSES = ("conv", "dwconv", "matmul", "reduce", "move")
REDUCTIONS = {"layer_norm", "mean", "softmax", "max_pool2d", "avg_pool2d", "sum", "max"}
ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)


def kernel_class(node: dict[str, Any]) -> str:
    ops = set(node["ops"])
    if "conv2d" in ops:
        weight = node["in_shapes"][1] if len(node["in_shapes"]) > 1 else []
        return "dwconv" if len(weight) == 4 and weight[1] == 1 else "conv"
    if ops & {"matmul", "dense"}:
        return "matmul"
    return "reduce" if ops & REDUCTIONS else "move"


def mape(log_error: np.ndarray) -> float:
    return float(np.mean(np.abs(np.exp(-log_error) - 1)) * 100)


def reference_log_ms(record: dict[str, Any]) -> float:
    """The record's reference time: the mean log median of its gemm and stream kernels."""
    return 0.5 * sum(math.log(record["reference"][k]["median_ms"]) for k in ("gemm", "stream"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="leave_cpu_out-*.json files of `gnnperf bench`")
    ap.add_argument("--root", default="datasets")
    ap.add_argument("--method", default="gnn")
    args = ap.parse_args()
    records = {r["key"]: r for r in latest_records(f"{args.root}/shards")}
    graphs = {o["graph_id"]: o["graph"] for o in iter_lines(f"{args.root}/shards",
                                                             kinds=("graph",))}
    # each (model, build kind, threads, CPU)'s measured share of kernel time per class: the
    # kernel breakdown of a record as another CPU measured it
    shares: dict[tuple[str, str, int, str], np.ndarray] = {}
    refs: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in records.values():
        if "reference" in r:
            refs[(host_of(r["hw_id"]), int(r["hw"]["threads"]))].append(
                reference_log_ms(r))
        kernels, graph = r.get("kernels_ms"), graphs.get(r["graph_id"])
        if not kernels or graph is None or len(kernels) != len(graph["nodes"]):
            continue
        by_class = dict.fromkeys(CLASSES, 0.0)
        for node, ms in zip(graph["nodes"], kernels, strict=True):
            by_class[kernel_class(node)] += ms
        total = sum(by_class.values())
        shares[(r["model_id"], cell_of(r["build"], 1).split("/")[0], int(r["hw"]["threads"]),
                host_of(r["hw_id"]))] = np.array([by_class[c] / total for c in CLASSES])
    # each (CPU, threads)'s median reference time, read once for every record below
    ref_median = {key: statistics.median(v) for key, v in refs.items()}
    scans: dict[str, dict[float, float]] = {}
    for path in args.runs:
        run = json.load(open(path))
        held = run["run"]["holdout"]
        test = run["test"]
        pred = np.array(run["methods"][args.method]["pred_ms"])
        true = np.array(test["true_ms"])
        recs = [records[k] for k in test["key"]]
        err = np.log(true / pred)
        cells = [cell_of(r["build"], int(r["hw"]["threads"])) for r in recs]
        names = sorted(set(cells))
        onehot = np.array([[c == n for n in names] for c in cells], float)
        per_cell = onehot @ np.array([np.median(err[[c == n for c in cells]]) for n in names])
        x, keep = [], []
        for i, r in enumerate(recs):
            other = [v for (m, b, t, c), v in shares.items()
                     if m == r["model_id"] and b == cells[i].split("/")[0]
                     and t == int(r["hw"]["threads"]) and c != held]
            if other:
                x.append(np.mean(other, axis=0))
                keep.append(i)
        design = np.hstack([onehot[keep], np.array(x)[:, :-1]])
        coef, *_ = np.linalg.lstsq(design, err[keep], rcond=None)
        offset = np.array([
            reference_log_ms(r)
            - statistics.mean(m for (c, t), m in ref_median.items()
                              if t == int(r["hw"]["threads"]) and c != held)
            for r in recs])
        scans[held] = {a: mape(err - a * offset) for a in ALPHAS}
        print(f"{held}: {len(recs)} records; MAPE {mape(err):.1f}; one factor per cell "
              f"{mape(err - per_cell):.1f}; with kernel-class weights ({len(keep)} records "
              f"with a breakdown) {mape(err[keep] - design @ coef):.1f} against "
              f"{mape(err[keep] - per_cell[keep]):.1f} on the same records")
    for held, scan in scans.items():
        others = [s for h, s in scans.items() if h != held]
        chosen = (min(ALPHAS, key=lambda a: float(np.mean([s[a] for s in others])))
                  if others else 0.0)
        print(f"{held}: reference offset, MAPE by alpha "
              + ", ".join(f"{a:g}: {m:.1f}" for a, m in scan.items())
              + f"; alpha chosen on the others {chosen:g} gives {scan[chosen]:.1f}")


if __name__ == "__main__":
    main()
