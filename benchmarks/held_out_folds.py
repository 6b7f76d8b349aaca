"""The held-out-architecture split fold by fold: README's headline table.

``gnnperf bench`` reports a split's runs pooled (their mean); the held-out-architecture
folds hold out different model types, so each fold is a separate generalisation figure
and their spread says how much one fold can be trusted. This reads the runs a bench folder
stores (``runs/*/held_out_architectures-K_5-seed0.json``) and scores each alone with the
report's own code (:func:`gnnperf.bench.report.figures.summarise`): the GNN's MAPE overall
and per build, Spearman, interval coverage, the ratio to the best learned additive method,
the kernel model on the fold's unseen workloads, thread invariance and the MAPE per CPU.
Runs of different code or data are stored in different ``runs/`` folders (named by the
dataset's and the settings' fingerprints); each fold names its folder, so a fold re-run on
newer code is a new row, never mixed with the old one. Once every fold has run with the
newest run's settings (the folder name's second fingerprint), the last run of each fold
with them is also scored together: the figures' mean over the folds, the cross-validated
headline (``mean_of_folds``). Its folds may come from different dataset snapshots (records
added between calls); the row names them. It chooses nothing.

    python benchmarks/held_out_folds.py [benchmarks/held_out] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.atomic import write_text
from gnnperf.bench.methods import LEARNED_ADDITIVE
from gnnperf.bench.report.figures import split_views, summarise
from gnnperf.bench.results import SplitResult

SPLIT = "held_out_architectures"
BUILDS = ("default", "sampled", "best-of", "tuned")


FOLDS = 5


def fold_figures(results: list[SplitResult], runs: str) -> dict[str, Any]:
    """The figures of one fold's run (or the mean over several folds' runs), as the report
    would give them were these the only runs (``runs``: the folder they are stored in)."""
    entry = summarise(split_views(results), {})[SPLIT]
    methods = entry["methods"]
    additive = {m: methods[m]["mape"] for m in LEARNED_ADDITIVE if m in methods}
    best = min(additive, key=additive.__getitem__)
    gnn = methods["gnn"]
    kernel = entry.get("kernel_model_unseen") or {}
    invariance = entry.get("thread_invariance") or {}
    return {
        "fold": ",".join(r.run.holdout or "" for r in results),
        "runs": runs,
        "models": int(gnn["models"]),
        "gnn_mape": gnn["mape"],
        "by_build": {b: {"mape": entry["by_build"][b]["gnn"]["mape"],
                         "models": int(entry["by_build"][b]["gnn"]["models"])}
                     for b in BUILDS if b in entry["by_build"]},
        "spearman": gnn["spearman"],
        "coverage": gnn["coverage"],
        "best_additive": best,
        "best_additive_mape": additive[best],
        "ratio_to_best_additive": gnn["mape"] / additive[best],
        "measured_kernel_sum_mape": methods["measured_kernel_sum"]["mape"],
        "kernel_model_unseen": {**{k: kernel.get(k) for k in
                                   ("schedule_mape", "group_spearman", "workloads")},
                                "by_cpu": {c: {k: v[k] for k in ("schedule_mape", "schedules")}
                                           for c, v in kernel.get("by_cpu", {}).items()}},
        "thread_invariance": {k: invariance.get(k) for k in ("groups", "within_share")},
        "by_cpu": {cpu: {"mape": v["methods"]["gnn"]["mape"],
                         "models": int(v["methods"]["gnn"]["models"])}
                   for cpu, v in entry["by_cpu"].items()},
        "minutes": sum(r.minutes for r in results),
        "provenance": results[-1].provenance,
    }


def newest_complete(results: list[tuple[SplitResult, str]]) -> list[tuple[SplitResult, str]]:
    """The last run of every fold under the settings fingerprint of the newest run, when
    that fingerprint has run all :data:`FOLDS` folds (else empty). ``results`` is sorted
    oldest first. The folds' datasets may differ (records added between calls): the
    ``runs`` names say which."""
    if not results:
        return []
    newest = results[-1][1].rsplit("-", 1)[-1]
    last: dict[str, tuple[SplitResult, str]] = {}
    for result, runs in results:
        if runs.rsplit("-", 1)[-1] == newest:
            last[result.run.holdout or ""] = (result, runs)
    if set(last) != {f"{k}/{FOLDS}" for k in range(FOLDS)}:
        return []
    return [last[k] for k in sorted(last)]


def mean_of_folds(folds: list[dict[str, Any]], results: list[SplitResult], runs: str
                  ) -> dict[str, Any]:
    """The folds' figures scored together: the report's mean over runs for the GNN's
    figures, and the mean of the per-fold figures for the ratio and the kernel model
    (whose report figure pools schedules, weighting a fold by its size; kept as
    ``pooled_*``)."""
    mean = fold_figures(results, runs)
    mean["fold"] = f"mean of {len(folds)}"
    mean["ratio_to_best_additive"] = float(np.mean([f["ratio_to_best_additive"]
                                                    for f in folds]))
    kernel = mean["kernel_model_unseen"]
    for key in ("schedule_mape", "group_spearman"):
        kernel[f"pooled_{key}"] = kernel[key]
        kernel[key] = float(np.mean([f["kernel_model_unseen"][key] for f in folds]))
    return mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?", default=Path("benchmarks/held_out"))
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON to write (default: FOLDER/folds.json)")
    args = parser.parse_args()
    paths = sorted(args.folder.glob(f"runs/*/{SPLIT}-*.json"))
    if not paths:
        raise SystemExit(f"no {SPLIT} runs under {args.folder}/runs")
    results = sorted(((SplitResult.from_dict(json.loads(p.read_text())), p.parent.name)
                      for p in paths),
                     key=lambda x: (x[0].provenance.get("finished", ""), x[0].run.holdout or ""))
    folds = [fold_figures([result], runs) for result, runs in results]
    rows = [(f["runs"], f["fold"], f) for f in folds]
    mean: dict[str, Any] | None = None
    if complete := newest_complete(results):
        names = "+".join(sorted({n for _, n in complete}))
        mean = mean_of_folds([fold_figures([r], n) for r, n in complete],
                             [r for r, _ in complete], names)
        rows.append((f"mean of folds 0-{FOLDS - 1}", "", mean))
        print(f"the mean row: the last run of each fold in {names}")
    print(f"{'runs':29s} {'fold':5s} {'models':>6s} {'GNN':>6s} "
          + " ".join(f"{b:>8s}" for b in BUILDS)
          + f" {'Spearman':>8s} {'cover':>6s} {'x add.':>6s} {'kernel':>7s} {'k.rho':>6s}")
    for runs, fold, f in rows:
        builds = " ".join(f"{f['by_build'][b]['mape']:8.1f}" if b in f["by_build"]
                          else f"{'':8s}" for b in BUILDS)
        kernel = f["kernel_model_unseen"]
        print(f"{runs[:29]:29s} {fold[:5]:5s} {f['models']:6d} {f['gnn_mape']:6.1f} {builds} "
              f"{f['spearman']:8.3f} {f['coverage']:6.1f} {f['ratio_to_best_additive']:6.3f} "
              f"{kernel['schedule_mape'] or float('nan'):7.1f} "
              f"{kernel['group_spearman'] or float('nan'):6.3f}")
    out = args.out or args.folder / "folds.json"
    summary = {"split": SPLIT, "folds": folds, "mean_of_folds": mean}
    write_text(out, json.dumps(summary, indent=1) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
