"""The shipped checkpoint, 0 shots, on the records of a CPU it never trained on.

The benchmark measures 0 shots on checkpoints it trains without each CPU; this checks the
checkpoint users actually get, on a CPU's records collected after it was trained, through
the product's own path (``Predictor.predict_graphs``, no calibration): MAPE, Spearman,
and the coverage of the 90% interval with the unseen-CPU prior and without it (its own
spread alone), overall and per calibration cell. With ``--calibrated``, after the few-shot
correction ``gnnperf calibrate`` stored for that CPU (run it there first), scored on the
records of the models calibration did not measure. Per cell it also prints the median
log-ratio by model size (GFLOP band) and what a per-cell correction fitted on the scored
records themselves would leave (an oracle): one factor (the median log-ratio:
``mape_after_median_factor``), or a Theil-Sen line in log predicted time, i.e. whether
the bias depends on size; with ``--calibrated``, also the same records' 0-shot MAPE.

    python tools/unseen_cpu_check.py --cpu amd-f25m1s1-b33d36 [--builds default,sampled]
    gnnperf calibrate && python tools/unseen_cpu_check.py --cpu ... --calibrated
"""

from __future__ import annotations

import argparse
import json
import math
import warnings
from collections import defaultdict
from typing import Any

import numpy as np
from scipy.stats import spearmanr, theilslopes

from gnnperf.calibrate.store import cell_of
from gnnperf.data import record_hardware
from gnnperf.errors import GnnperfError
from gnnperf.estimators.gnn.predictor import Predictor
from gnnperf.estimators.gnn.training import INTERVAL_Z
from gnnperf.estimators.types import Prediction
from gnnperf.features import KernelGraph
from gnnperf.hardware.spec import HardwareSpec, host_of
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.store.shards import iter_lines, latest_records


def _figures(y: np.ndarray, mu: np.ndarray, lo: np.ndarray, hi: np.ndarray,
             own_lo: np.ndarray, own_hi: np.ndarray, calibrated: bool) -> dict[str, Any]:
    ratio = np.log(y / mu)
    out = {"records": len(y), "mape": round(float(np.mean(np.abs(mu / y - 1)) * 100), 2),
           "median_log_ratio": round(float(np.median(ratio)), 3),
           "mape_after_median_factor": round(float(
               np.mean(np.abs(np.exp(np.median(ratio) - ratio) - 1)) * 100), 2)}
    coverage = round(float(np.mean((y >= lo) & (y <= hi)) * 100), 1)
    if calibrated:
        return {**out, "coverage_calibrated": coverage}
    return {**out, "coverage_with_prior": coverage,
            "coverage_own": round(float(np.mean((y >= own_lo) & (y <= own_hi)) * 100), 1)}


#: upper edges (GFLOP) of the model-size bands the per-cell bias is reported by
SIZE_BANDS = (0.002, 0.01, 0.05, 0.2, 0.6, float("inf"))


def _size_bias(y: np.ndarray, mu: np.ndarray, gflop: np.ndarray) -> dict[str, Any]:
    """One cell's median log(measured / predicted) per size band, and the MAPE left by a
    Theil-Sen line in log predicted time fitted on these records."""
    ratio, x = np.log(y / mu), np.log(mu)
    bands, low = {}, 0.0
    for high in SIZE_BANDS:
        inside = (gflop >= low) & (gflop < high)
        if inside.any():
            bands[f"{low:g}-{high:g}"] = {"records": int(inside.sum()),
                                          "median_log_ratio": round(float(
                                              np.median(ratio[inside])), 3)}
        low = high
    slope, intercept, _, _ = theilslopes(ratio, x)
    left = np.mean(np.abs(mu * np.exp(intercept + slope * x) / y - 1)) * 100
    return {"by_gflop": bands, "oracle_line_mape": round(float(left), 2),
            "oracle_line_slope": round(float(slope), 4)}


