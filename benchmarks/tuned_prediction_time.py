"""What predicting a ``best-of`` build (called ``tuned`` when this was written) costs: its
kernels' 16 candidate schedules are drawn and analysed (not timed) the first time, then read
from the feature cache.

    python benchmarks/tuned_prediction_time.py [--family resnet] [--seed 12345]
        [--hw local/x86-64-v3/2t]

Prints, for one zoo model, the time of ``gnnperf.predict`` with ``default``, then with
``best-of`` twice (first: candidates drawn; second: from the cache), in one process. Use a
model whose graphs are not in the feature cache yet (another ``--seed``) for the first
figures to mean what they say. Measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import gnnperf
from gnnperf import zoo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="resnet")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--hw", default="local/x86-64-v3/2t")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        zoo.export_onnx(zoo.sample_spec(args.family, args.seed), path)
        for label, build in (("default", "default"), ("best-of, first", "best-of"),
                             ("best-of, cached", "best-of")):
            start = time.perf_counter()
            result = gnnperf.predict(path, args.hw, build=build)
            print(f"{label:14s} {time.perf_counter() - start:6.1f} s  "
                  f"{len(result.kernels)} kernels  predicted {result.latency_ms:.3f} ms")


if __name__ == "__main__":
    main()
