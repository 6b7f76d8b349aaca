"""The kernel collector: every workload of the zoo, S sampled schedules each, timed alone.

For each zoo model and ISA: lower it (``sampled:0``, whose kernels keep their names),
run it once in a worker to capture each kernel's real argument tensors, and for each
workload not yet measured on a hardware config: draw S schedules, compile the
unscheduled kernel and the distinct schedules into one library, and time them in a
random order with the reference kernels between them (measurement v2). Lines go to
crash-safe shards under ``DIR/kernels``; a ``kernel_done`` line closes a (workload,
hardware) pair, so a killed collector resumes at the workload it was timing.
"""

from __future__ import annotations

import dataclasses
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tvm
from tqdm import tqdm

from gnnperf import zoo
from gnnperf.collect.kernels.database import COVERED_SCHEDULES, tuned_databases
from gnnperf.collect.kernels.ordering import (
    Order,
    TunedCost,
    cheapest_tuned_first,
    check_order,
    family_workloads,
    tuned_cost,
    visit_models,
)
from gnnperf.collect.kernels.progress import UNCOMPILABLE, covers_tuned, read_progress
from gnnperf.collect.kernels.workloads import (
    Candidate,
    CandidateCompile,
    KernelWorkload,
    candidates,
    capture_inputs,
    model_workloads,
)
from gnnperf.collect.models import Collector, CollectSummary, package_versions, record_key
from gnnperf.errors import GnnperfError, LoweringError, one_line
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BEST_OF_SCHEDULES, BuildConfig
from gnnperf.lowering.pipeline import lower
from gnnperf.measure import MeasureSettings, WorkerPool, wait_for_quiet
from gnnperf.measure.local import FuncBatch, time_funcs
from gnnperf.measure.reference import reference_library
from gnnperf.measure.results import FuncTiming
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import NOT_EXECUTED
from gnnperf.store.shards import ShardWriter

#: schedules drawn per workload (MetaSchedule's design space, seeds 0..S-1)
DEFAULT_SCHEDULES = BEST_OF_SCHEDULES
#: the unscheduled kernel runs at about 1 GFLOP/s; above this it is not timed
MAX_UNSCHEDULED_GFLOP = 0.5


@dataclass
class KernelSummary(CollectSummary):
    """``done`` counts workloads timed; ``measurements`` the schedules timed in all;
    ``tuned`` the whole-model ``best-of`` records."""

    measurements: int = 0
    tuned: CollectSummary = field(default_factory=CollectSummary)

    @property
    def rate_per_hour(self) -> float:
        return self.measurements / self.seconds * 3600 if self.seconds else 0.0

    def line(self) -> str:
        return (f"{self.measurements} kernel measurements ({self.rate_per_hour:.0f}/h); "
                f"workloads: {super().line()}; whole-model best-of records: "
                f"{self.tuned.line()}")


#: workloads whose candidate libraries compile at once (code generation uses one core)
COMPILED_TOGETHER = 2
#: seconds the model's own compile (to capture its kernels' inputs) may take, as
#: ``gnnperf collect --compile-timeout``: LLVM took an hour on some audio front-ends
COMPILE_TIMEOUT_S = 600.0


@dataclass
class _Drawn:
    """A workload's schedules, drawn and described, on their way to being compiled and
    timed on the hardware configs still pending."""

    w: KernelWorkload
    pending: list[HardwareSpec]
    cands: list[Candidate]
    features: list[dict[str, Any]]
    gflop: float
    failed_seeds: dict[int, str]
    sample_s: float
    compile_s: float = 0.0
    dropped: dict[str, str] = field(default_factory=dict)
    #: each candidate's function in the compiled library: ``cand{j}`` keeps the index it
    #: was drawn at, so dropping one leaves a gap in the names
    symbols: list[str] = field(default_factory=list)

    def keep(self, kept: list[int], dropped: dict[int, str]) -> None:
        """Keep the candidates code generation finished (``kept``, by drawn index) and
        note why the others were left out."""
        self.dropped = {("unscheduled" if not self.cands[j].seeds else
                         ",".join(map(str, self.cands[j].seeds))): why
                        for j, why in dropped.items()}
        self.cands = [self.cands[j] for j in kept]
        self.symbols = [f"cand{j}" for j in kept]
        self.features = [self.features[j] for j in kept]


