"""What tuning buys, whole model (issue 47): each ``tuned:N`` record against the records of
the same model on the same hardware id under every other build (``default``, ``sampled:0``,
``best-of:S``, ``tuned:M``), as the median ratio *other / tuned:N* (above 1: tuning is
faster), with what a search cost per workload there (``gnnperf dataset stats``'s
``tuning``). Per kernel too: each tuned workload's best time at N trials against the best of
the first S sampled schedules the kernel dataset timed of it on the same hardware id
(``best-of:S``, S = 8 and 16, where all S seeds were drawn there). The two are timed by
different protocols (MetaSchedule's runner during the search, measurement v2 in the kernel
dataset), so the per-kernel ratio is indicative; the whole-model ratio is the label's.

    python benchmarks/tuning_gain.py --root datasets [--out benchmarks/tuning_gain.json]

Only measured pairs count: a ratio needs both records of one (model, hardware id), taken
under measurement v2 on that machine. Prints one line per (hardware id, tuned:N, other
build) and writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from gnnperf.atomic import write_text
from gnnperf.collect.kernels.database import runs_at, tuning_runs, tuning_stats
from gnnperf.collect.kernels.tuning_run import TUNING_BUDGETS, TuningRun
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.shards import is_v2, iter_lines, latest_records


def whole_model_ms(shards: Path) -> dict[tuple[str, str, str], float]:
    """(model, hardware id, build) -> the whole-model median (ms) of each stored record."""
    return {(r["model_id"], r["hw_id"], r["build"]): float(r["whole"]["median_ms"])
            for r in latest_records(shards) if r.get("whole") and is_v2(r)}


def gains(ms: dict[tuple[str, str, str], float]) -> list[dict[str, Any]]:
    """Per (hardware id, ``tuned:N``, other build) with at least one model measured under
    both: the models, and the median, least and greatest of other / tuned:N."""
    by_model: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for (model, hw_id, build), value in ms.items():
        by_model[(model, hw_id)][build] = value
    pairs: dict[tuple[str, str, str], list[tuple[str, float]]] = defaultdict(list)
    for (model, hw_id), builds in by_model.items():
        for build, tuned_ms in builds.items():
            if build.startswith("tuned:"):
                for other, other_ms in builds.items():
                    if other != build:
                        pairs[(hw_id, build, other)].append((model, other_ms / tuned_ms))
    rows = []
    for (hw_id, build, other), found in sorted(pairs.items()):
        ratios = [r for _, r in found]
        rows.append({"hw_id": hw_id, "tuned": build, "other": other, "models": len(found),
                     "median_ratio": round(statistics.median(ratios), 4),
                     "min_ratio": round(min(ratios), 4), "max_ratio": round(max(ratios), 4),
                     "per_model": {m: round(r, 4) for m, r in sorted(found)}})
    return rows


def kernel_gains(folder: DatasetFolder, schedules: tuple[int, ...] = (8, 16)
                 ) -> list[dict[str, Any]]:
    """Per (hardware id, ``best-of:S``, ``tuned:N``): the median over workloads of the best
    of the first S sampled schedules (v2) over the N-trial search's best (its runner)."""
    by_hw: dict[str, list[TuningRun]] = defaultdict(list)
    for run in tuning_runs(folder):
        by_hw[run.hw_id].append(run)
    # per (workload, hardware id, budget): the run holding that budget's search
    held = {(w, hw_id, budget): run for hw_id, runs in by_hw.items()
            for budget in TUNING_BUDGETS for w, run in runs_at(runs, budget).items()}
    pairs = {(w, hw_id) for w, hw_id, _ in held}
    best: dict[tuple[str, str, int], float] = {}
    drawn: dict[tuple[str, str], int] = defaultdict(int)
    kinds = ("kernel_record", "kernel_done")
    for line in iter_lines(folder.kernels, kinds=kinds) if folder.kernels.exists() else ():
        workload, hw_id = line["key"].split("|")[:2]
        pair = (workload, hw_id)
        if pair not in pairs:
            continue
        if line["kind"] == "kernel_done":
            drawn[pair] = max(drawn[pair], line.get("schedules_drawn", 0))
        elif line.get("schedule") == "sampled" and line.get("seeds"):
            # lines older than ``schedules_drawn``: at least the highest seed timed
            drawn[pair] = max(drawn[pair], max(line["seeds"]) + 1)
            for s in schedules:
                if min(line["seeds"]) < s:
                    key = (*pair, s)
                    best[key] = min(best.get(key, float("inf")), line["latency"]["median_ms"])
    ratios: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for (workload, hw_id, s), ms in best.items():
        if drawn[(workload, hw_id)] < s:
            continue
        for budget in TUNING_BUDGETS:
            run = held.get((workload, hw_id, budget))
            if run is not None and run.best_ms(budget) < float("inf"):
                ratios[(hw_id, s, budget)].append(ms / run.best_ms(budget))
    return [{"hw_id": hw_id, "best_of": s, "tuned": f"tuned:{budget}", "workloads": len(r),
             "median_ratio": round(statistics.median(r), 4)}
            for (hw_id, s, budget), r in sorted(ratios.items())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="datasets", help="dataset folder")
    parser.add_argument("--out", default="benchmarks/tuning_gain.json",
                        help="where the figures go (JSON)")
    args = parser.parse_args()
    folder = DatasetFolder.resolve(args.root)
    rows = gains(whole_model_ms(folder.shards))
    for row in rows:
        print(f"{row['hw_id']:<36} {row['other']:>10} / {row['tuned']:<9} "
              f"median {row['median_ratio']:.2f}x  ({row['min_ratio']:.2f}-"
              f"{row['max_ratio']:.2f}x, {row['models']} models)")
    per_kernel = kernel_gains(folder)
    for row in per_kernel:
        print(f"{row['hw_id']:<36} per kernel best-of:{row['best_of']} / {row['tuned']}: "
              f"median {row['median_ratio']:.2f}x ({row['workloads']} workloads)")
    cost = tuning_stats(folder)
    for hw_id, stats in cost.items():
        for budget, entry in stats["by_budget"].items():
            print(f"{hw_id:<36} tuning at {budget:>3} trials: {entry['workloads']} workloads, "
                  f"{entry['minutes_per_workload']:.2f} min each")
    figures = {"gains": rows, "per_kernel": per_kernel, "tuning_cost": cost}
    write_text(Path(args.out), json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
