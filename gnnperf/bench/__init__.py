"""Benchmark: the GNN against additive baselines and its own ablations, on every split.

    gnnperf bench [--quick] [--root DATASET] [--out benchmarks/] [--max-minutes M] [--commit]

Splits: random (by CPU beside its noise floor), leave-one-family-out over every generated
family, leave-one-CPU-out at 0 shots and after ``gnnperf calibrate``'s few-shot correction,
real architectures (``hf-*``, trained on the generated families only); each broken down
by build. Every method trains on a split's training side under one budget rule
(:class:`BudgetRule`: early stopping on validation) and is scored on its test side.

Resumable: each finished split run is stored (``runs/``; committed with ``--commit``), a
later call skips it, and the report is rebuilt from every stored run of the same dataset
and settings, marked partial until all have run. Modules: :mod:`.config` (settings and the
budget rule), :mod:`.splits` (which runs), :mod:`.methods` (one run), :mod:`.results`
(storage), :mod:`.report` (figures, targets, tables), :mod:`.plots`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..atomic import write_text
from ..data import LatencyDataset, dataset_stats
from ..errors import GnnperfError
from ..hardware import HardwareSpec
from .config import QUICK, BenchConfig, BudgetRule
from .methods import BASELINES, GNN_VARIANTS, LEARNED_ADDITIVE, run_split
from .plots import plot_split
from .report import View, markdown, split_views, summarise, targets
from .results import ResultStore, SplitResult, commit_paths
from .splits import SPLIT_KINDS, SplitRun, plan_runs

__all__ = ["BASELINES", "GNN_VARIANTS", "LEARNED_ADDITIVE", "QUICK", "BenchConfig",
           "BudgetRule", "SplitRun", "run", "targets"]


def run(root: str | Path | None, out: Path, cfg: BenchConfig, command: str, *,
        max_minutes: float | None = None, commit: bool = False, progress: bool = True,
        splits: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the split runs not yet stored (those of ``splits`` only, if given; until
    ``max_minutes``, if given, have passed: the run in progress is finished first), then
    write the report from all stored runs."""
    started = time.time()
    ds = LatencyDataset(root)
    ds_onnx = LatencyDataset(root, graph="onnx")
    runs, skipped = plan_runs(ds, cfg)
    store = ResultStore(out, ds.fingerprint, cfg.fingerprint())
    unknown = set(splits or ()) - set(SPLIT_KINDS)
    if unknown:
        raise GnnperfError(f"unknown split(s) {', '.join(sorted(unknown))}; choose from "
                           f"{', '.join(SPLIT_KINDS)}")
    todo = [r for r in runs if not store.has(r) and (not splits or r.key in splits)]
    bar = tqdm(todo, desc="bench", unit="run", disable=not progress)
    for split_run in bar:
        if max_minutes is not None and (time.time() - started) / 60 > max_minutes:
            break
        bar.set_postfix_str(split_run.name)
        path = store.save(run_split(ds, ds_onnx, split_run, cfg))
        if commit:
            commit_paths([path], f"bench: {split_run.name} ({ds.fingerprint})")
    bar.close()
    results = [store.load(r) for r in runs if store.has(r)]
    views = split_views(results)
    report = build_report(results, views, runs, skipped, ds, cfg, command, root)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.json", out / "report.md"]
    for name, view in views.items():
        written.append(plot_split(name, view, report["splits"][name]["methods"],
                                  out / "plots" / f"{name}.png"))
    write_text(out / "report.json", json.dumps(report, indent=1) + "\n")
    write_text(out / "report.md", markdown(report))
    if commit:
        commit_paths(written, f"bench: report, {len(results)} of {len(runs)} runs "
                              f"({ds.fingerprint})")
    return report


def build_report(results: list[SplitResult], views: dict[str, View], runs: list[SplitRun],
                 skipped: dict[str, str], ds: LatencyDataset, cfg: BenchConfig, command: str,
                 root: str | Path | None) -> dict[str, Any]:
    stats = dataset_stats(root)
    floors = stats["noise_floor_by_host"]
    splits = summarise(views, floors)
    training: dict[str, Any] = {}
    for r in results:
        for method, m in r.methods.items():
            if m.training.get("stopped_by_safety_cap"):
                training.setdefault("stopped_by_safety_cap", []).append(
                    f"{r.run.name}/{method}")
    return {
        "dataset": ds.fingerprint, "command": command, "records": len(ds),
        "tested_records": int(sum(bool(v) for v in ds._data.v2)),
        "cpu": HardwareSpec.local(measure=False).cpu_id,
        "config": cfg.to_dict(), "config_fingerprint": cfg.fingerprint(),
        "budget_rule": cfg.rule.line(),
        "runs_planned": len(runs), "runs_done": len(results),
        "partial": len(results) < len(runs),
        "runs_missing": [r.name for r in runs if r not in {x.run for x in results}],
        "skipped": skipped,
        "notes": {r.run.name: r.notes for r in results},
        "training_flags": training,
        "minutes": sum(r.minutes for r in results),
        "noise_floor_mape": stats["noise_floor_mape"],
        "noise_floor_by_cpu": floors,
        "splits": splits,
        "targets": targets(splits),
    }