class KernelCollector:
    """Measures the workloads of zoo models into ``DIR/kernels`` (resumable)."""

    def __init__(self, out: str | Path, hw: Sequence[tuple[str, int]], *,
                 schedules: int = DEFAULT_SCHEDULES, settings: MeasureSettings | None = None,
                 max_unscheduled_gflop: float = MAX_UNSCHEDULED_GFLOP,
                 shard_prefix: str | None = None, tuned: bool = True,
                 compile_timeout_s: float | None = COMPILE_TIMEOUT_S,
                 skip_covered: bool = False, retry_failed: bool = False) -> None:
        if schedules < 1:
            raise GnnperfError(f"--schedules must be at least 1, got {schedules}")
        if compile_timeout_s is not None and not compile_timeout_s > 0:
            raise GnnperfError(f"--compile-timeout must be positive, got {compile_timeout_s:g}")
        self.root = DatasetFolder.resolve(out)
        self.folder = self.root.kernels
        self.tuned = tuned
        self.schedules = schedules
        #: the whole-model build its measured schedules give (``best-of:S``)
        self.best_of = str(BuildConfig("best-of", trials=schedules))
        self.settings = settings or MeasureSettings(quiet_timeout_s=float("inf"))
        self.max_unscheduled_gflop = max_unscheduled_gflop
        self.compile_timeout_s = compile_timeout_s
        self.isas: dict[str, list[int]] = {}
        for isa, threads in hw:
            self.isas.setdefault(isa, []).append(threads)
        progress = read_progress(self.folder)
        self.done, self.covered = progress.done, progress.covered
        self.workloads_written, self.models_written = progress.workloads, progress.models
        #: (model, ISA) pairs not to visit: their model did not compile (``retry_failed``
        #: tries them again)
        self.uncompilable = set() if retry_failed else progress.uncompilable
        #: with ``skip_covered``, the workloads never to time here: those one hardware id
        #: (this machine's or another's) drew ``COVERED_SCHEDULES`` schedule seeds of and
        #: timed every distinct program of, and those a model runs as a VM builtin. A
        #: coverage run on a new CPU otherwise spends most of its time on workloads the
        #: dataset has: 53 of the 66 s of the first corpus model visited on the Intel
        #: guest. Drawn seeds, not distinct programs, decide: a third of the workloads
        #: measured have one program in their whole design space (``corpus_workloads_sampled``
        #: in :func:`.database.kernel_stats`).
        self.skip = ({w for w, n in progress.drawn.items() if n >= COVERED_SCHEDULES}
                     | progress.not_executed if skip_covered else set())
        self.stored_funcs: dict[str, Any] = {}
        host = socket.gethostname().split(".")[0] or "host"
        self.writer = ShardWriter(self.folder, shard_prefix or f"kernels-{host}")
        self.hw_specs: dict[tuple[str, int], HardwareSpec] = {}
        #: per hardware id, the measured schedules as a MetaSchedule database, kept
        #: current as records are written, and the collector of whole-model best-of records
        self.databases: dict[str, Any] = {}
        self.tuned_collectors: dict[str, Collector] = {}
        self.workers = WorkerPool()
        self.versions = package_versions()

    # -- resources --------------------------------------------------------------------------
    def hw(self, isa: str, threads: int) -> HardwareSpec:
        """One of the run's hardware configs (those given as ``hw``), described on first
        use together with all the others."""
        if not self.hw_specs:
            self._open_hardware()
        return self.hw_specs[(isa, threads)]

    def _open_hardware(self) -> None:
        """Describe every hardware config of the run and read their databases of measured
        schedules, all in one pass over the kernel shards (a pass per id took minutes)."""
        for isa, threads_list in self.isas.items():
            for threads in threads_list:
                spec = HardwareSpec.local(isa, threads)
                self.hw_specs[(isa, threads)] = dataclasses.replace(spec, host=spec.cpu_id)
        # an id with nothing measured yet starts with an empty database
        self.databases = tuned_databases(self.root, [h.hw_id for h in self.hw_specs.values()],
                                         require=False)

    def cheapest_tuned_first(self, specs: Sequence[zoo.ModelSpec]) -> list[zoo.ModelSpec]:
        """``specs`` in the order that gives whole-model ``best-of`` records soonest
        (:func:`.ordering.cheapest_tuned_first`), judged from what the collector has
        stored so far (the ``best-of`` keys done are the whole-model collectors')."""
        if not self.tuned:
            raise GnnperfError("ordering for tuned records needs a collector that makes them")
        return cheapest_tuned_first(specs, self._costs([s.model_id for s in specs],
                                                       family_workloads(self.models_written)))

    def _costs(self, model_ids: Sequence[str], family_sizes: dict[str, float] | None = None,
               tuned_done: set[str] | None = None) -> dict[str, TunedCost]:
        """What visiting each of ``model_ids`` buys (:func:`.ordering.tuned_cost`), judged
        from what the collector has stored so far; without ``tuned`` records, only pairs to
        time. The record keys done (``tuned_done``, when the caller has them) are gathered
        once for all the models."""
        if tuned_done is None:
            tuned_done = self._tuned_done()
        isa_hw_ids: dict[str, list[str]] = {}
        for (isa, _), h in self.hw_specs.items():
            isa_hw_ids.setdefault(isa, []).append(h.hw_id)
        costs = {m: tuned_cost(m, {isa: ids for isa, ids in isa_hw_ids.items()
                                   if (m, isa) not in self.uncompilable},
                               self.models_written, self.done, self.covered, tuned_done,
                               family_sizes, build=self.best_of, skip=self.skip)
                 for m in model_ids}
        return costs if self.tuned else {m: dataclasses.replace(c, records=0)
                                         for m, c in costs.items()}

    def _isas_to_visit(self, model_id: str) -> list[str]:
        """The run's ISAs a visit to ``model_id`` can do something for: all but those its
        model did not compile for (:data:`UNCOMPILABLE`)."""
        return [isa for isa in self.isas if (model_id, isa) not in self.uncompilable]

    def _tuned_done(self) -> set[str]:
        """The whole-model ``best-of`` keys with a record or a failure, on any config."""
        if not self.hw_specs:
            self._open_hardware()
        if not self.tuned:
            return set()
        return set().union(*(self.tuned_collector(h).done for h in self.hw_specs.values()))

    def finished(self, spec: zoo.ModelSpec) -> tuple[int, int] | None:
        """None when a visit to ``spec`` could still do something; else what it would skip:
        (workloads, whole-model ``best-of`` records). A model is finished when each of the
        run's ISAs has its workloads stored (its ``kernel_model`` line), every (workload,
        config) pair is closed and every ``best-of`` record it can have is written.

        Answered from the stored lines, without exporting or lowering the model again
        (seconds per model: a restart past hundreds of finished models took minutes). It
        trusts the stored ``kernel_model`` lines, as the visiting order does: a change to
        lowering that gives a model other kernels needs a fresh kernel folder anyway, since
        the stored workload ids would no longer be the ones models run.

        An ISA the model did not compile for (:data:`UNCOMPILABLE`) has nothing to do: no
        input can be captured, so nothing can be timed from it."""
        isas = self._isas_to_visit(spec.model_id)
        if any((spec.model_id, isa) not in self.models_written for isa in isas):
            return None
        tuned_done = self._tuned_done()
        if not self._costs([spec.model_id], tuned_done=tuned_done)[spec.model_id].nothing_left:
            return None
        records = sum(
            record_key(spec.model_id, h.hw_id, self.best_of) in tuned_done
            and all(f"{w}|{h.hw_id}" in self.covered
                    for w in self.models_written[(spec.model_id, h.isa)])
            for h in self.hw_specs.values() if h.isa in isas)
        return sum(len(self.models_written.get((spec.model_id, isa), ()))
                   for isa in self.isas), records

    def tuned_collector(self, hw: HardwareSpec) -> Collector:
        """Whole-model ``best-of`` records of ``hw``, into the dataset's record shards."""
        if hw.hw_id not in self.tuned_collectors:
            self.tuned_collectors[hw.hw_id] = Collector(
                self.root.shards, [(hw.isa, hw.threads)], [self.best_of],
                settings=self.settings, database=self.databases[hw.hw_id],
                record_extra={"best_of": {"schedules_per_workload": self.schedules,
                                        "rule": "fastest mean of the sampled schedules "
                                                "measured alone (MetaSchedule top-1)"}},
                shard_prefix=f"tuned-{socket.gethostname().split('.')[0] or 'host'}-"
                             f"{hw.isa}-{hw.threads}t")
        return self.tuned_collectors[hw.hw_id]

    def close(self) -> None:
        self.workers.close()
        self.writer.close()
        for collector in self.tuned_collectors.values():
            collector.close()

    def as_stored(self, w: KernelWorkload) -> KernelWorkload:
        """``w`` as the dataset stored it, written from the model that first had it.

        Two kernels with one structure (one workload id) may name their blocks and buffers
        differently, and a schedule's trace names the blocks it transforms: drawn on the
        stored function, the schedules replay on the stored workload, as MetaSchedule's
        database (and the ``best-of`` build that queries it) replays them."""
        from tvm.s_tir.meta_schedule.database import Workload

        if w.workload_id not in self.stored_funcs:
            self.stored_funcs[w.workload_id] = Workload.from_json(
                self.workloads_written[w.workload_id]).mod["main"]
        return KernelWorkload(w.workload_id, w.name, self.stored_funcs[w.workload_id])

    # -- one model --------------------------------------------------------------------------
    def collect_model(self, spec: zoo.ModelSpec, summary: KernelSummary) -> None:
        if (finished := self.finished(spec)) is not None:  # counted as a visit counts them
            summary.skipped += finished[0]
            summary.tuned.skipped += finished[1]
            return
        onnx_model = None  # exported once for the kernels and the tuned records alike
        for isa in self._isas_to_visit(spec.model_id):
            hws = [self.hw(isa, t) for t in self.isas[isa]]
            stage = "lower"
            try:
                if onnx_model is None:
                    onnx_model = zoo.export_onnx(spec)
                mod = import_to_relax(load_onnx(onnx_model))
                lowered = lower(mod, hws[0].target(), "sampled:0")
                workloads = model_workloads(lowered)
                if (spec.model_id, isa) not in self.models_written:
                    self.writer.append({
                        "kind": "kernel_model", "model_id": spec.model_id,
                        "model": spec.to_dict(), "isa": isa,
                        "kernels": {w.name: w.workload_id for w in workloads}})
                    self.models_written[(spec.model_id, isa)] = {w.workload_id
                                                                  for w in workloads}
                todo = [w for w in workloads if w.workload_id not in self.skip
                        and any(f"{w.workload_id}|{h.hw_id}" not in self.done for h in hws)]
                summary.skipped += len(workloads) - len(todo)
                if todo:
                    stage = "capture"
                    self._time_workloads(spec, lowered, todo, hws, summary)
                if self.tuned:
                    # the model as a tuned build, once every kernel of it has its schedules
                    stage = "tuned"
                    for h in hws:
                        if all(f"{w.workload_id}|{h.hw_id}" in self.covered for w in workloads):
                            self.tuned_collector(h).run_model(spec, summary.tuned,
                                                              tqdm(disable=True), onnx_model)
            except Exception as exc:
                if stage == "capture" and isinstance(exc, LoweringError):
                    # only the model's own compile raises this here (each workload's
                    # stages record their own failures): it fails the same way again
                    stage = UNCOMPILABLE
                    self.uncompilable.add((spec.model_id, isa))
                summary.failed += 1
                summary.failures[stage] += 1
                self.writer.append({"kind": "kernel_model_failure", "model_id": spec.model_id,
                                    "isa": isa, "stage": stage, "reason": one_line(exc, 300)})

    def _time_workloads(self, spec: zoo.ModelSpec, lowered: Any, todo: list[KernelWorkload],
                        hws: list[HardwareSpec], summary: KernelSummary) -> None:
        """Capture the model's kernel inputs in one run, then time each workload's schedules,
        :data:`COMPILED_TOGETHER` workloads at a time: their libraries compile together
        (one core each), then each is timed on a machine where nothing compiles."""
        with tempfile.TemporaryDirectory(prefix="gnnperf-kernels-") as tmp:
            wait_for_quiet(self.settings.max_other_load, None)
            captured = capture_inputs(spec, lowered, Path(tmp),
                                      self.workers.get(hws[-1].threads), self.settings,
                                      self.compile_timeout_s)
            for first in range(0, len(todo), COMPILED_TOGETHER):
                drawn = [d for w in todo[first:first + COMPILED_TOGETHER]
                         if (d := self._draw(w, spec, hws, captured, summary)) is not None]
                with tempfile.TemporaryDirectory(prefix="gnnperf-cands-") as libs:
                    compiled = self._compile(drawn, hws[0].target(), Path(libs), summary)
                    for d, lib in compiled:
                        self._time(d, lib, spec, captured, summary)

    def _draw(self, w: KernelWorkload, spec: zoo.ModelSpec, hws: Sequence[HardwareSpec],
              captured: dict[str, Path], summary: KernelSummary) -> _Drawn | None:
        """Store the workload if it is new and draw its schedules; None when there is
        nothing to time (its kernel never runs, or no schedule could be drawn)."""
        from tvm.s_tir.meta_schedule.database import Workload

        pending = [h for h in hws if f"{w.workload_id}|{h.hw_id}" not in self.done]
        if w.workload_id not in self.workloads_written:
            stored = Workload(w.module()).as_json()
            self.writer.append({"kind": "kernel_workload", "workload_id": w.workload_id,
                                "name": w.name, "first_model": spec.model_id,
                                "ms_workload": stored})
            self.workloads_written[w.workload_id] = stored
        else:
            w = self.as_stored(w)
        if w.name not in captured:
            # not a kernel that runs: e.g. a reshape the VM performs as a builtin
            for h in pending:
                self._fail(w, h, NOT_EXECUTED, "not called with tensor arguments in the "
                                               "model run")
            summary.skipped += 1
            return None
        target = hws[0].target()
        try:
            started = time.perf_counter()
            gflop = _gflop(w, target)
            cands, failed_seeds = candidates(
                w, target, self.schedules, unscheduled=gflop <= self.max_unscheduled_gflop)
            if not cands:
                raise GnnperfError("no schedule could be drawn")
            # our features of each timed program (TIR analyses, TVM's PerStoreFeature)
            features = [_features(c, target) for c in cands]
        except Exception as exc:
            self._workload_failed(w, pending, "sample", exc, summary)
            return None
        return _Drawn(w, pending, cands, features, gflop, failed_seeds,
                      time.perf_counter() - started)

    def _compile(self, drawn: list[_Drawn], target: tvm.target.Target, folder: Path,
                 summary: KernelSummary) -> list[tuple[_Drawn, Path]]:
        """Compile the drawn workloads' libraries at the same time and wait for all of
        them; each workload's ``compile_s`` is its share of that wall time, so that
        the per-hour figure of the dataset stays the collector's real rate."""
        started = time.perf_counter()
        jobs = [(d, folder / f"cands{i}.so") for i, d in enumerate(drawn)]
        running = [(d, path, CandidateCompile(d.cands, target, path)) for d, path in jobs]
        done: list[tuple[_Drawn, Path]] = []
        for d, path, job in running:
            try:
                kept, dropped = job.result()
            except Exception as exc:
                self._workload_failed(d.w, d.pending, "compile", exc, summary)
                continue
            d.keep(kept, dropped)
            done.append((d, path))
        share = (time.perf_counter() - started) / max(1, len(running))
        for d, _ in done:
            d.compile_s = share
        return done

    def _time(self, d: _Drawn, lib: Path, spec: zoo.ModelSpec, captured: dict[str, Path],
              summary: KernelSummary) -> None:
        """Time a workload's compiled candidates on each hardware config still pending."""
        w = d.w
        args = captured[w.name]
        try:
            for h in d.pending:
                start = time.perf_counter()
                batch = time_funcs(
                    lib, dict.fromkeys(d.symbols, args), self.workers.get(h.threads),
                    settings=self.settings, reference=reference_library(h),
                    seed=int(w.workload_id, 16) % 2**31)
                for cand, timing, feats in zip(d.cands, batch.timings, d.features,
                                               strict=True):
                    self._record(w, h, cand, timing, batch, spec, d.gflop, feats)
                self._close_pair({
                    "kind": "kernel_done", "key": f"{w.workload_id}|{h.hw_id}",
                    "candidates": len(d.cands), "schedules_drawn": self.schedules,
                    "failed_seeds": d.failed_seeds, "dropped": d.dropped,
                    "unscheduled_timed": not d.cands[0].seeds,
                    "sample_s": round(d.sample_s, 3), "compile_s": round(d.compile_s, 3),
                    "compiled_together": COMPILED_TOGETHER,
                    "measure_s": round(time.perf_counter() - start, 3)})
                summary.measurements += len(d.cands)
            summary.done += 1
        except Exception as exc:
            self._workload_failed(w, d.pending, "measure", exc, summary)

    def _workload_failed(self, w: KernelWorkload, pending: Sequence[HardwareSpec], stage: str,
                         exc: Exception, summary: KernelSummary) -> None:
        for h in pending:
            if f"{w.workload_id}|{h.hw_id}" not in self.done:
                self._fail(w, h, stage, one_line(exc, 300))
        summary.failed += 1
        summary.failures[stage] += 1

    def _record(self, w: KernelWorkload, hw: HardwareSpec, cand: Candidate, timing: FuncTiming,
                batch: FuncBatch, spec: zoo.ModelSpec, gflop: float,
                features: dict[str, Any]) -> None:
        import tvm_ffi
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo
        from tvm.s_tir.meta_schedule.database import TuningRecord

        db = self.databases[hw.hw_id]
        record = TuningRecord(cand.trace, db.commit_workload(w.module()),
                              [v / 1e3 for v in timing.stats.samples_ms], hw.target(),
                              ArgInfo.from_prim_func(w.func))
        if cand.seeds:  # the best-of build's database learns of it at once
            db.commit_tuning_record(record)
        cand_id = f"{int(tvm_ffi.structural_hash(cand.func)) & 0xFFFFFFFFFFFF:012x}"
        self.writer.append({
            "kind": "kernel_record", "key": f"{w.workload_id}|{hw.hw_id}|{cand_id}",
            "workload_id": w.workload_id, "hw_id": hw.hw_id, "hw": hw.to_dict(),
            "schedule": cand.schedule, "seeds": cand.seeds, "ms_record": record.as_json(),
            "latency": timing.stats.label(), "slowdown": timing.slowdown,
            "tries": timing.tries, "reference": batch.reference,
            "other_load": batch.other_load, "attempts": batch.attempts, "gflop": gflop,
            "model_id": spec.model_id, "kernel": w.name, "features": features,
            "settings": self.settings.to_dict(),
            "versions": self.versions, "created_at": time.time()})

    def _fail(self, w: KernelWorkload, hw: HardwareSpec, stage: str, reason: str) -> None:
        self._close_pair({"kind": "kernel_failure", "key": f"{w.workload_id}|{hw.hw_id}",
                          "workload_id": w.workload_id, "hw_id": hw.hw_id, "stage": stage,
                          "reason": reason, "created_at": time.time()})

    def _close_pair(self, line: dict[str, Any]) -> None:
        """Write the line that closes a (workload, hardware) pair and note it as done and,
        by the same rule :func:`.progress.read_progress` reads back, as covered for a
        ``best-of`` build."""
        self.writer.append(line)
        self.done.add(line["key"])
        if covers_tuned(line):
            self.covered.add(line["key"])


