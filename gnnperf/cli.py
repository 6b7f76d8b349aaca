"""The ``gnnperf`` command line (also ``python -m gnnperf``).

Every :class:`gnnperf.errors.GnnperfError` becomes one line on stderr and exit
code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import GnnperfError, MeasurementError, one_line


def _add_target_args(p: argparse.ArgumentParser, threads: bool = True) -> None:
    p.add_argument("--isa", default=None, help="x86-64, x86-64-v2, x86-64-v3, x86-64-v4 "
                   "(default: the best this CPU supports)")
    if threads:
        p.add_argument("--threads", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("--build", default="default", help="default, dlight or sampled:SEED")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="static shape for a dynamic input (repeatable)")


def _input_shapes(items: Sequence[str]) -> dict[str, list[int]] | None:
    if not items:
        return None
    out: dict[str, list[int]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise GnnperfError(f"--input-shape wants NAME=D0,D1,..., got '{item}'") from None
    return out


def _print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


def _lower_from_args(args: argparse.Namespace, threads: int | None, database: Any = None
                     ) -> Any:
    from .hardware import HardwareSpec
    from .lowering import lower_onnx

    hw = HardwareSpec.local(args.isa, threads, measure=False)
    return hw, lower_onnx(args.model, hw, args.build, _input_shapes(args.input_shape),
                          database)


def _tuned_database(args: argparse.Namespace) -> Any:
    """The measured schedules of this machine's hardware config, for a ``tuned`` build."""
    from .builds import BuildConfig
    from .hardware import HardwareSpec
    from .kernel_dataset import tuned_database

    if BuildConfig.parse(args.build).kind != "tuned":
        return None
    hw = HardwareSpec.local(args.isa, args.threads, measure=False)
    return tuned_database(args.root, hw.record_hw_id)


def cmd_graph(args: argparse.Namespace) -> int:
    from .features import extract_graph

    hw, lowered = _lower_from_args(args, None)
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
        _print_json(out)
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

    from .features import extract_graph
    from .lowering import compile_lowered, export_executable, export_kernel_library
    from .measure import (
        MeasureSettings,
        make_inputs,
        measure_library,
        measure_remote,
        reference_library,
    )

    hw, lowered = _lower_from_args(args, args.threads, _tuned_database(args))
    graph = extract_graph(lowered, ms_features=False)
    if lowered.build.kind == "tuned":
        print(f"tuned: {len(graph.nodes) - len(lowered.schedule_fallbacks)} of "
              f"{len(graph.nodes)} kernels have a measured schedule on {hw.record_hw_id}",
              file=sys.stderr)
    ex = compile_lowered(lowered)
    arrays = make_inputs(lowered.inputs)
    expected = [n.name for n in graph.nodes]
    settings = MeasureSettings.waiting_at_most(args.quiet_timeout, repeat=args.repeat)
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
        _print_json(out)
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


def _slowdown_override(args: argparse.Namespace) -> dict[str, float]:
    """``--max-slowdown`` as a MeasureSettings override (none when not given)."""
    if args.max_slowdown is None:
        return {}
    if args.max_slowdown < 1.0:
        raise MeasurementError(f"--max-slowdown is a ratio to the speed probe's best, at "
                               f"least 1.0, got {args.max_slowdown}")
    return {"max_slowdown": args.max_slowdown}


def cmd_collect(args: argparse.Namespace) -> int:
    from .collect import collect, parse_hw_list
    from .hardware import HardwareSpec
    from .measure import MeasureSettings

    families = _families(args.families)
    settings = MeasureSettings.waiting_at_most(
        args.quiet_timeout, repeat=args.repeat, kernel_repeat=min(args.repeat, 5),
        **_slowdown_override(args))
    summary = collect(
        args.out, families, args.count, parse_hw_list(args.hw),
        [b.strip() for b in args.build.split(",")],
        start_seed=args.start_seed, rpc=args.rpc,
        rpc_hw=HardwareSpec.coerce(str(args.rpc_hw)) if args.rpc_hw else None,
        per_kernel=not args.no_per_kernel,
        settings=settings, max_default_gflops=args.max_default_gflops,
        redo_noisy=args.redo_noisy, retry_failed=args.retry_failed,
        host_tag=args.host_tag,
    )
    print(summary.line())
    return 1 if summary.all_failed else 0


