"""The tuning collector (issue 47): every workload of the given models tuned once per
hardware setting by MetaSchedule's evolutionary search (:func:`.tuning.tune_workload`),
stored as ``kernel_tuning`` lines in the kernel dataset, then each model measured whole as
a ``tuned:N`` build composed from those runs; resumable.

Which workloads: those the model's run calls as kernels, found by one instrumented run of
its ``default`` build as the kernel collector finds them (a kernel the VM replaces by a
builtin is never tuned, since no build would run its schedule). A workload many models
share is tuned once per hardware setting; one tuned before at fewer trials is extended
(:func:`.tuning.tune_workload`'s ``extend``), so a 256-trial run holds the 64-trial one.
The search times its candidates on this machine: nothing else may run beside it, other
collectors included.

Once every kernel its run calls is tuned on a hardware setting, the model is compiled with
each kernel's fastest trial of the first N (what ``MetaScheduleApplyDatabase`` applies
after ``static_shape_tuning`` at ``max_trials_per_task=N``) and measured under
measurement v2, whole and per kernel, as a ``tuned:N`` record in ``DIR/shards``: for the
collector's budget and each smaller one of :data:`.tuning_run.TUNING_BUDGETS` its runs hold.

With ``order="cheapest-tuned"`` the models are visited, each time, fewest workloads still to
tune per whole-model record first (:func:`.ordering.cheapest_tuned_first`, as the kernel
collector's best-of records): a search costs about a minute per workload whatever the
workload, and models share workloads, so the corpus's order spends hours on one large
model while models whose kernels are tuned already wait for their record.
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from gnnperf import zoo
from gnnperf.collect.kernels.database import (
    compose_database,
    runs_at,
    stored_tuning,
    write_tuning_summary,
)
from gnnperf.collect.kernels.ordering import (
    Order,
    TunedCost,
    cheapest_tuned_first,
    check_order,
    family_workloads,
    tuned_cost,
    visit_models,
)
from gnnperf.collect.kernels.progress import CollectorProgress, read_progress
from gnnperf.collect.kernels.tuning import tune_workload
from gnnperf.collect.kernels.tuning_run import (
    STRATEGY,
    TRIALS_PER_ITERATION,
    TUNING_BUDGETS,
    TuningRun,
    tuning_key,
)
from gnnperf.collect.kernels.workloads import KernelWorkload, capture_inputs, model_workloads
from gnnperf.collect.models import Collector, CollectSummary, package_versions, record_key
from gnnperf.errors import GnnperfError, one_line
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.lowering.pipeline import lower
from gnnperf.measure import MeasureSettings, WorkerPool, other_load, wait_for_quiet
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.shards import ShardWriter
from gnnperf.store.tuning_summary import TUNING_SHARD_PREFIX

#: tuning lines per shard: a 256-trial run's line holds 256 traces (hundreds of KB)
TUNING_LINES_PER_SHARD = 25


@dataclass
class TuningSummary(CollectSummary):
    """``done`` counts workloads tuned; ``records`` the whole-model ``tuned:N`` records."""

    records: CollectSummary = field(default_factory=CollectSummary)

    def line(self) -> str:
        return (f"workloads tuned: {super().line()}; whole-model tuned:N records: "
                f"{self.records.line()}")


def record_budgets(trials: int) -> list[int]:
    """The ``tuned:N`` builds a collector tuning at ``trials`` per kernel measures whole:
    its own budget and the smaller ones of :data:`TUNING_BUDGETS` that its runs hold
    (whole iterations of them)."""
    smaller = [b for b in TUNING_BUDGETS if b < trials and b % TRIALS_PER_ITERATION == 0]
    return [*smaller, trials]


class TuningCollector:
    """Tunes the workloads of zoo models into ``DIR/kernels`` at ``trials`` per workload."""

    def __init__(self, out: str | Path, hw: Sequence[tuple[str, int]], trials: int, *,
                 seed: int = 0, settings: MeasureSettings | None = None,
                 shard_prefix: str | None = None, retry_failed: bool = False) -> None:
        if trials < 1:
            raise GnnperfError(f"--trials must be at least 1, got {trials}")
        self.root = DatasetFolder.resolve(out)
        self.trials = trials
        self.seed = seed
        #: whole-model records whose measurement failed are measured again
        self.retry_failed = retry_failed
        self.settings = settings or MeasureSettings(quiet_timeout_s=float("inf"))
        self.isas: dict[str, list[int]] = {}
        for isa, threads in hw:
            self.isas.setdefault(isa, []).append(threads)
        lines, self.failed = stored_tuning(self.root.kernels)
        self.budgets = record_budgets(trials)
        #: per key, the stored run (the one with the most trials), kept current as runs are
        #: written: what is tuned, what may be extended, and what a tuned:N build is
        #: composed from
        self.stored = {k: TuningRun.from_line(o) for k, o in lines.items()}
        self.record_collectors: dict[tuple[str, int], Collector] = {}
        host = socket.gethostname().split(".")[0] or "host"
        # its shards' names say what they hold: readers of tuning runs open only those
        self.writer = ShardWriter(self.root.kernels,
                                  f"{TUNING_SHARD_PREFIX}{shard_prefix or host}",
                                  max_lines=TUNING_LINES_PER_SHARD)
        self.hw_specs: dict[tuple[str, int], HardwareSpec] = {}
        self.workers = WorkerPool()
        self.versions = package_versions()
        #: the kernel dataset's models and their workloads, read at the first ranking and
        #: kept current as models are lowered (:meth:`cheapest_tuned_first`)
        self.progress: CollectorProgress | None = None

    def runs_at(self, hw: HardwareSpec, budget: int) -> dict[str, TuningRun]:
        """Per workload, the stored run of ``hw`` that holds its ``budget``-trial search."""
        return runs_at((r for r in self.stored.values() if r.hw_id == hw.record_hw_id), budget)

    def hw(self, isa: str, threads: int) -> HardwareSpec:
        if (isa, threads) not in self.hw_specs:
            self.hw_specs[(isa, threads)] = HardwareSpec.local(isa, threads)
        return self.hw_specs[(isa, threads)]

    def needs(self, w: KernelWorkload, hw: HardwareSpec) -> bool:
        """Whether ``w`` is still to be tuned on ``hw`` at this collector's budget."""
        return not self._tuned(w.workload_id, hw.record_hw_id) \
            and not self._failed(w.workload_id, hw.record_hw_id)

    def _tuned(self, workload_id: str, hw_id: str) -> bool:
        """Whether a stored run holds this collector's budget for the pair."""
        run = self.stored.get(tuning_key(workload_id, hw_id, self.trials))
        return run is not None and run.covers(self.trials)

    def _failed(self, workload_id: str, hw_id: str) -> bool:
        """Whether the pair's tuning failed at this collector's budget."""
        return f"{tuning_key(workload_id, hw_id, self.trials)}|{self.trials}" in self.failed

    def cheapest_tuned_first(self, specs: Sequence[zoo.ModelSpec]) -> list[zoo.ModelSpec]:
        """``specs`` fewest workloads still to tune per whole-model ``tuned:N`` record
        first, those with nothing left to do dropped (:func:`.ordering.cheapest_tuned_first`).

        A model's workloads are those its ``kernel_model`` line in the kernel dataset
        holds (the kernel collector stores one per lowered model); a model never lowered is
        costed from its family (:func:`.ordering.family_workloads`)."""
        if self.progress is None:
            self.progress = read_progress(self.root.kernels)
        return cheapest_tuned_first(specs, self.costs(specs))

    def costs(self, specs: Sequence[zoo.ModelSpec]) -> dict[str, TunedCost]:
        """What visiting each of ``specs`` buys at this collector's budget
        (:func:`.ordering.tuned_cost`): a (workload, hardware id) pair is done once tuned
        or failed, and covered once tuned; a workload the VM never runs as a kernel is
        both (no build schedules it). A model's records are done once every budget the
        collector measures has one."""
        progress = self.progress or CollectorProgress()
        hws = [self.hw(isa, t) for isa, threads in self.isas.items() for t in threads]
        pairs = [(w, h.record_hw_id) for w in set().union(*progress.models.values())
                 for h in hws]
        tuned = {f"{w}|{h}" for w, h in pairs if self._tuned(w, h)}
        failed = {f"{w}|{h}" for w, h in pairs if self._failed(w, h)}
        builtin = {f"{w}|{h}" for w, h in pairs if w in progress.not_executed}
        build = str(BuildConfig("tuned", trials=self.trials))
        records_done = {record_key(s.model_id, h.record_hw_id, build) for s in specs for h in hws
                        if not any(self._records_missing(s, h, b) for b in self.budgets)}
        isa_hw_ids: dict[str, list[str]] = {}
        for h in hws:
            isa_hw_ids.setdefault(h.isa, []).append(h.record_hw_id)
        sizes = family_workloads(progress.models)
        return {s.model_id: tuned_cost(s.model_id, isa_hw_ids, progress.models,
                                       tuned | failed | builtin, tuned | builtin,
                                       records_done, sizes, build=build)
                for s in specs}

    def close(self) -> None:
        self.workers.close()
        self.writer.close()
        for collector in self.record_collectors.values():
            collector.close()

    def _records_missing(self, spec: zoo.ModelSpec, hw: HardwareSpec, budget: int) -> bool:
        collector = self.record_collector(hw, budget)
        return any(key not in collector.done for *_, key in collector.keys_for(spec))

    def record_collector(self, hw: HardwareSpec, budget: int) -> Collector:
        """Whole-model ``tuned:budget`` records of ``hw``, into the dataset's record shards,
        compiled with the schedules of this hardware id's runs (its database grows as
        runs are written)."""
        key = (hw.record_hw_id, budget)
        if key not in self.record_collectors:
            database = compose_database(self.runs_at(hw, budget).values(), budget)
            build = str(BuildConfig("tuned", trials=budget))
            host = socket.gethostname().split(".")[0] or "host"
            self.record_collectors[key] = Collector(
                self.root.shards, [(hw.isa, hw.threads)], [build], settings=self.settings,
                database=database, retry_failed=self.retry_failed,
                record_extra={"tuning": {"strategy": STRATEGY, "trials_per_kernel": budget,
                                         "seed": self.seed,
                                         "rule": "each kernel's fastest of the first "
                                                 f"{budget} trials (MetaSchedule top-1)"}},
                shard_prefix=f"tuned{budget}-{host}-{hw.isa}-{hw.threads}t")
        return self.record_collectors[key]

    def collect_model(self, spec: zoo.ModelSpec, summary: TuningSummary) -> None:
        onnx_model = None
        for isa, threads_list in self.isas.items():
            stage = "lower"
            try:
                hws = [self.hw(isa, t) for t in threads_list]
                if onnx_model is None:
                    onnx_model = zoo.export_onnx(spec)
                lowered = lower(import_to_relax(load_onnx(onnx_model)), hws[0].target(),
                                "default")
                workloads = model_workloads(lowered)
                if self.progress is not None:
                    self.progress.models[(spec.model_id, isa)] = {
                        w.workload_id for w in workloads}
                todo = [(w, h) for w in workloads for h in hws if self.needs(w, h)]
                unmeasured = [(h, b) for h in hws for b in self.budgets
                              if self._records_missing(spec, h, b)]
                if not todo and not unmeasured:
                    summary.skipped += 1
                    continue
                stage = "capture"
                with tempfile.TemporaryDirectory(prefix="gnnperf-tuning-") as tmp:
                    wait_for_quiet(self.settings.max_other_load, self.settings.quiet_timeout_s)
                    executed = capture_inputs(spec, lowered, Path(tmp),
                                              self.workers.get(hws[-1].threads), self.settings)
                if self.progress is not None:
                    self.progress.not_executed |= {w.workload_id for w in workloads
                                                   if w.name not in executed}
                stage = "tune"
                for w, h in todo:
                    if w.name in executed:
                        self._tune(w, h, spec, summary)
                    else:
                        summary.skipped += 1
                stage = "record"
                called = {w.workload_id for w in workloads if w.name in executed}
                for h in hws:
                    if called <= set(self.runs_at(h, self.trials)):
                        for budget in self.budgets:
                            self.record_collector(h, budget).run_model(
                                spec, summary.records, tqdm(disable=True), onnx_model)
                    else:  # a kernel could not be tuned: no tuned:N build of the model here
                        summary.records.skipped += len(self.budgets)
            except Exception as exc:
                summary.failed += 1
                summary.failures[stage] += 1
                self.writer.append({"kind": "kernel_model_failure", "model_id": spec.model_id,
                                    "isa": isa, "stage": f"tuning-{stage}",
                                    "reason": one_line(exc, 300)})

    def _tune(self, w: KernelWorkload, hw: HardwareSpec, spec: zoo.ModelSpec,
              summary: TuningSummary) -> None:
        key = tuning_key(w.workload_id, hw.record_hw_id, self.trials)
        prior = self.stored.get(key)
        # a stored run extends only from whole iterations (a 2-trial test run does not)
        extend = prior if prior is not None and prior.trials % TRIALS_PER_ITERATION == 0 \
            else None
        before = wait_for_quiet(self.settings.max_other_load, self.settings.quiet_timeout_s)
        try:
            run = tune_workload(w, hw, self.trials, seed=self.seed, extend=extend)
        except GnnperfError as exc:
            self.writer.append({"kind": "kernel_tuning_failure", "key": key,
                                "workload_id": w.workload_id, "hw_id": hw.record_hw_id,
                                "trials": self.trials, "stage": "tune",
                                "reason": one_line(exc, 300), "created_at": time.time()})
            write_tuning_summary(self.root.kernels, self.stored.values())
            self.failed.add(f"{key}|{self.trials}")
            summary.failed += 1
            summary.failures["tune"] += 1
            return
        line = run.to_line(hw, spec.model_id, w.name, self.versions)
        line["other_load"] = [round(before, 4), round(other_load(), 4)]
        self.writer.append(line)
        self.stored[key] = run
        write_tuning_summary(self.root.kernels, self.stored.values())
        for budget in self.budgets:
            if (run.hw_id, budget) in self.record_collectors:
                run.commit_to(self.record_collectors[(run.hw_id, budget)].database, budget)
        summary.done += 1