def _features(cand: Candidate, target: tvm.target.Target) -> dict[str, Any]:
    from gnnperf.features import kernel_statics

    return kernel_statics(cand.func, target).candidate_features()


def _gflop(w: KernelWorkload, target: tvm.target.Target) -> float:
    from gnnperf.features import kernel_statics

    return kernel_statics(w.func, target, ms_features=False).flops / 1e9


def collect_kernels(out: str | Path, specs: Sequence[zoo.ModelSpec],
                    hw: Sequence[tuple[str, int]], *, schedules: int = DEFAULT_SCHEDULES,
                    settings: MeasureSettings | None = None,
                    max_unscheduled_gflop: float = MAX_UNSCHEDULED_GFLOP,
                    max_minutes: float | None = None, progress: bool = True,
                    order: Order = "given",
                    compile_timeout_s: float | None = COMPILE_TIMEOUT_S,
                    skip_covered: bool = False, retry_failed: bool = False) -> KernelSummary:
    """Measure the workloads of ``specs`` (see :func:`gnnperf.collect.models.interleaved_specs`);
    stops cleanly after ``max_minutes`` (the model in progress is finished first).

    ``order``: ``given`` visits ``specs`` as given; ``cheapest-tuned`` visits next, each
    time, the model whose whole-model ``best-of`` records need the fewest kernel
    measurements, and skips those with nothing left to do
    (:func:`.ordering.cheapest_tuned_first`).

    ``skip_covered`` leaves out the workloads one hardware id already drew
    ``COVERED_SCHEDULES`` seeds of (:attr:`KernelCollector.skip`): a model with such a
    workload gets no ``best-of`` record here, so it is for extending the kernel
    dataset's coverage (issue 45).
    ``retry_failed`` visits again the models whose own compile failed or timed out."""
    check_order(order)
    summary = KernelSummary()
    start = time.time()
    collector = KernelCollector(out, hw, schedules=schedules, settings=settings,
                                max_unscheduled_gflop=max_unscheduled_gflop,
                                compile_timeout_s=compile_timeout_s,
                                skip_covered=skip_covered, retry_failed=retry_failed)

    def visit(spec: zoo.ModelSpec) -> None:
        collector.collect_model(spec, summary)
        summary.seconds = time.time() - start

    try:
        visit_models(specs, visit, max_minutes=max_minutes, start=start,
                     progress=progress, desc="kernels",
                     rank=collector.cheapest_tuned_first if order == "cheapest-tuned" else None)
    finally:
        collector.close()
    summary.seconds = time.time() - start
    return summary
