"""Is this machine quiet enough to label latencies? Repeated timings of one zoo model.

Compiles one zoo model, then times it ``--samples`` times (each sample at least
``--min-ms`` of back-to-back runs), with a speed-probe reading before each sample, in a
fresh process per thread count (TVM fixes its thread pool at start-up). Prints the
median, CV and range of the samples and how often the probe was within
``--max-slowdown`` of its best, which is what the collector waits for.

    python benchmarks/timing_stability.py [--family resnet --seed 3 --build sampled:0]
    python benchmarks/timing_stability.py --probe 200   # the speed probe's spread alone
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np


def _run(args: argparse.Namespace) -> None:
    import tvm
    from tvm import relax

    from gnnperf import zoo
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.pipeline import compile_lowered, lower
    from gnnperf.measure import SpeedProbe, make_inputs

    threads = int(os.environ["TVM_NUM_THREADS"])
    spec = zoo.sample_spec(args.family, args.seed)
    target = HardwareSpec.local(args.isa, threads, measure=False).target()
    lowered = lower(import_to_relax(load_onnx(zoo.export_onnx(spec))), target, args.build)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(compile_lowered(lowered), dev)
    inputs = [tvm.runtime.tensor(a, dev) for a in make_inputs(lowered.inputs, seed=spec.seed)]
    for _ in range(5):
        vm["main"](*inputs)
    probe = SpeedProbe()
    probe.calibrate(10)
    timer = vm.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=args.min_ms)
    ratios, times = [], []
    for _ in range(args.samples):
        ratios.append(max(probe.slowdowns().values()))
        times.append(float(timer(*inputs).results[0]) * 1e3)
        time.sleep(0.2)
    t, r = np.array(times), np.array(ratios)
    print(f"{spec.model_id} {args.build} {args.isa} {threads}t: median {np.median(t):.3f} ms, "
          f"CV {t.std() / t.mean() * 100:.1f}%, range {t.min():.3f}-{t.max():.3f} ms; "
          f"probe within {args.max_slowdown}x of its best in {np.mean(r <= args.max_slowdown):.0%} "
          f"of {len(r)} tries (median {np.median(r):.2f}x)", flush=True)


def _probe_spread(readings: int) -> None:
    """Quantiles of ``readings`` speed-probe readings per CPU, as ratios to the best: how
    close to its best this host's probe settles (what ``--max-slowdown`` is set against)."""
    from gnnperf.measure import SpeedProbe

    probe = SpeedProbe()
    samples: dict[int, list[float]] = {cpu: [] for cpu in probe.cpus}
    for _ in range(readings):
        for cpu, ms in probe.sample_ms().items():
            samples[cpu].append(ms)
        time.sleep(0.05)
    for cpu, ms in samples.items():
        t = np.array(ms)
        q = np.percentile(t, [50, 95]) / t.min()
        print(f"CPU {cpu}: {len(t)} readings {t.min():.3f}-{t.max():.3f} ms, median "
              f"{q[0]:.2f}x the best, 95th percentile {q[1]:.2f}x; within 1.15x of the "
              f"best in {np.mean(t <= 1.15 * t.min()):.0%}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="resnet")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--build", default="sampled:0")
    ap.add_argument("--isa", default="x86-64-v3")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--min-ms", type=int, default=50)
    ap.add_argument("--max-slowdown", type=float, default=1.15)
    ap.add_argument("--probe", type=int, default=0, metavar="N",
                    help="only take N speed-probe readings per CPU and print their spread")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _run(args)
        return
    from gnnperf.hardware.spec import _cpu_model

    print(f"CPU: {_cpu_model()}")
    if args.probe:
        _probe_spread(args.probe)
        return
    for threads in args.threads.split(","):
        env = {**os.environ, "TVM_NUM_THREADS": threads.strip()}
        subprocess.run([sys.executable, __file__, "--child", *sys.argv[1:]], env=env, check=True)


if __name__ == "__main__":
    main()