def collect_tuning(out: str | Path, specs: Sequence[zoo.ModelSpec],
                   hw: Sequence[tuple[str, int]], trials: int, *, seed: int = 0,
                   settings: MeasureSettings | None = None, max_minutes: float | None = None,
                   progress: bool = True, retry_failed: bool = False,
                   order: Order = "given") -> TuningSummary:
    """Tune the workloads of ``specs`` at ``trials`` per workload on each of ``hw`` and
    measure each model whose kernels are all tuned as ``tuned:N`` builds
    (:func:`record_budgets`). Stops cleanly after ``max_minutes`` (the model in progress is
    finished first). ``order``: ``given``, or ``cheapest-tuned`` (the module's docstring)."""
    check_order(order)
    summary = TuningSummary()
    start = time.time()
    collector = TuningCollector(out, hw, trials, seed=seed, settings=settings,
                                retry_failed=retry_failed)

    def visit(spec: zoo.ModelSpec) -> None:
        collector.collect_model(spec, summary)
        summary.seconds = time.time() - start

    try:
        visit_models(specs, visit, max_minutes=max_minutes, start=start,
                     progress=progress, desc="tuning",
                     rank=collector.cheapest_tuned_first if order == "cheapest-tuned" else None)
    finally:
        collector.close()
    summary.seconds = time.time() - start
    return summary