def cmd_collect_kernels(args: argparse.Namespace) -> int:
    from .collect import interleaved_specs, parse_hw_list
    from .kernel_dataset import collect_kernels
    from .measure import MeasureSettings

    settings = MeasureSettings.waiting_at_most(
        args.quiet_timeout, kernel_repeat=args.repeat, **_slowdown_override(args))
    summary = collect_kernels(
        args.out, list(interleaved_specs(_families(args.families), args.count,
                                         args.start_seed)),
        parse_hw_list(args.hw), schedules=args.schedules, settings=settings,
        max_unscheduled_gflop=args.max_unscheduled_gflop, max_minutes=args.max_minutes)
    print(summary.line())
    return 1 if summary.all_failed else 0


def _families(text: str) -> list[str]:
    from . import zoo

    families = [f.strip() for f in text.split(",") if f.strip()]
    return list(zoo.FAMILIES) if families == ["all"] else families


def cmd_dataset_stats(args: argparse.Namespace) -> int:
    from .data import dataset_stats
    from .kernel_dataset import kernel_stats

    stats = {**dataset_stats(args.root), **kernel_stats(args.root)}
    if args.json:
        _print_json(stats)
        return 0
    noise = stats["noise_floor_mape"]
    print(f"{stats['records']} records ({stats['records_with_kernel_labels']} with kernel "
          f"labels) of {stats['models']} models, {stats['families']} families, "
          f"{stats['hw_configs']} hw configs, {stats['builds']} builds; "
          f"{stats['failures']} failures")
    if stats["records"]:
        print(f"latency {stats['latency_ms_min']:.4f} .. {stats['latency_ms_max']:.1f} ms; "
              f"noise floor "
              + (f"{noise:.2f}% MAPE over {stats['noise_floor_records']} re-measured records"
                 if noise is not None else "not measured yet"))
    if stats["noise_floor_by_cpu"]:
        print("noise floor per CPU: " + ", ".join(
            f"{cpu} {f['mape']:.2f}% over {f['pairs']} pairs"
            + (f" ({f['mape_normalised']:.2f}% normalised by the reference kernels)"
               if f["mape_normalised"] is not None else "")
            for cpu, f in stats["noise_floor_by_cpu"].items()))
    for title, key in (("family", "per_family"), ("hardware", "per_hw"), ("build", "per_build"),
                       ("CPU", "per_cpu")):
        print(f"per {title}: " + ", ".join(f"{k} {v}" for k, v in stats[key].items()))
    if stats["kernel_measurements"]:
        print(f"kernel dataset: {stats['kernel_measurements']} measurements of "
              f"{stats['kernel_workloads']} workloads, median "
              f"{stats['schedules_per_workload_median']:g} sampled schedules per workload, "
              f"{stats['kernel_cpus']} CPU(s), {stats['kernel_failures']} failures, "
              f"{stats['kernel_measurements_per_hour'] or 0} measurements/h")
        for cpu, f in stats["kernel_noise_floor_by_cpu"].items():
            print(f"kernel-time noise floor on {cpu}: {f['mape']:.2f}% MAPE over "
                  f"{f['pairs']} pairs")
    return 0


def cmd_dataset_remeasure(args: argparse.Namespace) -> int:
    from .collect import remeasure
    from .data import default_root
    from .measure import MeasureSettings

    root = args.root or default_root()
    settings = MeasureSettings.waiting_at_most(args.quiet_timeout, **_slowdown_override(args))
    if args.kernels:
        from .kernel_dataset import remeasure_kernels

        summary = remeasure_kernels(root, args.count, seed=args.seed,
                                    min_age_s=args.min_age_minutes * 60, settings=settings)
    else:
        summary = remeasure(root, args.count, seed=args.seed,
                            min_age_s=args.min_age_minutes * 60, settings=settings)
    print(summary.line())
    return 1 if summary.all_failed else 0


