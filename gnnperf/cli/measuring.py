"""Subcommands that lower, compile and time models on this machine: ``graph``, ``measure``,
``collect``, ``collect-kernels``, ``collect-tuning`` and ``hw``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gnnperf.cli.common import (
    add_kernel_collector_args,
    add_max_slowdown,
    add_target_args,
    lower_from_args,
    parse_families,
    parse_int_list,
    print_json,
    read_plan,
    slowdown_override,
    tuned_schedules,
    zoo_specs,
)
from gnnperf.errors import GnnperfError


def cmd_graph(args: argparse.Namespace) -> int:
    from gnnperf.features import extract_graph

    hw, lowered = lower_from_args(args, None)
    graph = extract_graph(lowered, ms_features=not args.no_ms_features)
    if args.json:
        data = graph.to_dict()
        out = {
            "model": str(args.model),
            "hardware": {"isa": hw.isa, "cpu_model": hw.cpu_model, "target": graph.target},
            "build": graph.build,
            "summary": graph.summary(),
            "kernels": [dict(n, intensity=round(graph.nodes[i].intensity, 4))
                        for i, n in enumerate(data["nodes"])],
            "edges": [{"src": a, "dst": b, "bytes": c} for a, b, c in graph.edges],
            "inputs": data["inputs"],
        }
        print_json(out)
        return 0
    s = graph.summary()
    print(f"{args.model}: {s['kernels']} kernels ({s['distinct_kernels']} distinct), "
          f"{s['edges']} edges, {s['gflops']:.4f} GFLOP, {s['mbytes']:.2f} MB moved "
          f"[{hw.isa}, build {graph.build}]")
    print(f"{'#':>4}  {'kernel':<48} {'pattern':<22} {'MFLOP':>10} {'KB':>10}")
    for n in graph.nodes:
        print(f"{n.index:>4}  {n.name[:48]:<48} {n.pattern:<22} {n.flops / 1e6:>10.3f} "
              f"{(n.bytes_read + n.bytes_written) / 1024:>10.1f}")
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    import tempfile

    from gnnperf.features import extract_graph
    from gnnperf.lowering.pipeline import compile_lowered, export_executable, export_kernel_library
    from gnnperf.measure import (
        MeasureSettings,
        make_inputs,
        measure_library,
        measure_remote,
        reference_library,
    )

    hw, lowered = lower_from_args(args, args.threads, tuned_schedules(args))
    graph = extract_graph(lowered, ms_features=False)
    if lowered.build.searched:
        print(f"{lowered.build}: {len(graph.nodes) - len(lowered.schedule_fallbacks)} of "
              f"{len(graph.nodes)} kernels have a searched schedule on {hw.record_hw_id}",
              file=sys.stderr)
    ex = compile_lowered(lowered)
    arrays = make_inputs(lowered.inputs)
    expected = [n.name for n in graph.nodes]
    settings = MeasureSettings.waiting_at_most(args.quiet_timeout, repeat=args.repeat,
                                               **slowdown_override(args))
    with tempfile.TemporaryDirectory(prefix="gnnperf-") as tmp:
        lib = export_executable(ex, Path(tmp) / "model.so")
        if args.rpc:
            kernels = export_kernel_library(ex, Path(tmp) / "kernels.so") if args.per_kernel \
                else None
            m = measure_remote(lib, arrays, args.rpc, kernels_path=kernels, settings=settings)
        else:
            m = measure_library(lib, arrays, hw.threads, per_kernel=args.per_kernel,
                                settings=settings, reference=reference_library(hw))
    if m.kernels is not None and [k.name for k in m.kernels] != expected:
        raise GnnperfError("the executed kernels differ from the kernel graph's nodes")
    if args.json:
        out = {"model": str(args.model), "hw_id": hw.hw_id, "build": graph.build,
               "timings": lowered.timings, **m.to_dict()}
        if m.kernels is not None:
            out["kernels"] = [{"index": i, "name": k.name, "median_ms": k.median_ms,
                               "cv": k.cv, "flops": graph.nodes[i].flops}
                              for i, k in enumerate(m.kernels)]
        print_json(out)
        return 0
    w = m.whole
    print(f"{args.model} on {m.device} {hw.isa}/{m.threads}t, build {graph.build}: "
          f"median {w.median_ms:.4f} ms (CV {w.cv * 100:.1f}%, IQR {w.iqr_ms:.4f} ms, "
          f"n={len(w.samples_ms)}, other load {m.other_load * 100:.0f}%, attempts {m.attempts})")
    if m.reference:
        print("reference kernels (machine state, interleaved): " + ", ".join(
            f"{name} {r['median_ms']:.4f} ms" for name, r in m.reference.items()))
    if m.kernels is not None:
        print(f"{'#':>4}  {'kernel':<48} {'ms':>10} {'CV%':>6}")
        for i, k in enumerate(m.kernels):
            print(f"{i:>4}  {k.name[:48]:<48} {k.median_ms:>10.4f} {k.cv * 100:>6.1f}")
        print(f"sum of kernels {m.kernel_sum_ms:.4f} ms = "
              f"{m.kernel_sum_ms / w.median_ms * 100:.1f}% of the whole model")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from gnnperf.collect.models import collect, parse_hw_list
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.measure import MeasureSettings

    families = parse_families(args.families)
    count: int | dict[str, int] = args.count
    if args.plan is not None:
        count = read_plan(args.plan)
        families = list(count)
    settings = MeasureSettings.waiting_at_most(
        args.quiet_timeout, repeat=args.repeat, kernel_repeat=min(args.repeat, 5),
        **slowdown_override(args))
    summary = collect(
        args.out, families, count, parse_hw_list(args.hw),
        [b.strip() for b in args.build.split(",")],
        start_seed=args.start_seed, rpc=args.rpc,
        rpc_hw=HardwareSpec.coerce(str(args.rpc_hw)) if args.rpc_hw else None,
        per_kernel=not args.no_per_kernel,
        settings=settings, max_default_gflops=args.max_default_gflops,
        redo_noisy=args.redo_noisy, retry_failed=args.retry_failed,
        host_tag=args.host_tag, compile_timeout_s=args.compile_timeout,
    )
    print(summary.line())
    return 1 if summary.all_failed else 0


def cmd_collect_kernels(args: argparse.Namespace) -> int:
    from gnnperf.collect.kernels import collect_kernels
    from gnnperf.collect.models import parse_hw_list
    from gnnperf.measure import MeasureSettings

    settings = MeasureSettings.waiting_at_most(
        args.quiet_timeout, kernel_repeat=args.repeat, **slowdown_override(args))
    summary = collect_kernels(
        args.out, zoo_specs(args), parse_hw_list(args.hw), schedules=args.schedules,
        settings=settings,
        max_unscheduled_gflop=args.max_unscheduled_gflop, max_minutes=args.max_minutes,
        order=args.order, compile_timeout_s=args.compile_timeout,
        skip_covered=args.skip_covered, retry_failed=args.retry_failed)
    print(summary.line())
    return 1 if summary.all_failed else 0


def cmd_collect_tuning(args: argparse.Namespace) -> int:
    from gnnperf.collect.kernels import collect_tuning
    from gnnperf.collect.models import parse_hw_list
    from gnnperf.measure import MeasureSettings

    summary = collect_tuning(
        args.out, zoo_specs(args), parse_hw_list(args.hw), args.trials, seed=args.seed,
        settings=MeasureSettings.waiting_at_most(args.quiet_timeout, repeat=args.repeat,
                                                 **slowdown_override(args)),
        max_minutes=args.max_minutes, retry_failed=args.retry_failed, order=args.order)
    print(summary.line())
    return 1 if summary.all_failed else 0


def cmd_hw(args: argparse.Namespace) -> int:
    from gnnperf.hardware.spec import HardwareSpec, supported_isas

    if args.list:
        print(" ".join(supported_isas()))
        return 0
    spec = HardwareSpec.local(args.isa, args.threads, remeasure=args.remeasure)
    if not args.no_reference:
        from dataclasses import replace

        from gnnperf.measure import measure_reference, reference_library

        timed = measure_reference(reference_library(spec), spec.threads)
        spec = replace(spec, reference_ms={k: v["median_ms"] for k, v in timed.items()})
    print_json({"hw_id": spec.hw_id, "cpu_id": spec.cpu_id, **spec.to_dict()})
    return 0


def register_graph(sub: argparse._SubParsersAction) -> None:
    """``gnnperf graph``."""
    p = sub.add_parser("graph", help="lower a model and print its kernel graph")
    p.add_argument("model", type=Path)
    add_target_args(p, threads=False)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-ms-features", action="store_true",
                   help="skip MetaSchedule per-store features (faster)")
    p.set_defaults(func=cmd_graph)


def register_measure(sub: argparse._SubParsersAction) -> None:
    """``gnnperf measure``."""
    p = sub.add_parser("measure", help="compile and measure a model (whole and per kernel)")
    p.add_argument("model", type=Path)
    add_target_args(p)
    p.add_argument("--per-kernel", action="store_true")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder whose kernel records (best-of:S) or tuning runs "
                        "(tuned:N) give a searched build its schedules (default: shipped)")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT:KEY", help="TVM RPC tracker")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--quiet-timeout", type=float, default=60.0,
                   help="seconds to wait for a quiet machine (no load, no slowed host) before "
                        "measuring anyway")
    add_max_slowdown(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_measure)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from gnnperf.calibrate import checkpoint_sha256, load_calibration, remove_calibration
    from gnnperf.hardware.spec import HardwareSpec

    spec = HardwareSpec.coerce(args.hw)
    sha = checkpoint_sha256(args.checkpoint)
    if args.remove:
        gone = remove_calibration(spec.cpu_id, sha)
        print(f"{spec.cpu_id}: calibration {'removed' if gone else 'was not there'}; "
              "predictions are 0-shot")
        return 0
    if args.show:
        stored = load_calibration(spec.cpu_id, sha)
        if args.json:
            print_json(stored.to_dict() if stored else None)
        else:
            print(stored.line() if stored else f"{spec.cpu_id}: not calibrated (0 shots)")
        return 0
    from gnnperf.calibrate.run import calibrate
    from gnnperf.measure import MeasureSettings

    settings = MeasureSettings.waiting_at_most(args.quiet_timeout, repeat=args.repeat,
                                               **slowdown_override(args))
    threads = parse_int_list(args.threads or None, "--threads", "counts such as 1,2")
    done = calibrate(spec, models=args.models, builds=args.builds.split(","), threads=threads,
                     checkpoint=args.checkpoint,
                     settings=settings,
                     progress=None if args.json else lambda line: print(line, file=sys.stderr))
    if args.json:
        print_json(done.to_dict())
    else:
        print(f"{done.line()}; {done.seconds / 60:.1f} min. `gnnperf predict` applies it to "
              f"every hardware id of {done.cpu_id}")
    return 0


def register_calibrate(sub: argparse._SubParsersAction) -> None:
    """``gnnperf calibrate``."""
    p = sub.add_parser("calibrate", help="measure a few small zoo models here and correct "
                                         "this CPU's predictions (few-shot)")
    p.add_argument("--hw", default="local", help="local, local/ISA or local/ISA/Nt to measure at")
    p.add_argument("--models", type=int, default=10, help="zoo models to measure (>= 2)")
    p.add_argument("--builds", default="default,sampled:0",
                   help="builds to measure each model in, comma-separated (searched builds, "
                        "best-of and tuned, take sampled's factor)")
    p.add_argument("--threads", default=None, metavar="N,M",
                   help="thread counts to measure at (default: 1 and --hw's)")
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--quiet-timeout", type=float, default=120.0,
                   help="seconds to wait for a quiet machine before measuring anyway")
    add_max_slowdown(p)
    p.add_argument("--show", action="store_true", help="print the stored calibration")
    p.add_argument("--remove", action="store_true", help="forget it (back to 0 shots)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_calibrate)


def register_collect(sub: argparse._SubParsersAction) -> None:
    """``gnnperf collect``."""
    p = sub.add_parser("collect", help="measure zoo models into dataset shards (resumable)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="dataset folder: records go to DIR/shards, what `dataset stats "
                        "--root DIR`, `train --root DIR` and `bench --root DIR` read")
    p.add_argument("--families", default="all", help="comma-separated families, or 'all'")
    p.add_argument("--count", type=int, default=10, help="seeds per family")
    p.add_argument("--plan", type=Path, default=None, metavar="PLAN.json",
                   help="seeds per family from `gnnperf sweep-plan` (replaces --families "
                        "and --count)")
    p.add_argument("--start-seed", type=int, default=0)
    p.add_argument("--hw", default="x86-64-v3:1,x86-64-v3:2", help="ISA:THREADS pairs")
    p.add_argument("--build", default="default,sampled:0", help="comma-separated builds")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT:KEY")
    p.add_argument("--rpc-hw", type=Path, default=None, metavar="SPEC.json",
                   help="hardware spec of the RPC board (from `gnnperf hw` run on it)")
    p.add_argument("--no-per-kernel", action="store_true")
    p.add_argument("--repeat", type=int, default=10, help="whole-model samples per label")
    p.add_argument("--compile-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="record a model whose compilation takes longer as a compile failure "
                        "(LLVM can take an hour on one unrolled schedule)")
    p.add_argument("--max-default-gflops", type=float, default=0.4,
                   help="skip default (unscheduled) builds of models above this many GFLOP")
    p.add_argument("--quiet-timeout", type=float, default=float("inf"),
                   help="seconds to wait for a quiet machine before measuring anyway "
                        "(default: wait as long as it takes)")
    p.add_argument("--redo-noisy", action="store_true",
                   help="measure again keys whose record predates the speed probe or "
                        "measurement v2, or was taken under load or on a slowed host (the new "
                        "record supersedes)")
    p.add_argument("--retry-failed", action="store_true",
                   help="try again keys that failed (budget skips excepted)")
    p.add_argument("--host-tag", default=None, metavar="TAG",
                   help="hardware ids TAG/ISA/Nt instead of CPU-ID/ISA/Nt (not needed: ids "
                        "come from the CPU signature, so two CPUs never share one)")
    add_max_slowdown(p)
    p.set_defaults(func=cmd_collect)


def cmd_sweep_plan(args: argparse.Namespace) -> int:
    from gnnperf.atomic import write_text
    from gnnperf.collect.sweep import plan_sweep
    from gnnperf.estimators.gnn.predictor import load_predictor

    plan, errors = plan_sweep(args.root, args.add, load_predictor(args.checkpoint), args.floor)
    for op, seeds in plan.items():
        error = f"{errors[op] * 100:6.1f}%" if op in errors else "   n/a "
        print(f"{op:<18} median error {error}  seeds {seeds}")
    write_text(args.out, json.dumps(plan, indent=1) + "\n")
    print(f"wrote {args.out}: `gnnperf collect --plan {args.out}` measures them")
    return 0


def register_sweep_plan(sub: argparse._SubParsersAction) -> None:
    """``gnnperf sweep-plan``."""
    p = sub.add_parser("sweep-plan",
                       help="share N more operator-sweep configurations out by the "
                            "predictor's error on each operator (adaptive sampling)")
    p.add_argument("--root", type=Path, default=Path("datasets"), metavar="DIR")
    p.add_argument("--add", type=int, required=True, metavar="N",
                   help="configurations to add over every operator")
    p.add_argument("--floor", type=int, default=1, help="configurations each operator gets")
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--out", type=Path, required=True, metavar="PLAN.json")
    p.set_defaults(func=cmd_sweep_plan)


def register_collect_kernels(sub: argparse._SubParsersAction) -> None:
    """``gnnperf collect-kernels``."""
    p = sub.add_parser("collect-kernels",
                       help="time many sampled schedules of every zoo kernel (kernel dataset, "
                            "resumable)")
    add_kernel_collector_args(p, "kernel records", count=10, hw="x86-64-v3:2,x86-64-v3:1")
    p.add_argument("--schedules", type=int, default=16,
                   help="schedules drawn per workload from MetaSchedule's design space")
    p.add_argument("--repeat", type=int, default=5, help="samples per kernel timing")
    p.add_argument("--max-unscheduled-gflop", type=float, default=0.5,
                   help="time the unscheduled kernel only up to this many GFLOP")
    p.add_argument("--compile-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="record a model whose own compilation (to capture its kernels' "
                        "inputs) takes longer as a model-compile failure, skipped from then "
                        "on")
    p.add_argument("--retry-failed", action="store_true",
                   help="visit again the models whose own compilation failed or timed out")
    p.add_argument("--skip-covered", action="store_true",
                   help="time only workloads no hardware id has drawn 8 schedule seeds of "
                        "and timed yet (issue 45's coverage); models with such workloads "
                        "then get no whole-model best-of record here")
    add_order_arg(p, "kernel measurements")
    p.set_defaults(func=cmd_collect_kernels)


def add_order_arg(p: argparse.ArgumentParser, costs: str) -> None:
    """``--order``, the order a kernel or tuning collector visits the models in."""
    p.add_argument("--order", default="given", metavar="{given,cheapest-tuned}",
                   help="visit the models as listed, or next each time the one whose "
                        f"whole-model tuned records need the fewest {costs} (skipping "
                        "models with nothing left to do)")


def register_collect_tuning(sub: argparse._SubParsersAction) -> None:
    """``gnnperf collect-tuning``."""
    p = sub.add_parser("collect-tuning",
                       help="tune every kernel of the given models with MetaSchedule's "
                            "evolutionary search at a trial budget (tuned:N labels; "
                            "resumable, nothing else may run beside it)")
    add_kernel_collector_args(p, "tuning runs", count=1, hw="x86-64-v3:2")
    p.add_argument("--trials", type=int, default=64,
                   help="trials per kernel; a multiple of 64 extends runs of fewer whole "
                        "iterations")
    p.add_argument("--seed", type=int, default=0, help="the search's seed")
    p.add_argument("--repeat", type=int, default=10,
                   help="whole-model samples per tuned:N label")
    p.add_argument("--retry-failed", action="store_true",
                   help="measure again whole-model tuned:N records that failed")
    add_order_arg(p, "workloads to tune")
    p.set_defaults(func=cmd_collect_tuning)


def register_hw(sub: argparse._SubParsersAction) -> None:
    """``gnnperf hw``."""
    p = sub.add_parser("hw", help="show this machine's hardware spec (measures once, cached)")
    p.add_argument("--isa", default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--list", action="store_true", help="list supported ISAs")
    p.add_argument("--remeasure", action="store_true",
                   help="run the micro-benchmarks again (best of 3) instead of using the cache; "
                        "do it on a quiet machine")
    p.add_argument("--no-reference", action="store_true",
                   help="skip timing the reference kernels (GEMM, stream, call chain) that "
                        "describe the machine's state now (a few seconds)")
    p.set_defaults(func=cmd_hw)
