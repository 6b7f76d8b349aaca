"""Subcommands around the models: ``train``, ``train-kernels``, ``predict``, ``advise``,
``rank`` and ``bench``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gnnperf.cli.common import parse_input_shapes, parse_int_list, print_json
from gnnperf.errors import GnnperfError


def cmd_train(args: argparse.Namespace) -> int:
    import dataclasses
    import time

    start = time.monotonic()
    if not args.total_minutes > 0:  # before anything is read or trained
        raise GnnperfError(f"--total-minutes must be positive, got {args.total_minutes}")
    # a first run encodes what the shipped packs do not hold: say so before the imports
    # (torch, PyG, TVM: seconds) and the reading start
    print(f"reading the dataset {args.root or 'datasets/'} (records the packs do not hold "
          "are encoded, once)", flush=True)

    from gnnperf.data import LatencyDataset
    from gnnperf.estimators.gnn.config import training_minutes
    from gnnperf.estimators.gnn.training import TrainConfig, save_checkpoint, train_model
    from gnnperf.prediction.api import DEFAULT_CHECKPOINT

    cfg = TrainConfig(split=args.split, holdout=args.holdout, epochs=args.epochs,
                      patience=args.patience, aux_weight=args.aux_weight, use_hw=not args.no_hw,
                      seed=args.seed, device=args.device, max_minutes=args.max_minutes,
                      ensemble=args.ensemble, hidden=args.hidden, layers=args.layers,
                      loss=args.loss, correction_weight=args.correction_weight,
                      aux_share_power=args.aux_share_power,
                      legacy_weight=args.legacy_weight, legacy_in_test=args.legacy_in_test,
                      build_balance=args.build_balance, kernel_model=args.kernel_model,
                      label_noise_weighting=not args.no_label_noise_weights,
                      model_sigma=args.model_sigma)
    dataset = LatencyDataset(args.root)
    spent = (time.monotonic() - start) / 60
    cap = training_minutes(cfg.max_minutes, args.total_minutes, spent)
    if cap < cfg.max_minutes:
        print(f"reading the dataset took {spent:.1f} min: training capped at {cap:.1f} min "
              f"(not {cfg.max_minutes:g}) to end within --total-minutes {args.total_minutes:g}",
              flush=True)
        cfg = dataclasses.replace(cfg, max_minutes=cap)
    result = train_model(dataset, cfg)
    # why a first run trains for less than later ones (the cap itself is in the config)
    result.metrics.update(total_minutes=args.total_minutes, dataset_read_minutes=round(spent, 3))
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

    from gnnperf.prediction.api import predict

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        r = predict(args.model, args.hw, build=args.build, checkpoint=args.checkpoint,
                    input_shapes=parse_input_shapes(args.input_shape))
    for reason in r.warnings:
        print(f"gnnperf: warning: {reason}", file=sys.stderr)
    if r.calibration:
        print(f"gnnperf: calibrated: {r.calibration}", file=sys.stderr)
    if r.unseen_cpu:
        print(f"gnnperf: unseen CPU: {r.unseen_cpu}", file=sys.stderr)
    if args.json:
        print_json(r.to_dict())
        return 0
    print(f"{args.model} on {r.hw_id}, build {r.build}: {r.latency_ms:.4f} ms "
          f"[{r.low_ms:.4f}, {r.high_ms:.4f}] ({r.coverage * 100:.0f}% interval), "
          f"predicted in {r.predict_s * 1e3:.0f} ms")
    if args.kernels:
        for k in r.kernels:
            print(f"{k.index:>4}  {k.name[:48]:<48} {k.ms:>10.4f} ms {k.flops / 1e6:>10.3f} MFLOP")
    if args.plot:
        print(f"per-kernel breakdown: {r.plot(args.plot, title=str(args.model))}")
    return 0


def cmd_advise(args: argparse.Namespace) -> int:
    import warnings

    from gnnperf.prediction.advise import advise

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each row carries its own reasons
        advice = advise(args.model, args.hw, threads=parse_int_list(args.threads, "--threads"),
                        isas=args.isa.split(",") if args.isa else None,
                        budgets=parse_int_list(args.budgets, "--budgets") or (),
                        checkpoint=args.checkpoint, root=args.root,
                        input_shapes=parse_input_shapes(args.input_shape))
    if args.json:
        print_json(advice.to_dict())
    else:
        print(advice.table())
        print(f"advised in {advice.seconds:.1f} s")
    if args.plot:
        print(f"plot: {advice.plot(args.plot)}", file=sys.stderr if args.json else sys.stdout)
    return 0


RANK_FIELDS = ("model", "hw", "build", "latency_ms", "low_ms", "high_ms", "gflop")


def _significant(value: float, digits: int = 7) -> float:
    """``value`` to ``digits`` significant digits: a table of tiny and large models keeps
    the same relative precision for each (fixed decimals cut a 40 µs model to 4 digits)."""
    return float(f"{value:.{digits}g}")


def cmd_rank(args: argparse.Namespace) -> int:
    """Predict many models (files, or folders of .onnx files) and write a ranked table."""
    import csv
    import io
    import warnings

    from gnnperf.atomic import write_text
    from gnnperf.prediction.api import predict_many

    models: list[Path] = []
    for item in args.models:
        if item.is_dir():
            models += sorted(item.glob("*.onnx"))
        elif item.is_file():
            models.append(item)
        else:
            raise GnnperfError(f"no ONNX file or folder '{item}'")
    if not models:
        raise GnnperfError("no .onnx files to rank")
    if args.out.suffix not in (".csv", ".json"):
        raise GnnperfError(f"--out wants a .csv or .json file, got '{args.out}'")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        predictions = predict_many(models, args.hw, build=args.build,
                                   checkpoint=args.checkpoint, workers=args.workers,
                                   progress=True)
    rows = sorted(({"model": str(m), "hw": p.hw_id, "build": p.build,
                    "latency_ms": _significant(p.latency_ms), "low_ms": _significant(p.low_ms),
                    "high_ms": _significant(p.high_ms), "gflop": _significant(p.gflop)}
                   for m, p in zip(models, predictions, strict=True)),
                  key=lambda r: r["latency_ms"])
    if args.out.suffix == ".json":
        write_text(args.out, json.dumps(rows, indent=1) + "\n")
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=RANK_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
        write_text(args.out, buf.getvalue())
    for rank, r in enumerate(rows[:10], 1):
        print(f"{rank:>3}. {r['latency_ms']:>10.4f} ms  [{r['low_ms']:.4f}, {r['high_ms']:.4f}]"
              f"  {r['gflop']:>8.3f} GFLOP  {r['model']}")
    print(f"{len(rows)} models ranked: {args.out}")
    if args.plot:
        from gnnperf.prediction.plots import plot_ranking

        print(f"latency against GFLOPs: {plot_ranking(rows, args.plot)}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gnnperf.bench import QUICK, BenchConfig, run

    if args.out is None:
        args.out = Path("benchmarks/quick") if args.quick else Path("benchmarks")
    if args.max_minutes is not None and not args.max_minutes > 0:
        raise GnnperfError(f"--max-minutes must be positive, got {args.max_minutes}")
    cfg = QUICK if args.quick else BenchConfig()

    def flags(*pairs: tuple[str, Any]) -> str:
        return "".join(f" {flag}" + ("" if value is True else f" {value}")
                       for flag, value in pairs if value)

    # what makes the whole report, and this call, which may run only part of it
    command = "gnnperf bench" + flags(("--quick", args.quick), ("--root", args.root))
    call = command + flags(("--splits", args.splits), ("--max-minutes", args.max_minutes),
                           ("--jobs", args.jobs if args.jobs != 1 else None))
    splits = args.splits.split(",") if args.splits else None
    if args.jobs < 1:
        raise GnnperfError(f"--jobs must be at least 1, got {args.jobs}")
    report = run(args.root, args.out, cfg, command, call=call, max_minutes=args.max_minutes,
                 splits=splits, jobs=args.jobs, device=args.device)
    print(f"{report['runs_done']} of {report['runs_planned']} split runs"
          + (" (partial: run again to go on)" if report["partial"] else ""))
    for t in report["targets"]:
        value = "n/a" if t["value"] is None else f"{t['value']:.3f}"
        print(f"  {'met ' if t['met'] else 'MISS'} {t['split']}: {t['target']} = {value}")
    print(f"report: {args.out / 'report.md'}")
    return 0


def add_train_args(p: argparse.ArgumentParser) -> None:
    from gnnperf.estimators.gnn.config import TOTAL_MINUTES, TrainConfig

    d = TrainConfig()
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder, as written by `collect --out DIR` (default: shipped)")
    p.add_argument("--split", default=d.split,
                   choices=["random", "leave-family-out", "leave-hw-out", "leave-cpu-out",
                            "real-architectures"])
    p.add_argument("--holdout", default=None,
                   help="family, hw id or CPU (the machine part of a hw id) held out by the split")
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
    p.add_argument("--build-balance", type=float, default=d.build_balance, metavar="POWER",
                   help="weight a build kind's records by (1 / its share)^POWER in the "
                        "whole-model loss (0: equal records; 1: equal kinds)")
    p.add_argument("--no-label-noise-weights", action="store_true",
                   help="weigh every record alike instead of by its machine's and build "
                        "kind's A/A noise floor")
    p.add_argument("--model-sigma", type=float, default=d.model_sigma, metavar="SIGMA",
                   help="log error the model keeps whatever the labels' noise: a label this "
                        "noisy weighs half a noiseless one")
    p.add_argument("--legacy-in-test", action="store_true",
                   help="test on records from before measurement v2 too (by default they "
                        "are never tested on)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=d.device)
    p.add_argument("--max-minutes", type=float, default=d.max_minutes,
                   help="wall-clock budget for all members together")
    p.add_argument("--total-minutes", type=float, default=TOTAL_MINUTES,
                   help="end the whole run within this: when reading the dataset took "
                        "long (a first run processes it), training gets less than "
                        "--max-minutes")
    p.add_argument("--kernel-model", default="auto", metavar="PATH|auto|none",
                   help="kernel cost model the GNN's nodes read, frozen (default auto: "
                        "checkpoints/kernel_model.pt when it exists; `gnnperf train-kernels` "
                        "writes it)")
    p.add_argument("--out", type=Path, default=None,
                   help="checkpoint folder (default: the package's checkpoints/, which "
                        "predict reads)")


def register_train(sub: argparse._SubParsersAction) -> None:
    """``gnnperf train`` (also ``python train.py``)."""
    p = sub.add_parser("train", help="train the latency GNN (same as python train.py)")
    add_train_args(p)
    p.set_defaults(func=cmd_train)


def cmd_train_kernels(args: argparse.Namespace) -> int:
    from gnnperf.estimators.kernel import (
        KernelTrainConfig,
        load_kernel_table,
        save_kernel_model,
        train_kernel_model,
    )

    cfg = KernelTrainConfig(epochs=args.epochs, patience=args.patience, seed=args.seed,
                            drop_prefixes=tuple(args.drop_features or ()),
                            booster=not args.no_booster)
    if args.rank_weight is not None:
        cfg.rank_weight = args.rank_weight
    table = load_kernel_table(args.root)
    result = train_kernel_model(table, cfg)
    from gnnperf.estimators.gnn.training import DEFAULT_KERNEL_MODEL

    path = save_kernel_model(result, cfg, table, args.out or DEFAULT_KERNEL_MODEL)
    if args.json:
        print_json(result.metrics)
    else:
        w = result.metrics["workloads"]
        print(f"{len(table)} schedules of {sum(w.values())} workloads: {w['train']} train / "
              f"{w['val']} val / {w['test']} test, best epoch {result.best_epoch}")
        for split in ("val", "test"):
            m = result.metrics.get(split)
            if m is None:
                continue
            tuned = m.get("tuned", {}).get("mape", float("nan"))
            best = m.get("tuned_from_candidates", {}).get("mape", float("nan"))
            print(f"{split}: schedule MAPE {m['schedules']['mape']:.1f}%  within-workload "
                  f"Spearman {m['group_spearman']:.3f}  top-1 regret "
                  f"{m['top1_regret_pct']:.1f}%  tuned MAPE {tuned:.1f}% (tuned head), "
                  f"{best:.1f}% (best candidate)")
            if "time_head" in m:
                head = m["time_head"]
                print(f"{split}, the MLP's time head instead of the trees: schedule MAPE "
                      f"{head['schedules']['mape']:.1f}%  within-workload Spearman "
                      f"{head['group_spearman']:.3f}")
        if choice := result.metrics.get("unscheduled_choice"):
            print(f"unscheduled kernels ({choice['rows']} validation rows): trees "
                  f"{choice['trees_mape']:.1f}%, time head {choice['time_head_mape']:.1f}%: "
                  f"predicted by the {choice['predicted_by'].replace('_', ' ')}")
    print(f"kernel model: {path}")
    return 0


def register_train_kernels(sub: argparse._SubParsersAction) -> None:
    """``gnnperf train-kernels``: the kernel cost model, on the kernel dataset."""
    p = sub.add_parser("train-kernels", help="train the kernel cost model on the kernel "
                                             "dataset (per-schedule latency and ranking)")
    p.add_argument("--root", default=None, help="dataset folder (default: the shipped one)")
    p.add_argument("--out", type=Path, default=None,
                   help="where to write it (default: the shipped checkpoints/kernel_model.pt)")
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--patience", type=int, default=30)
    p.add_argument("--seed", type=int, default=0, help="model seed and workload split")
    p.add_argument("--no-booster", action="store_true",
                   help="predict schedule times with the MLP's time head, not with "
                        "gradient-boosted trees on the same rows")
    p.add_argument("--rank-weight", type=float, default=None,
                   help="weight of the within-workload ranking loss (0: pointwise only; "
                   "default: KernelTrainConfig's)")
    p.add_argument("--drop-features", nargs="*", metavar="PREFIX",
                   help="zero the feature columns starting with these (ablations: sched_)")
    p.add_argument("--json", action="store_true", help="print every figure as JSON")
    p.set_defaults(func=cmd_train_kernels)


def register_predict(sub: argparse._SubParsersAction) -> None:
    """``gnnperf predict``."""
    p = sub.add_parser("predict", help="predict a model's latency without running it")
    p.add_argument("model", type=Path)
    p.add_argument("--hw", default="local", help="local, local/ISA, local/ISA/Nt or a JSON file")
    p.add_argument("--build", default="default",
                   help="default, sampled:SEED or best-of:S (the builds the checkpoint learned)")
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...")
    p.add_argument("--kernels", action="store_true", help="print the per-kernel breakdown")
    p.add_argument("--plot", type=Path, default=None, metavar="FILE.png",
                   help="draw the per-kernel breakdown")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)


def register_advise(sub: argparse._SubParsersAction) -> None:
    """``gnnperf advise``."""
    p = sub.add_parser("advise", help="predict every build at every thread count and ISA of "
                                      "the machine, with the gain and cost of tuning")
    p.add_argument("model", type=Path)
    p.add_argument("--hw", default="local", help="local (every ISA and thread count of this "
                                                 "machine), or one described machine")
    p.add_argument("--threads", default=None, metavar="N,M",
                   help="thread counts (default: 1 to all cores)")
    p.add_argument("--isa", default=None, metavar="ISA,ISA",
                   help="ISAs (default: those the checkpoint trained on that the CPU has)")
    p.add_argument("--budgets", default="16,64,256", metavar="N,M",
                   help="tuned:N budgets to advise on, where the checkpoint predicts them")
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset whose tuning runs give the tuning cost (default: shipped)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...")
    p.add_argument("--plot", type=Path, default=None, metavar="FILE.png")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_advise)


def register_rank(sub: argparse._SubParsersAction) -> None:
    """``gnnperf rank``."""
    p = sub.add_parser("rank", help="predict many models (files or folders of .onnx) and "
                                    "write a ranked CSV/JSON table")
    p.add_argument("models", type=Path, nargs="+")
    p.add_argument("--hw", default="local", help="local, local/ISA, local/ISA/Nt or a JSON file")
    p.add_argument("--build", default="default",
                   help="default, sampled:SEED or best-of:S (the builds the checkpoint learned)")
    p.add_argument("--checkpoint", type=Path, default=None)
    p.add_argument("--out", type=Path, required=True, metavar="TABLE.csv|TABLE.json")
    p.add_argument("--workers", type=int, default=None,
                   help="lowering processes (default: one per core)")
    p.add_argument("--plot", type=Path, default=None, metavar="FILE.png",
                   help="draw predicted latency against GFLOPs")
    p.set_defaults(func=cmd_rank)


def register_bench(sub: argparse._SubParsersAction) -> None:
    """``gnnperf bench`` (also ``python -m gnnperf.bench``)."""
    p = sub.add_parser("bench", help="GNN vs additive baselines and ablations on every split "
                                     "(same as python -m gnnperf.bench)")
    p.add_argument("--quick", action="store_true", help="one seed, few epochs, few holdouts")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder, as written by `collect --out DIR` (default: shipped)")
    p.add_argument("--out", type=Path, default=None,
                   help="default: benchmarks/ (full run) or benchmarks/quick/ (--quick), so a "
                        "quick check never replaces the committed report")
    p.add_argument("--max-minutes", type=float, default=None, metavar="M",
                   help="start no new split run after M minutes (the report covers the runs "
                        "stored so far; run again to go on)")
    p.add_argument("--splits", default=None, metavar="A,B",
                   help="run only these splits now (random, leave_family_out, leave_cpu_out, "
                        "real_architectures; KIND:HOLDOUT for one holdout, e.g. "
                        "leave_cpu_out:amd-f26m2s1-5bfb5d); the report still covers every "
                        "stored run")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="train N split runs at once, each in its own process with 1/N of the "
                        "cores (for many-core machines)")
    p.add_argument("--device", default=None,
                   help="where the networks train (default: cuda if torch sees a GPU, else cpu)")
    p.set_defaults(func=cmd_bench)