def _predict(predictor: Predictor, items: list[tuple[KernelGraph, HardwareSpec]],
             calibrated: bool) -> list[Prediction]:
    """The product's predictions of ``items``, in batches of 64."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # out-of-range notes: the point is the unseen CPU
        return [p for i in range(0, len(items), 64)
                for p in predictor.predict_graphs(items[i:i + 64], calibrated=calibrated)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", required=True, help="CPU signature id of the records")
    ap.add_argument("--builds", default="default,sampled,best-of", help="build kinds")
    ap.add_argument("--root", default="datasets")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--calibrated", action="store_true",
                    help="with the CPU's stored calibration (`gnnperf calibrate`)")
    args = ap.parse_args()
    kinds = set(args.builds.split(","))
    predictor = Predictor(args.checkpoint)
    if args.cpu in (predictor.trained_cpus or set()):
        raise GnnperfError(f"the checkpoint trained on {args.cpu}: not a 0-shot check")
    records = [r for r in latest_records(f"{args.root}/shards")
               if host_of(r["hw_id"]) == args.cpu and "reference" in r
               and BuildConfig.parse(r["build"]).kind in kinds]
    if not records:
        raise GnnperfError(f"no v2 records of {args.cpu} with builds {args.builds}")
    wanted = {r["graph_id"] for r in records}
    graphs = {o["graph_id"]: o["graph"] for o in iter_lines(f"{args.root}/shards",
                                                             kinds=("graph",))
              if o["graph_id"] in wanted}
    records = [r for r in records if r["graph_id"] in graphs]
    shots: set[str] = set()
    if args.calibrated:
        calibration = predictor.calibration(record_hardware(records[0]))
        if calibration is None:
            raise GnnperfError(f"no calibration of this checkpoint stored for {args.cpu}: run "
                               "`gnnperf calibrate` on that CPU first")
        shots = {p.model_id for p in calibration.points}
        records = [r for r in records if r["model_id"] not in shots]  # scored: the others
    items = [(KernelGraph.from_dict(graphs[r["graph_id"]]), record_hardware(r))
             for r in records]
    preds = _predict(predictor, items, args.calibrated)
    y = np.array([r["whole"]["median_ms"] for r in records])
    mu = np.array([p.latency_ms for p in preds])
    lo, hi = np.array([p.low_ms for p in preds]), np.array([p.high_ms for p in preds])
    # the checkpoint's own spread: the interval's, less the prior's (added in quadrature)
    own = np.array([math.sqrt(max((math.log(p.high_ms / p.latency_ms) / INTERVAL_Z) ** 2
                                  - predictor.unseen_spread(hw, g.build) ** 2, 0.0))
                    for p, (g, hw) in zip(preds, items, strict=True)])
    own_lo, own_hi = mu * np.exp(-INTERVAL_Z * own), mu * np.exp(INTERVAL_Z * own)
    gflop = np.array([g.total_flops / 1e9 for g, _ in items])
    cells: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        cells[cell_of(r["build"], int(r["hw"]["threads"]))].append(i)
    oracle = {c: _size_bias(y[idx], mu[idx], gflop[idx]) for c, idx in sorted(cells.items())}
    zero_shot: dict[str, dict[str, float]] = defaultdict(dict)
    if args.calibrated:  # the same records at 0 shots
        zero = np.array([p.latency_ms for p in _predict(predictor, items, False)])
        for c, idx in [("all", list(range(len(y)))), *cells.items()]:
            zero_shot[c]["mape_0_shots"] = round(float(
                np.mean(np.abs(zero[idx] / y[idx] - 1)) * 100), 2)
    per_cell = {c: _figures(*(a[idx] for a in (y, mu, lo, hi, own_lo, own_hi)),
                            args.calibrated) | zero_shot[c] | {"size": oracle[c]}
                for c, idx in sorted(cells.items())}
    out = {"cpu": args.cpu, "checkpoint_cpus": sorted(predictor.trained_cpus or []),
           "calibration_models": sorted(shots),
           **_figures(y, mu, lo, hi, own_lo, own_hi, args.calibrated),
           **zero_shot["all"],
           "spearman": round(float(spearmanr(mu, y)[0]), 4),
           "cells": per_cell,
           # what the per-cell oracles leave over all records (weighted by cell size)
           **{f"oracle_{fit}_per_cell_mape": round(sum(
               pick(f) * f["records"] for f in per_cell.values()) / len(y), 2)
              for fit, pick in (("factor", lambda f: f["mape_after_median_factor"]),
                                ("line", lambda f: f["size"]["oracle_line_mape"]))}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