def cmd_train(args: argparse.Namespace) -> int:
    from .data import LatencyDataset
    from .predictor import DEFAULT_CHECKPOINT
    from .training import TrainConfig, save_checkpoint, train_model

    cfg = TrainConfig(split=args.split, holdout=args.holdout, epochs=args.epochs,
                      patience=args.patience, aux_weight=args.aux_weight, use_hw=not args.no_hw,
                      seed=args.seed, device=args.device, max_minutes=args.max_minutes,
                      ensemble=args.ensemble, hidden=args.hidden, layers=args.layers,
                      loss=args.loss, correction_weight=args.correction_weight,
                      aux_share_power=args.aux_share_power,
                      legacy_weight=args.legacy_weight, legacy_in_test=args.legacy_in_test)
    dataset = LatencyDataset(args.root)
    result = train_model(dataset, cfg)
    path = save_checkpoint(result, cfg, dataset, args.out or DEFAULT_CHECKPOINT.parent)
    m = result.metrics
    t = m["test"]
    print(f"dataset {dataset.fingerprint}: {m['train_graphs']} train / {m['val_graphs']} val / "
          f"{m['test_graphs']} test graphs, {m['members']} member(s), best epochs "
          f"{m['best_epochs']}, {m['epochs_run']} epochs in {m['train_minutes']:.1f} min")
    print(f"test ({cfg.split}{'/' + cfg.holdout if cfg.holdout else ''}): MAPE {t['mape']:.2f}%  "
          f"RMSPE {t['rmspe']:.2f}%  Acc@5% {t['acc5']:.1f}%  Acc@10% {t['acc10']:.1f}%  "
          f"Spearman {t.get('spearman', float('nan')):.3f}  "
          f"{m['interval_nominal_coverage']:.0f}% interval covers "
          f"{m['test_interval_coverage']:.1f}%")
    if m["members_stopped_by_time_cap"]:
        print(f"note: {m['members_stopped_by_time_cap']} member(s) stopped at the "
              f"{cfg.max_minutes:g}-minute cap, not by early stopping; a slower or busier "
              "machine stops them at other epochs")
    print(f"checkpoint: {path}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    import warnings

    from .predictor import predict

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        r = predict(args.model, args.hw, build=args.build, checkpoint=args.checkpoint,
                    input_shapes=_input_shapes(args.input_shape))
    for reason in r.warnings:
        print(f"gnnperf: warning: {reason}", file=sys.stderr)
    if args.json:
        _print_json(r.to_dict())
        return 0
    print(f"{args.model} on {r.hw_id}, build {r.build}: {r.latency_ms:.4f} ms "
          f"[{r.low_ms:.4f}, {r.high_ms:.4f}] ({r.coverage * 100:.0f}% interval), "
          f"predicted in {r.predict_s * 1e3:.0f} ms")
    if args.kernels:
        for k in r.kernels:
            print(f"{k.index:>4}  {k.name[:48]:<48} {k.ms:>10.4f} ms {k.flops / 1e6:>10.3f} MFLOP")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import QUICK, BenchConfig, run

    if args.out is None:
        args.out = Path("benchmarks/quick") if args.quick else Path("benchmarks")
    cfg = QUICK if args.quick else BenchConfig()
    command = "python -m gnnperf.bench" + (" --quick" if args.quick else "")
    report = run(args.root, args.out, cfg, command)
    print(json.dumps({k: v for k, v in report["splits"].get("random", {}).items()}, indent=1))
    return 0


def cmd_hw(args: argparse.Namespace) -> int:
    from .hardware import HardwareSpec, supported_isas

    if args.list:
        print(" ".join(supported_isas()))
        return 0
    spec = HardwareSpec.local(args.isa, args.threads, remeasure=args.remeasure)
    if not args.no_reference:
        from dataclasses import replace

        from .measure import measure_reference, reference_library

        timed = measure_reference(reference_library(spec), spec.threads)
        spec = replace(spec, reference_ms={k: v["median_ms"] for k, v in timed.items()})
    _print_json({"hw_id": spec.hw_id, "cpu_id": spec.cpu_id, **spec.to_dict()})
    return 0


def add_train_args(p: argparse.ArgumentParser) -> None:
    from .training import TrainConfig

    d = TrainConfig()
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder, as written by `collect --out DIR` (default: shipped)")
    p.add_argument("--split", default=d.split,
                   choices=["random", "leave-family-out", "leave-hw-out", "real-architectures"])
    p.add_argument("--holdout", default=None, help="family or hw id held out by the split")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--patience", type=int, default=d.patience)
    p.add_argument("--aux-weight", type=float, default=d.aux_weight,
                   help="per-kernel loss weight (0: no auxiliary loss)")
    p.add_argument("--loss", default=d.loss, choices=["mse", "huber"],
                   help="error of log-latencies")
    p.add_argument("--correction-weight", type=float, default=d.correction_weight,
                   help="L2 on the whole-model head's non-additive part")
    p.add_argument("--aux-share-power", type=float, default=d.aux_share_power,
                   help="weight kernel errors by (share of the kernel sum)^POWER (0: equal)")
    p.add_argument("--ensemble", type=int, default=d.ensemble,
                   help="members of the deep ensemble")
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--layers", type=int, default=d.layers)
    p.add_argument("--no-hw", action="store_true", help="ablation: hide hardware features")
    p.add_argument("--legacy-weight", type=float, default=d.legacy_weight,
                   help="loss weight of records from before measurement v2 (v2: 1)")
    p.add_argument("--legacy-in-test", action="store_true",
                   help="test on records from before measurement v2 too (by default they "
                        "are never tested on)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=d.device)
    p.add_argument("--max-minutes", type=float, default=d.max_minutes,
                   help="wall-clock budget for all members together")
    p.add_argument("--out", type=Path, default=None,
                   help="checkpoint folder (default: the package's checkpoints/, which "
                        "predict reads)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gnnperf", description="Predict and measure latency of ONNX models on CPUs (TVM).")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("graph", help="lower a model and print its kernel graph")
    p.add_argument("model", type=Path)
    _add_target_args(p, threads=False)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-ms-features", action="store_true",
                   help="skip MetaSchedule per-store features (faster)")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("measure", help="compile and measure a model (whole and per kernel)")
    p.add_argument("model", type=Path)
    _add_target_args(p)
    p.add_argument("--per-kernel", action="store_true")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder whose kernel records give a tuned build its "
                        "schedules (default: shipped)")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT:KEY", help="TVM RPC tracker")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--quiet-timeout", type=float, default=60.0,
                   help="seconds to wait for a quiet machine (no load, no slowed host) before "
                        "measuring anyway")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("collect", help="measure zoo models into dataset shards (resumable)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="dataset folder: records go to DIR/shards, what `dataset stats "
                        "--root DIR`, `train --root DIR` and `bench --root DIR` read")
    p.add_argument("--families", default="all", help="comma-separated families, or 'all'")
    p.add_argument("--count", type=int, default=10, help="seeds per family")
    p.add_argument("--start-seed", type=int, default=0)
    p.add_argument("--hw", default="x86-64-v3:1,x86-64-v3:2", help="ISA:THREADS pairs")
    p.add_argument("--build", default="default,sampled:0", help="comma-separated builds")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT:KEY")
    p.add_argument("--rpc-hw", type=Path, default=None, metavar="SPEC.json",
                   help="hardware spec of the RPC board (from `gnnperf hw` run on it)")
    p.add_argument("--no-per-kernel", action="store_true")
    p.add_argument("--repeat", type=int, default=10, help="whole-model samples per label")
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
    _add_max_slowdown(p)
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("collect-kernels",
                       help="time many sampled schedules of every zoo kernel (kernel dataset, "
                            "resumable)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="dataset folder: kernel records go to DIR/kernels")
    p.add_argument("--families", default="all", help="comma-separated families, or 'all'")
    p.add_argument("--count", type=int, default=10, help="seeds per family")
    p.add_argument("--start-seed", type=int, default=0)
    p.add_argument("--hw", default="x86-64-v3:2,x86-64-v3:1", help="ISA:THREADS pairs")
    p.add_argument("--schedules", type=int, default=16,
                   help="schedules drawn per workload from MetaSchedule's design space")
    p.add_argument("--repeat", type=int, default=5, help="samples per kernel timing")
    p.add_argument("--max-unscheduled-gflop", type=float, default=0.5,
                   help="time the unscheduled kernel only up to this many GFLOP")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop after the model in progress once this many minutes passed")
    p.add_argument("--quiet-timeout", type=float, default=float("inf"),
                   help="seconds to wait for a quiet machine before measuring anyway")
    _add_max_slowdown(p)
    p.set_defaults(func=cmd_collect_kernels)

    p = sub.add_parser("train", help="train the latency GNN (same as python train.py)")
    add_train_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("predict", help="predict a model's latency without running it")
    p.add_argument("model", type=Path)
    p.add_argument("--hw", default="local", help="local, local/ISA, local/ISA/Nt or a JSON file")
    p.add_argument("--build", default="default")
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...")
    p.add_argument("--kernels", action="store_true", help="print the per-kernel breakdown")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("dataset", help="inspect a dataset folder")
    dsub = p.add_subparsers(dest="dataset_command", required=True)
    q = dsub.add_parser("stats", help="counts, latency range and noise floor")
    q.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder, as written by `collect --out DIR` (default: shipped)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_dataset_stats)
    q = dsub.add_parser("remeasure", help="measure existing records again (noise floor)")
    q.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder, as written by `collect --out DIR` (default: shipped)")
    q.add_argument("--count", type=int, default=100)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--quiet-timeout", type=float, default=float("inf"))
    q.add_argument("--min-age-minutes", type=float, default=30.0,
                   help="re-measure only records at least this old, so the two measurements "
                        "of a pair see different host states (default 30)")
    q.add_argument("--kernels", action="store_true",
                   help="the kernel dataset instead: COUNT random (workload, hardware) pairs, "
                        "all their schedules timed again (kernel_noise_floor_by_cpu)")
    _add_max_slowdown(q)
    q.set_defaults(func=cmd_dataset_remeasure)

    p = sub.add_parser("bench", help="GNN vs additive baselines and ablations on every split "
                                     "(same as python -m gnnperf.bench)")
    p.add_argument("--quick", action="store_true", help="one seed, few epochs, few holdouts")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder, as written by `collect --out DIR` (default: shipped)")
    p.add_argument("--out", type=Path, default=None,
                   help="default: benchmarks/ (full run) or benchmarks/quick/ (--quick), so a "
                        "quick check never replaces the committed report")
    p.set_defaults(func=cmd_bench)

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
    _accept_debug_anywhere(parser)
    return parser


def _add_max_slowdown(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-slowdown", type=float, default=None, metavar="RATIO",
                   help="measure only while the speed probe runs at most RATIO times slower "
                        "than its best (default 1.15; a host whose probe never settles "
                        "near its best needs more, see datasets/README.md)")


def _accept_debug_anywhere(parser: argparse.ArgumentParser) -> None:
    """Let ``--debug`` follow the subcommand too (``gnnperf predict m.onnx --debug``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                   help="show tracebacks")
                _accept_debug_anywhere(child)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (GnnperfError, OSError) as exc:
        if args.debug:
            raise
        print(f"gnnperf: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gnnperf: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
