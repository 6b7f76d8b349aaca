"""The ``dataset`` subcommand: ``stats``, ``remeasure``, ``traces``, ``export-db`` and
``pack``."""

from __future__ import annotations

import argparse
from pathlib import Path

from gnnperf.cli.common import add_max_slowdown, print_json, slowdown_override


def cmd_dataset_stats(args: argparse.Namespace) -> int:
    from gnnperf.collect.kernels import kernel_stats, tuning_stats
    from gnnperf.collect.kernels.database import COVERED_SCHEDULES
    from gnnperf.data import dataset_stats

    stats = {**dataset_stats(args.root), **kernel_stats(args.root, corpus=True),
             "tuning": tuning_stats(args.root)}
    if args.json:
        print_json(stats)
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
    for title, key in (("family", "per_family"), ("hardware", "per_hw"),
                       ("build", "records_by_build"), ("CPU", "per_cpu")):
        print(f"per {title}: " + ", ".join(f"{k} {v}" for k, v in stats[key].items()))
    print("per build, without repeats (a graph another seed drew, at the same hardware id): "
          + ", ".join(f"{b} {n} records of {stats['graphs_by_build'][b]} graphs"
                      for b, n in stats["distinct_records_by_build"].items()))
    if stats["kernel_measurements"]:
        print(f"kernel dataset: {stats['kernel_measurements']} measurements of "
              f"{stats['kernel_workloads']} workloads, median "
              f"{stats['schedules_per_workload_median']:g} sampled schedules per workload, "
              f"{stats['kernel_cpus']} CPU(s), {stats['kernel_failures']} failures, "
              f"{stats['kernel_measurements_per_hour'] or 0} measurements/h")
        for cpu, f in stats["kernel_noise_floor_by_cpu"].items():
            print(f"kernel-time noise floor on {cpu}: {f['mape']:.2f}% MAPE over "
                  f"{f['pairs']} pairs")
    if stats["corpus_records"] or stats["corpus_failed_architectures"]:
        print(f"corpus: {stats['corpus_records']} records ("
              + ", ".join(f"{b} {n}" for b, n in stats["corpus_records_by_build"].items())
              + f") of {stats['corpus_graphs']} graphs from {stats['corpus_architectures']} "
              f"architectures ({stats['corpus_model_types']} model types; the catalog has "
              f"{stats['corpus_catalog']}); imported and compiled: "
              f"{stats['corpus_import_success_rate']}% of the architectures tried, "
              f"{len(stats['corpus_failed_architectures'])} failed ("
              + ", ".join(f"{k} {v}" for k, v in stats["corpus_failures_by_stage"].items())
              + "; reasons: --json)")
    if stats.get("corpus_workloads"):
        print(f"corpus workloads (kernels of the corpus's default-build graphs) with >= "
              f"{COVERED_SCHEDULES} sampled schedules in the kernel dataset: "
              f"{stats['corpus_workloads_covered']} of {stats['corpus_workloads']} "
              f"({stats['corpus_workload_coverage']:.1f}%); drawn with >= "
              f"{COVERED_SCHEDULES} seeds, every distinct schedule timed: "
              f"{stats['corpus_workloads_sampled']} "
              f"({stats['corpus_workload_sampled_share']:.1f}%)")
    for hw_id, tuning in stats["tuning"].items():
        print(f"tuning (MetaSchedule's evolutionary search) on {hw_id}: "
              f"{tuning['workloads']} workloads; " + "; ".join(
                  f"{budget} trials: {b['workloads']} workloads, "
                  f"{b['minutes_per_workload']:.1f} min each"
                  + "".join(f", best time x{v:.3f} of {k.rsplit('_', 1)[1]} trials'"
                            for k, v in b.items() if k.startswith("best_over_"))
                  for budget, b in tuning["by_budget"].items()))
    return 0


