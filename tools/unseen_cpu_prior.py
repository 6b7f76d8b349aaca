"""Fit the GNN's unseen-CPU prior from stored leave-one-CPU-out runs, and check it.

``gnnperf bench`` writes ``unseen_cpu_prior.json`` from the held-out-CPU runs of one
dataset and one configuration. This fits it from any stored runs (e.g. the interim ones,
each held out on another snapshot of the dataset), prints each held-out CPU's 0-shot
MAPE and interval coverage on all its records (calibration models included) before and
after widening by the prior fitted on the *other* held-out CPUs (as the report widens
them, :func:`gnnperf.bench.report.zero_shot`), and writes the prior from all of them:

    python tools/unseen_cpu_prior.py benchmarks/interim/runs/*/leave_cpu_out-*.json \
        --out checkpoints/unseen_cpu_prior.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from gnnperf.bench.report import prior_of_others, score, unseen_cpu_prior, widened
from gnnperf.bench.results import SplitResult


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="stored leave_cpu_out run files")
    parser.add_argument("--method", default="gnn")
    parser.add_argument("--out", type=Path, help="write the prior from every run here")
    args = parser.parse_args()
    runs = [SplitResult.from_dict(json.loads(p.read_text())) for p in args.runs]
    if any(r.run.key != "leave_cpu_out" for r in runs):
        parser.error("every run must be a leave_cpu_out run")
    print(f"{'held-out CPU':24} {'records':>7} {'MAPE':>6} {'cover':>6} {'cover, prior':>12}"
          "  prior from")
    for r in runs:
        raw = r.methods[args.method]
        others = prior_of_others(r, runs, args.method)
        wide = widened(raw, r.test, others) if others is not None else raw
        ok = np.isfinite(raw.pred_ms)
        before = score(raw.pred_ms[ok], raw.low_ms[ok], raw.high_ms[ok], r.true_ms[ok])
        after = score(wide.pred_ms[ok], wide.low_ms[ok], wide.high_ms[ok], r.true_ms[ok])
        print(f"{r.run.holdout!s:24} {int(ok.sum()):7d} {before['mape']:6.2f} "
              f"{before['coverage']:6.1f} {after['coverage']:12.1f}  "
              + (", ".join(others.cpus) if others else "none (no other held-out CPU)"))
    prior = unseen_cpu_prior(runs, args.method, source=" ".join(
        ["python", *map(shlex.quote, sys.argv)]))
    if prior is None:
        print(f"no {args.method} predictions in these runs", file=sys.stderr)
        return 2
    cells = ", ".join(f"{b.cpu} {b.cell} {b.log_bias:+.3f}" for b in prior.biases)
    print(f"prior from {len(prior.cpus)} CPU(s): pooled log spread "
          f"{prior.pooled_log_spread:.3f}; biases: {cells}")
    if args.out:
        print(f"wrote {prior.save(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
