"""Do two CPUs agree on a kernel's schedules? The same programs, timed alone on each.

For every pair of CPUs that measured the same (workload, ISA, threads), the schedules
both timed are matched by program (the scheduled PrimFunc's hash in the record key).
Printed per pair and thread count: how many workloads and schedules match, the spread of
the time ratio, the Spearman correlation of the schedules' times within a workload
(median over workloads), how often both CPUs rank the same schedule first, and the
regret of tuning on one CPU and running on the other (how much slower the first CPU's
best schedule is on the second than the second's own best).

That last figure says whether a ``tuned`` build's choice transfers to a machine where
nobody tuned; the others, how much of a schedule's cost a kernel model can learn once
for all CPUs and how much is the CPU's own.

    python scripts/cross_cpu_schedules.py [--root datasets] [--min-schedules 4] [--json OUT]

Reads the kernel shards only; no measurement.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from gnnperf.atomic import write_text
from gnnperf.collect.kernels import kernel_records
from gnnperf.hardware.cpu_identity import signature_of_hw


def _times(root: Path | None) -> dict[tuple[str, str, str], dict[str, float]]:
    """(CPU id, ISA/threads, workload) → {program: median ms} of the sampled schedules."""
    out: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    for rec in kernel_records(root):
        if rec["schedule"] == "unscheduled":
            continue
        cpu = signature_of_hw(rec["hw"]).id
        config = rec["hw_id"].split("/", 1)[1]
        program = rec["key"].rsplit("|", 1)[-1]
        out[(cpu, config, rec["workload_id"])][program] = rec["latency"]["median_ms"]
    return out


def compare(times: dict[tuple[str, str, str], dict[str, float]], a: str, b: str, config: str,
            min_schedules: int) -> dict[str, Any] | None:
    ratios: list[float] = []
    rhos: list[float] = []
    same_top = 0
    regrets_ab: list[float] = []
    regrets_ba: list[float] = []
    workloads = 0
    for (cpu, cfg, wid), ta in times.items():
        if cpu != a or cfg != config or (b, config, wid) not in times:
            continue
        tb = times[(b, config, wid)]
        shared = sorted(set(ta) & set(tb))
        if len(shared) < min_schedules:
            continue
        xa = np.array([ta[p] for p in shared])
        xb = np.array([tb[p] for p in shared])
        workloads += 1
        ratios.extend((xb / xa).tolist())
        rho = spearmanr(xa, xb).statistic
        if np.isfinite(rho):
            rhos.append(float(rho))
        best_a, best_b = int(np.argmin(xa)), int(np.argmin(xb))
        same_top += best_a == best_b
        regrets_ab.append(xb[best_a] / xb[best_b] - 1)
        regrets_ba.append(xa[best_b] / xa[best_a] - 1)
    if not workloads:
        return None
    regret_ab = 100 * statistics.fmean(regrets_ab)
    regret_ba = 100 * statistics.fmean(regrets_ba)
    q = np.percentile(ratios, [10, 50, 90])
    return {
        "cpus": [a, b], "config": config, "workloads": workloads, "schedules": len(ratios),
        "time_ratio_b_over_a": {"p10": float(q[0]), "median": float(q[1]), "p90": float(q[2])},
        "within_workload_spearman_median": statistics.median(rhos) if rhos else None,
        "same_fastest_pct": 100 * same_top / workloads,
        "regret_tuned_on_a_run_on_b_pct": regret_ab,
        "regret_tuned_on_b_run_on_a_pct": regret_ba,
        "regret_tuned_on_a_run_on_b_median_pct": 100 * statistics.median(regrets_ab),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=None, help="dataset folder (default: shipped)")
    p.add_argument("--min-schedules", type=int, default=4,
                   help="compare a workload only where both CPUs timed this many programs")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args()
    times = _times(args.root)
    cpus = sorted({cpu for cpu, _, _ in times})
    configs = sorted({cfg for _, cfg, _ in times})
    rows = [r for a, b in itertools.combinations(cpus, 2) for cfg in configs
            if (r := compare(times, a, b, cfg, args.min_schedules)) is not None]
    for r in rows:
        q = r["time_ratio_b_over_a"]
        print(f"{r['cpus'][1]} vs {r['cpus'][0]}, {r['config']}: {r['workloads']} workloads, "
              f"{r['schedules']} schedules; time ratio median {q['median']:.2f} "
              f"(p10 {q['p10']:.2f}, p90 {q['p90']:.2f}); within-workload Spearman "
              f"{r['within_workload_spearman_median']:.3f}; same fastest "
              f"{r['same_fastest_pct']:.1f}%; regret of the other CPU's choice "
              f"{r['regret_tuned_on_a_run_on_b_pct']:.1f}% / "
              f"{r['regret_tuned_on_b_run_on_a_pct']:.1f}% (mean), "
              f"{r['regret_tuned_on_a_run_on_b_median_pct']:.1f}% (median, first on second)")
    if args.json:
        import json

        write_text(args.json, json.dumps({"command": "python scripts/cross_cpu_schedules.py "
                                          f"--min-schedules {args.min_schedules}",
                                          "pairs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
