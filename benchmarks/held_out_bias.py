"""Where a benchmark run's error on held-out architectures lives: a bias each architecture's
models share (the method misjudges the architecture's kernels as a whole) or error left
within an architecture (its sizes, threads and builds misjudged against each other).

Reads the per-model predictions a ``gnnperf bench`` run stores (``runs/*/SPLIT.json``) and,
per method and build, splits the log error with :func:`gnnperf.metrics.group_error_decomposition`
grouped by architecture (the record's family), and names the architectures with the
largest shared bias. A diagnostic of a finished run: it chooses nothing.

    python benchmarks/held_out_bias.py RUN.json [RUN.json ...] [--methods gnn,kernel_model_sum]
        [--out benchmarks/held_out_bias.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.atomic import write_text
from gnnperf.metrics import group_error_decomposition

#: architectures listed per (method, build), largest |shared bias| first
WORST = 6


def decompose(run: dict[str, Any], methods: list[str]) -> dict[str, dict[str, Any]]:
    """Per method, per build kind (and ``all``): MAPE, the bias/within split of the log
    error by architecture, and the architectures whose models share the largest bias."""
    test = run["test"]
    true = np.asarray(test["true_ms"], float)
    # the build's name before its parameter: runs from before 2026-11-28 name best-of:16
    # ``tuned``, which today's parser refuses
    kinds = np.asarray([b.split(":")[0] for b in test["build"]])
    family = np.asarray(test["family"])
    out: dict[str, dict[str, Any]] = {}
    for method in methods:
        pred = np.asarray(run["methods"][method]["pred_ms"], float)
        out[method] = {}
        for kind in ["all", *sorted(set(kinds))]:
            rows = np.ones(len(true), bool) if kind == "all" else kinds == kind
            err = np.log(pred[rows]) - np.log(true[rows])
            split = group_error_decomposition(np.log(pred[rows]), np.log(true[rows]),
                                              family[rows])
            biases = {f: float(err[family[rows] == f].mean()) for f in set(family[rows])}
            worst = sorted(biases.items(), key=lambda fb: -abs(fb[1]))[:WORST]
            out[method][kind] = {
                "models": int(rows.sum()),
                "mape": float(np.mean(np.abs(pred[rows] / true[rows] - 1)) * 100),
                "mean_log_error": float(err.mean()), **split,
                "worst_architectures": {f: round(b, 3) for f, b in worst}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--methods", default="gnn,kernel_model_sum,learned_kernel_sum")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("held_out_bias.json"))
    args = parser.parse_args()
    methods = args.methods.split(",")
    result = {}
    for path in args.runs:
        report = decompose(json.loads(path.read_text()), methods)
        result[str(path)] = report
        for method, kinds in report.items():
            for kind, row in kinds.items():
                print(f"{path.parent.name}/{path.stem} {method:>18} {kind:>8}: "
                      f"MAPE {row['mape']:5.1f}%  mean log error {row['mean_log_error']:+.3f}  "
                      f"|architecture bias| {row['between']:.3f}  within {row['within']:.3f}  "
                      f"MAPE without the bias {row['mape_without_bias']:.1f}%")
    write_text(args.out, json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
