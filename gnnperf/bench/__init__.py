"""Benchmark: the GNN against additive baselines and its own ablations, on every split.

    gnnperf bench [--quick] [--root DATASET] [--out benchmarks/] [--max-minutes M]

Splits: random (by CPU beside its noise floor), leave-one-family-out over every generated
family, leave-one-CPU-out at 0 shots and after ``gnnperf calibrate``'s few-shot correction,
real architectures (``hf-*``, trained on the generated families only); each broken down
by build. Every method trains on a split's training side under one budget rule
(:class:`BudgetRule`: early stopping on validation) and is scored on its test side.

Resumable: each finished split run is stored (``runs/``; ``tools/bench_and_commit.sh``
commits them as they land), a
later call skips it, and the report is rebuilt from every stored run of the same dataset
and settings, marked partial until all have run. The held-out-CPU runs also give the
GNN's unseen-CPU prior (``unseen_cpu_prior.json`` beside the report; copied beside a
checkpoint, ``predict`` widens an uncalibrated unseen CPU's interval by it).

Modules: :mod:`.config` (settings and the budget rule), :mod:`.splits` (which runs),
:mod:`.methods` (one run), :mod:`.results` (storage), :mod:`.report` (figures, targets,
tables), :mod:`.plots`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from gnnperf.atomic import write_text
from gnnperf.bench.config import QUICK, BenchConfig, BudgetRule
from gnnperf.bench.methods import BASELINES, GNN_VARIANTS, LEARNED_ADDITIVE, run_split
from gnnperf.bench.plots import plot_split
from gnnperf.bench.report import View, markdown, split_views, summarise, targets, unseen_cpu_prior
from gnnperf.bench.results import ResultStore, SplitResult
from gnnperf.bench.splits import SPLIT_KINDS, SplitRun, plan_runs
from gnnperf.calibrate.prior import PRIOR_FILE
from gnnperf.data import LatencyDataset, dataset_stats
from gnnperf.errors import GnnperfError
from gnnperf.hardware.spec import HardwareSpec

__all__ = ["BASELINES", "GNN_VARIANTS", "LEARNED_ADDITIVE", "QUICK", "BenchConfig",
           "BudgetRule", "SplitRun", "run", "targets"]


def run(root: str | Path | None, out: Path, cfg: BenchConfig, command: str, *,
        call: str | None = None, max_minutes: float | None = None,
        progress: bool = True, splits: Sequence[str] | None = None, jobs: int = 1,
        device: str | None = None) -> dict[str, Any]:
    """Run the split runs not yet stored (those of ``splits`` only, if given: a split
    kind, or ``KIND:HOLDOUT`` for one holdout's runs; until
    ``max_minutes``, if given, have passed: the runs in progress are finished first), then
    write the report from all stored runs.

    ``command`` is the call that makes the whole report (it names what changes results:
    the dataset, ``--quick``); ``call`` is this invocation, which may run only some of it
    (``--splits``, ``--max-minutes``, ``--jobs``): each run stores the call that made it.

    ``jobs`` > 1 trains that many split runs at once in worker processes (each with its
    share of the cores): a many-core machine finishes the benchmark that many times sooner.
    The networks train on ``device`` (default: a GPU if torch sees one).
    """
    if jobs < 1:
        raise GnnperfError(f"jobs must be at least 1, got {jobs}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    started = time.time()
    cpu = HardwareSpec.local(measure=False).cpu_id
    ds = LatencyDataset(root)
    ds_onnx = LatencyDataset(root, graph="onnx")
    runs, skipped = plan_runs(ds, cfg)
    store = ResultStore(out, ds.fingerprint, cfg.fingerprint())
    unknown = {s.split(":", 1)[0] for s in splits or ()} - set(SPLIT_KINDS)
    if unknown:
        raise GnnperfError(f"unknown split(s) {', '.join(sorted(unknown))}; choose from "
                           f"{', '.join(SPLIT_KINDS)}")
    todo = [r for r in runs if not store.has(r)
            and (not splits or r.key in splits or f"{r.key}:{r.holdout}" in splits)]

    def time_left() -> bool:
        return max_minutes is None or (time.time() - started) / 60 <= max_minutes

    bar = tqdm(total=len(todo), desc="bench", unit="run", disable=not progress)
    if jobs == 1:
        finished: Iterator[SplitResult] = (
            run_split(ds, ds_onnx, r, cfg, device) for r in todo if time_left())
    else:
        finished = _in_workers(ds.folder.root, todo, cfg, device, jobs, time_left)
    for result in finished:
        result.provenance = {"call": call or command, "cpu": cpu,
                             "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        store.save(result)
        bar.update()
        bar.set_postfix_str(result.run.name)
    bar.close()
    results = [store.load(r) for r in runs if store.has(r)]
    views = split_views(results, cfg.calibration_shots)
    report = build_report(results, views, runs, skipped, ds, cfg, command, root,
                          call=call or command, cpu=cpu)
    prior = unseen_cpu_prior([r for r in results if r.run.key == "leave_cpu_out"], "gnn",
                             source=f"{command} (dataset {ds.fingerprint}, settings "
                                    f"{cfg.fingerprint()})")
    report["unseen_cpu_prior"] = prior.to_dict() if prior is not None else None
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.json", out / "report.md"]
    for name, view in views.items():
        written.append(plot_split(name, view, report["splits"][name]["methods"],
                                  out / "plots" / f"{name}.png"))
    write_text(out / "report.json", json.dumps(report, indent=1) + "\n")
    write_text(out / "report.md", markdown(report))
    if prior is not None:  # what `predict` widens an unseen CPU's interval by
        written.append(prior.save(out / PRIOR_FILE))
    else:  # none from these runs: one an earlier report wrote is not theirs
        (out / PRIOR_FILE).unlink(missing_ok=True)
    return report


def _run_row(result: SplitResult) -> dict[str, Any]:
    """One stored run's minutes and provenance (the call, CPU and time that made it; for a
    run stored before those were recorded, the commit that added its file)."""
    return {"run": result.run.name, "minutes": round(result.minutes, 1), **result.provenance}


_WORKER: dict[str, LatencyDataset] = {}


def _start_worker(root: Path, threads: int) -> None:
    torch.set_num_threads(threads)
    _WORKER["kernel"] = LatencyDataset(root)
    _WORKER["onnx"] = LatencyDataset(root, graph="onnx")


def _run_in_worker(split_run: SplitRun, cfg: BenchConfig, device: str) -> SplitResult:
    return run_split(_WORKER["kernel"], _WORKER["onnx"], split_run, cfg, device)


def _in_workers(root: Path, todo: list[SplitRun], cfg: BenchConfig, device: str, jobs: int,
                time_left: Callable[[], bool]) -> Iterator[SplitResult]:
    """Each run's result as it finishes, ``jobs`` at a time; no new one once time is up."""
    threads = max(1, (os.cpu_count() or 1) // jobs)
    pending = list(reversed(todo))
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_start_worker, initargs=(root, threads)) as pool:
        running: set[Future[SplitResult]] = set()
        while pending or running:
            while pending and len(running) < jobs and time_left():
                running.add(pool.submit(_run_in_worker, pending.pop(), cfg, device))
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()


def build_report(results: list[SplitResult], views: dict[str, View], runs: list[SplitRun],
                 skipped: dict[str, str], ds: LatencyDataset, cfg: BenchConfig, command: str,
                 root: str | Path | None, *, call: str, cpu: str
                 ) -> dict[str, Any]:
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
        "dataset": ds.fingerprint, "command": command, "last_call": call, "records": len(ds),
        "tested_records": int(sum(bool(d.v2) for d in ds.record_ids())),
        "cpu": cpu,
        "config": cfg.to_dict(), "config_fingerprint": cfg.fingerprint(),
        "budget_rule": cfg.rule.line(),
        "runs_planned": len(runs), "runs_done": len(results),
        "partial": len(results) < len(runs),
        "runs_missing": [r.name for r in runs if r not in {x.run for x in results}],
        "skipped": skipped,
        "notes": {r.run.name: r.notes for r in results},
        "training_flags": training,
        "minutes": sum(r.minutes for r in results),
        "runs": [_run_row(r) for r in results],
        "noise_floor_mape": stats["noise_floor_mape"],
        "noise_floor_by_cpu": floors,
        "splits": splits,
        "targets": targets(splits),
    }
