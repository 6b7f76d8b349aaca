"""The shipped checkpoint, 0 shots, on the records of a CPU it never trained on.

The benchmark measures 0 shots on checkpoints it trains without each CPU; this checks the
checkpoint users actually get, on a CPU's records collected after it was trained, through
the product's own path (``Predictor.predict_graphs``, no calibration): MAPE, Spearman,
and the coverage of the 90% interval with the unseen-CPU prior and without it (its own
spread alone), overall and per calibration cell. With ``--calibrated``, after the few-shot
correction ``gnnperf calibrate`` stored for that CPU (run it there first), scored on the
records of the models calibration did not measure. Per cell it also prints the median
log-ratio by model size (GFLOP band) and what a per-cell correction fitted on the scored
records themselves would leave (an oracle): one factor (the median log-ratio), or a
Theil-Sen line in log predicted time, i.e. whether the bias depends on size.

    python scripts/unseen_cpu_check.py --cpu amd-f25m1s1-b33d36 [--builds default,sampled]
    gnnperf calibrate && python scripts/unseen_cpu_check.py --cpu ... --calibrated
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

from gnnperf.build_config import BuildConfig
from gnnperf.calibration.store import cell_of
from gnnperf.data import record_hardware
from gnnperf.errors import GnnperfError
from gnnperf.features import KernelGraph
from gnnperf.graph_predictor import Predictor
from gnnperf.hardware import host_of
from gnnperf.shards import iter_lines, latest_records
from gnnperf.training import INTERVAL_Z


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
    factor or by a Theil-Sen line in log predicted time fitted on these records."""
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

    def left(fitted: np.ndarray) -> float:
        return round(float(np.mean(np.abs(mu * np.exp(fitted) / y - 1)) * 100), 2)

    return {"by_gflop": bands, "oracle_factor_mape": left(np.full_like(x, np.median(ratio))),
            "oracle_line_mape": left(intercept + slope * x),
            "oracle_line_slope": round(float(slope), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", required=True, help="CPU signature id of the records")
    ap.add_argument("--builds", default="default,sampled,tuned", help="build kinds")
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
    calibration = None
    if args.calibrated:
        calibration = predictor.calibration(record_hardware(records[0]))
        if calibration is None:
            raise GnnperfError(f"no calibration of this checkpoint stored for {args.cpu}: run "
                               "`gnnperf calibrate` on that CPU first")
        shots = {p.model_id for p in calibration.points}
        records = [r for r in records if r["model_id"] not in shots]  # scored: the others
    items = [(KernelGraph.from_dict(graphs[r["graph_id"]]), record_hardware(r))
             for r in records]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # out-of-range notes: the point is the unseen CPU
        preds = [p for i in range(0, len(items), 64)
                 for p in predictor.predict_graphs(items[i:i + 64],
                                                     calibrated=args.calibrated)]
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
    if calibration is not None:  # the same records at 0 shots: the correction taken off
        zero = mu / np.exp([calibration.correction(r["build"], int(r["hw"]["threads"]))[0]
                            for r in records])
        for c, idx in [("all", list(range(len(y)))), *cells.items()]:
            zero_shot[c]["mape_0_shots"] = round(float(
                np.mean(np.abs(zero[idx] / y[idx] - 1)) * 100), 2)
    out = {"cpu": args.cpu, "checkpoint_cpus": sorted(predictor.trained_cpus or []),
           "calibration_models": sorted(shots),
           **_figures(y, mu, lo, hi, own_lo, own_hi, args.calibrated),
           **zero_shot["all"],
           "spearman": round(float(spearmanr(mu, y)[0]), 4),
           "cells": {c: _figures(*(a[idx] for a in (y, mu, lo, hi, own_lo, own_hi)),
                                  args.calibrated) | zero_shot[c] | {"size": oracle[c]}
                     for c, idx in sorted(cells.items())},
           **{f"oracle_{fit}_per_cell_mape": round(sum(
               oracle[c][f"oracle_{fit}_mape"] * len(idx) for c, idx in cells.items())
               / len(y), 2) for fit in ("factor", "line")}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
