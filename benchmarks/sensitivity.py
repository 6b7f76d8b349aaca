"""Does the v2 protocol still see a real difference? A/B pairs of a model and a ~5% slower twin.

The A/A floor says how far two labels of one model drift apart; this is its counterpart.
Model A is an MLP-Mixer of ``--depth`` identical layers, model B the same with one more
layer (same weights seed, same shapes), so B does A's work plus one layer's: about
1/depth more. Each round compiles both afresh, starts fresh measurement workers, and
measures A and B (whole model, v2: reference kernels interleaved) in a random order at
each thread count. A pair is one round's A and B; the check passes when B comes out
slower in at least ``--target`` of the pairs (raw labels, and labels normalised by the
machine state timed beside them).

    python benchmarks/sensitivity.py [--rounds 20] [--threads 1,2] [--build sampled:0]
                                     [--out benchmarks/sensitivity.json]

Measure on a quiet machine: no collector, tests or training at the same time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gnnperf.atomic import write_text
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.pipeline import compile_lowered, export_executable, lower_onnx
from gnnperf.measure import MeasureSettings, MeasureWorker, make_inputs, measure_library
from gnnperf.measure.reference import machine_state, reference_library
from gnnperf.zoo import ModelSpec, export_onnx


def mixer(depth: int) -> ModelSpec:
    """A mid-sized MLP-Mixer (64 tokens of width 128) with ``depth`` layers."""
    hparams = {"batch": 1, "resolution": 64, "patch": 8, "dim": 128, "token_hidden": 128,
               "channel_hidden": 512, "depth": depth, "classes": 10}
    return ModelSpec("mixer", 0, hparams, {"x": ((1, 3, 64, 64), "float32")})


def fraction_slower(pairs: list[tuple[float, float]]) -> float:
    return sum(b > a for a, b in pairs) / len(pairs)


def summarise(rows: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """Per thread count and overall: pairs, share of pairs with B slower, B/A ratios."""
    out: dict[str, Any] = {}
    groups: dict[str, list[dict[str, Any]]] = {"all": rows}
    for row in rows:
        groups.setdefault(f"{row['threads']}t", []).append(row)
    for name, group in groups.items():
        raw = [(r["a_ms"], r["b_ms"]) for r in group]
        norm = [(r["a_ms"] / r["a_state"], r["b_ms"] / r["b_state"]) for r in group]
        ratios = sorted(b / a for a, b in raw)
        out[name] = {
            "pairs": len(group),
            "b_slower_raw": round(fraction_slower(raw), 3),
            "b_slower_normalised": round(fraction_slower(norm), 3),
            "ratio_median": round(statistics.median(ratios), 4),
            "ratio_min": round(ratios[0], 4),
            "ratio_max": round(ratios[-1], 4),
        }
    out["passes"] = out["all"]["b_slower_raw"] >= target
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--depth", type=int, default=19, help="layers of model A")
    parser.add_argument("--build", default="sampled:0")
    parser.add_argument("--isa", default="x86-64-v3")
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0, help="order of A and B in each round")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    threads_list = [int(t) for t in args.threads.split(",")]
    specs = {"a": mixer(args.depth), "b": mixer(args.depth + 1)}
    onnx_models = {k: export_onnx(s) for k, s in specs.items()}
    arrays = make_inputs(dict(specs["a"].inputs), seed=0)
    settings = MeasureSettings()
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="gnnperf-sensitivity-") as tmp:
            libs = {}
            for k, model in onnx_models.items():  # a fresh compile of both every round
                lowered = lower_onnx(model, HardwareSpec.local(args.isa, 2), args.build)
                libs[k] = export_executable(compile_lowered(lowered), Path(tmp) / f"{k}.so")
            for threads in threads_list:
                hw = HardwareSpec.local(args.isa, threads)
                worker = MeasureWorker(threads)  # fresh workers every round
                try:
                    labels = {}
                    order = rng.sample(["a", "b"], 2)
                    for k in order:
                        m = measure_library(libs[k], arrays, threads, settings=settings,
                                            worker=worker, reference=reference_library(hw))
                        labels[k] = (m.whole.median_ms, machine_state({"reference": m.reference}))
                finally:
                    worker.close()
                row = {"round": rnd, "threads": threads, "order": "".join(order),
                       "a_ms": labels["a"][0], "b_ms": labels["b"][0],
                       "a_state": labels["a"][1], "b_state": labels["b"][1],
                       "at": time.time()}
                rows.append(row)
                print(json.dumps(row), flush=True)
    summary = {
        "cpu_id": HardwareSpec.local(measure=False).cpu_id,
        "model_a": specs["a"].to_dict(), "depth_b": args.depth + 1,
        "build": args.build, "isa": args.isa, "target": args.target,
        **summarise(rows, args.target),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        write_text(args.out, json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0 if summary["passes"] else 1


if __name__ == "__main__":
    sys.exit(main())