def cmd_dataset_remeasure(args: argparse.Namespace) -> int:
    from gnnperf.data import default_root
    from gnnperf.measure import MeasureSettings

    root = args.root or default_root()
    settings = MeasureSettings.waiting_at_most(args.quiet_timeout, **slowdown_override(args))
    if args.kernels:
        from gnnperf.collect.kernels import remeasure_kernels

        summary = remeasure_kernels(root, args.count, seed=args.seed,
                                    min_age_s=args.min_age_minutes * 60, settings=settings)
    else:
        from gnnperf.collect.noise import remeasure

        summary = remeasure(root, args.count, seed=args.seed,
                            min_age_s=args.min_age_minutes * 60, settings=settings)
    print(summary.line())
    return 1 if summary.all_failed else 0


def cmd_dataset_traces(args: argparse.Namespace) -> int:
    from gnnperf.collect.graph_traces import add_graph_traces

    summary = add_graph_traces(args.root, limit=args.limit)
    print(summary.line())
    return 1 if summary.all_failed else 0


def cmd_dataset_export_db(args: argparse.Namespace) -> int:
    from gnnperf.collect.kernels import export_database

    out = export_database(args.root, args.hw_id, args.out)
    print(f"MetaSchedule JSONDatabase of {args.hw_id} in {out} (apply it with "
          f"relax.transform.MetaScheduleApplyDatabase)")
    return 0


def cmd_dataset_pack(args: argparse.Namespace) -> int:
    from gnnperf.data import LatencyDataset
    from gnnperf.data.pack import pack

    print(pack(LatencyDataset(args.root)).line())
    return 0


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="dataset folder, as written by `collect --out DIR` (default: shipped)")


def register_dataset(sub: argparse._SubParsersAction) -> None:
    """``gnnperf dataset stats``, ``remeasure``, ``traces``, ``export-db`` and ``pack``."""
    p = sub.add_parser("dataset", help="inspect a dataset folder")
    dsub = p.add_subparsers(dest="dataset_command", required=True)
    q = dsub.add_parser("stats", help="counts, latency range and noise floor")
    _add_root(q)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_dataset_stats)
    q = dsub.add_parser("remeasure", help="measure existing records again (noise floor)")
    _add_root(q)
    q.add_argument("--count", type=int, default=100)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--quiet-timeout", type=float, default=float("inf"))
    q.add_argument("--min-age-minutes", type=float, default=30.0,
                   help="re-measure only records at least this old, so the two measurements "
                        "of a pair see different host states (default 30)")
    q.add_argument("--kernels", action="store_true",
                   help="the kernel dataset instead: COUNT random (workload, hardware) pairs, "
                        "all their schedules timed again (kernel_noise_floor_by_cpu)")
    add_max_slowdown(q)
    q.set_defaults(func=cmd_dataset_remeasure)
    q = dsub.add_parser("traces", help="lower stored sampled:* graphs again to add their "
                                       "schedules' MetaSchedule traces (resumable)")
    _add_root(q)
    q.add_argument("--limit", type=int, default=None, help="at most this many graphs")
    q.set_defaults(func=cmd_dataset_traces)
    q = dsub.add_parser("export-db", help="the measured schedules of one hardware id as a "
                                          "MetaSchedule JSONDatabase, for TVM to apply")
    _add_root(q)
    q.add_argument("--hw-id", required=True, metavar="CPU/ISA/Nt",
                   help="hardware id of the kernel records, e.g. amd-f25m17s1-aad670/"
                        "x86-64-v3/2t (a wrong one gets the list of those stored)")
    q.add_argument("--out", type=Path, required=True, metavar="FOLDER",
                   help="where database_workload.json and database_tuning_record.json go "
                        "(replaced as a whole, never half-written)")
    q.set_defaults(func=cmd_dataset_export_db)
    q = dsub.add_parser("pack", help="add the encoded records that no pack holds to a new "
                                     "pack in DIR/packs/ (shipped: a fresh clone then trains "
                                     "without encoding them)")
    _add_root(q)
    q.set_defaults(func=cmd_dataset_pack)
