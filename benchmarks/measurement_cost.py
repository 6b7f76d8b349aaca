"""What measurement v2 costs: wall time of one label with and without the reference kernels.

The issue's target: a record's measurement under v2 takes no more than 1.5x what it took
under v1. Each model (zoo seeds, ``sampled:0`` and ``default``, x86-64-v3) is compiled
once per build and measured, per kernel as the collector does, at 1 and 2 threads with
both protocols, in alternating order, in the same long-lived workers the collector uses;
the figure is the median ratio of the times.

    python benchmarks/measurement_cost.py [--families all] [--count 1] [--out FILE.json]

Measure on a quiet machine: no collector, tests or training at the same time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gnnperf import zoo
from gnnperf.atomic import write_text
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.pipeline import compile_lowered, export_executable, lower_onnx
from gnnperf.measure import MeasureSettings, MeasureWorker, make_inputs, measure_library
from gnnperf.measure.reference import reference_library


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="all")
    parser.add_argument("--count", type=int, default=1, help="seeds per family")
    parser.add_argument("--builds", default="sampled:0,default")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    families = list(zoo.FAMILIES) if args.families == "all" else args.families.split(",")
    settings = MeasureSettings(quiet_timeout_s=60.0)
    rows = []
    workers = {t: MeasureWorker(t) for t in (1, 2)}
    try:
        for family in families:
            for seed in range(args.count):
                spec = zoo.sample_spec(family, seed)
                for build in args.builds.split(","):
                    if build == "default" and zoo.estimate_flops(spec) > 0.4e9:
                        continue  # the collector's budget: too slow unscheduled
                    lowered = lower_onnx(zoo.export_onnx(spec),
                                         HardwareSpec.local("x86-64-v3", 2), build)
                    arrays = make_inputs(dict(spec.inputs), seed=spec.seed)
                    with tempfile.TemporaryDirectory() as tmp:
                        lib = export_executable(compile_lowered(lowered), Path(tmp) / "m.so")
                        for threads in (1, 2):
                            hw = HardwareSpec.local("x86-64-v3", threads)
                            times = {}
                            order = ("v1", "v2") if len(rows) % 2 == 0 else ("v2", "v1")
                            for protocol in order:
                                start = time.perf_counter()
                                measure_library(
                                    lib, arrays, threads, per_kernel=True, settings=settings,
                                    worker=workers[threads],
                                    reference=reference_library(hw) if protocol == "v2"
                                    else None)
                                times[protocol] = time.perf_counter() - start
                            row = {"model": spec.model_id, "build": build, "threads": threads,
                                   "v1_s": round(times["v1"], 3), "v2_s": round(times["v2"], 3),
                                   "ratio": round(times["v2"] / times["v1"], 3)}
                            rows.append(row)
                            print(json.dumps(row), flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    ratios = [r["ratio"] for r in rows]
    summary = {
        "cpu_id": HardwareSpec.local(measure=False).cpu_id,
        "records": len(rows),
        "v1_s_median": statistics.median(r["v1_s"] for r in rows),
        "v2_s_median": statistics.median(r["v2_s"] for r in rows),
        "ratio_median": statistics.median(ratios),
        "ratio_p90": sorted(ratios)[int(0.9 * (len(ratios) - 1))],
        "v1_s_total": round(sum(r["v1_s"] for r in rows), 1),
        "v2_s_total": round(sum(r["v2_s"] for r in rows), 1),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        write_text(args.out, json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
