"""Compare few-shot calibration designs on stored leave-one-CPU-out benchmark runs.

A design is chosen on one held-out CPU and then scored once on another: this script
prints, for each run given, every method's MAPE (and interval coverage) on the held-out
CPU's records that no calibration model contributed to, at 0 shots and after

- ``one factor, sampled:0 max threads``: the calibration before per-cell factors (one
  factor from the calibration models' ``sampled:0`` builds at the most threads);
- ``one factor, all cells``: one factor from every record of those models in the
  calibration builds (default and ``sampled:0`` at every thread count);
- ``per cell``: :func:`gnnperf.bench.report.calibrated` (a factor per build kind and
  thread count; ``tuned`` takes ``sampled``'s), what the report and ``gnnperf calibrate``
  use.

    python scripts/calibration_designs.py \
        benchmarks/interim/runs/*/leave_cpu_out-amd_f25m17s1_aad670-seed0.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gnnperf.bench.config import BenchConfig
from gnnperf.bench.report import calibrated, score
from gnnperf.bench.results import MethodResult, SplitResult
from gnnperf.bench.splits import calibration_positions, record_build_threads


def designs(result: SplitResult, shots: int) -> tuple[dict[str, dict[str, MethodResult]],
                                                      np.ndarray]:
    """Each design's predictions of every method, and the mask of the records scored."""
    chosen = calibration_positions(result.test, shots)
    configs = [record_build_threads(k) for k in result.test["key"]]
    most = max(t for b, t in configs if b == "sampled:0")
    anchors = [i for i in chosen if configs[i] == ("sampled:0", most)]
    models = np.array(result.test["model_id"])
    rest = ~np.isin(models, models[chosen])
    out = {
        "0 shots": result.methods,
        "one factor, sampled:0 max threads": {
            m: calibrated(r, result.test, anchors, per_cell=False)
            for m, r in result.methods.items()},
        "one factor, all cells": {m: calibrated(r, result.test, chosen, per_cell=False)
                                  for m, r in result.methods.items()},
        "per cell": {m: calibrated(r, result.test, chosen) for m, r in result.methods.items()},
    }
    return out, rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="stored leave_cpu_out run files")
    parser.add_argument("--shots", type=int, default=BenchConfig.calibration_shots)
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    table: dict[str, dict[str, dict[str, float]]] = {}
    for path in args.runs:
        result = SplitResult.from_dict(json.loads(path.read_text()))
        by_design, rest = designs(result, args.shots)
        true = result.true_ms
        builds = np.array(result.test["build"])
        print(f"\n{path.name}: held out {result.run.holdout}, {int(rest.sum())} records scored "
              f"({len(true) - int(rest.sum())} from the calibration models left out)")
        methods = list(result.methods)
        print(f"{'design':36s} " + " ".join(f"{m[:18]:>18s}" for m in methods))
        for design, preds in by_design.items():
            cells = []
            for m in methods:
                r = preds[m]
                row = {part: score(r.pred_ms[mask], r.low_ms[mask], r.high_ms[mask],
                                   true[mask])
                       for part, mask in [("all", rest)] + [
                           (b, rest & (builds == b)) for b in sorted(set(builds))]
                       if np.isfinite(r.pred_ms[mask]).all() and mask.any()}
                table.setdefault(f"{result.run.holdout}", {}).setdefault(design, {})[m] = {
                    part: {"mape": v["mape"], "coverage": v["coverage"], "n": v["n"]}
                    for part, v in row.items()}
                a = row.get("all")
                cells.append(f"{a['mape']:7.1f} ({a['coverage']:3.0f}%)" if a else " " * 13)
            print(f"{design:36s} " + " ".join(f"{c:>18s}" for c in cells))
        print("gnn by build kind: " + "; ".join(
            f"{d}: " + ", ".join(f"{b} {v['mape']:.1f}" for b, v in parts.items() if b != "all")
            for d, parts in ((d, table[str(result.run.holdout)][d]["gnn"])
                             for d in by_design)))
    if args.json:
        args.json.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
