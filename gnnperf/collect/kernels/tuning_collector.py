"""The tuning collector (issue 47): every workload of the given models tuned once per
hardware setting by MetaSchedule's evolutionary search (:func:`.tuning.tune_workload`),
stored as ``kernel_tuning`` lines in the kernel dataset; resumable.

Which workloads: those the model's run calls as kernels, found by one instrumented run of
its ``default`` build as the kernel collector finds them (a kernel the VM replaces by a
builtin is never tuned, since no build would run its schedule). A workload many models
share is tuned once per hardware setting; one tuned before at fewer trials is extended
(:func:`.tuning.tune_workload`'s ``extend``), so a 256-trial run holds the 64-trial one.
The search times its candidates on this machine: nothing else may run beside it, other
collectors included.
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from gnnperf import zoo
from gnnperf.collect.kernels.database import stored_tuning
from gnnperf.collect.kernels.tuning import (
    TRIALS_PER_ITERATION,
    TuningRun,
    tune_workload,
    tuning_key,
)
from gnnperf.collect.kernels.workloads import KernelWorkload, capture_inputs, model_workloads
from gnnperf.collect.models import CollectSummary, package_versions
from gnnperf.errors import GnnperfError, one_line
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.pipeline import lower
from gnnperf.measure import MeasureSettings, WorkerPool, other_load, wait_for_quiet
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.shards import ShardWriter

#: tuning lines per shard: a 256-trial run's line holds 256 traces (hundreds of KB)
TUNING_LINES_PER_SHARD = 25


class TuningCollector:
    """Tunes the workloads of zoo models into ``DIR/kernels`` at ``trials`` per workload."""

    def __init__(self, out: str | Path, hw: Sequence[tuple[str, int]], trials: int, *,
                 seed: int = 0, settings: MeasureSettings | None = None,
                 shard_prefix: str | None = None) -> None:
        if trials < 1:
            raise GnnperfError(f"--trials must be at least 1, got {trials}")
        self.root = DatasetFolder.resolve(out)
        self.trials = trials
        self.seed = seed
        self.settings = settings or MeasureSettings(quiet_timeout_s=float("inf"))
        self.isas: dict[str, list[int]] = {}
        for isa, threads in hw:
            self.isas.setdefault(isa, []).append(threads)
        runs, self.failed = stored_tuning(self.root.kernels)
        #: per key, the stored run's trials and records (a whole line kept only where this
        #: collector may extend it)
        self.covered = {k for k, o in runs.items() if self._line_covers(o)}
        self.extendable = {k: o for k, o in runs.items() if k not in self.covered}
        host = socket.gethostname().split(".")[0] or "host"
        self.writer = ShardWriter(self.root.kernels, shard_prefix or f"tuning-{host}",
                                  max_lines=TUNING_LINES_PER_SHARD)
        self.hw_specs: dict[tuple[str, int], HardwareSpec] = {}
        self.workers = WorkerPool()
        self.versions = package_versions()

    def _line_covers(self, line: dict[str, Any]) -> bool:
        return line["trials"] >= self.trials or len(line["ms_records"]) < line["trials"]

    def hw(self, isa: str, threads: int) -> HardwareSpec:
        if (isa, threads) not in self.hw_specs:
            self.hw_specs[(isa, threads)] = HardwareSpec.local(isa, threads)
        return self.hw_specs[(isa, threads)]

    def needs(self, w: KernelWorkload, hw: HardwareSpec) -> bool:
        """Whether ``w`` is still to be tuned on ``hw`` at this collector's budget."""
        key = tuning_key(w.workload_id, hw.record_hw_id, self.trials)
        return key not in self.covered and f"{key}|{self.trials}" not in self.failed

    def close(self) -> None:
        self.workers.close()
        self.writer.close()

    def collect_model(self, spec: zoo.ModelSpec, summary: CollectSummary) -> None:
        onnx_model = None
        for isa, threads_list in self.isas.items():
            stage = "lower"
            try:
                hws = [self.hw(isa, t) for t in threads_list]
                if onnx_model is None:
                    onnx_model = zoo.export_onnx(spec)
                lowered = lower(import_to_relax(load_onnx(onnx_model)), hws[0].target(),
                                "default")
                todo = [(w, h) for w in model_workloads(lowered) for h in hws
                        if self.needs(w, h)]
                if not todo:
                    summary.skipped += 1
                    continue
                stage = "capture"
                with tempfile.TemporaryDirectory(prefix="gnnperf-tuning-") as tmp:
                    wait_for_quiet(self.settings.max_other_load, self.settings.quiet_timeout_s)
                    executed = capture_inputs(spec, lowered, Path(tmp),
                                              self.workers.get(hws[-1].threads), self.settings)
                stage = "tune"
                for w, h in todo:
                    if w.name in executed:
                        self._tune(w, h, spec, summary)
                    else:
                        summary.skipped += 1
            except Exception as exc:
                summary.failed += 1
                summary.failures[stage] += 1
                self.writer.append({"kind": "kernel_model_failure", "model_id": spec.model_id,
                                    "isa": isa, "stage": f"tuning-{stage}",
                                    "reason": one_line(exc, 300)})

    def _tune(self, w: KernelWorkload, hw: HardwareSpec, spec: zoo.ModelSpec,
              summary: CollectSummary) -> None:
        key = tuning_key(w.workload_id, hw.record_hw_id, self.trials)
        prior = self.extendable.get(key)
        # a stored run extends only from whole iterations (a 2-trial test run does not)
        extend = (TuningRun.from_line(prior) if prior is not None
                  and prior["trials"] % TRIALS_PER_ITERATION == 0 else None)
        before = wait_for_quiet(self.settings.max_other_load, self.settings.quiet_timeout_s)
        try:
            run = tune_workload(w, hw, self.trials, seed=self.seed, extend=extend)
        except GnnperfError as exc:
            self.writer.append({"kind": "kernel_tuning_failure", "key": key,
                                "workload_id": w.workload_id, "hw_id": hw.record_hw_id,
                                "trials": self.trials, "stage": "tune",
                                "reason": one_line(exc, 300), "created_at": time.time()})
            self.failed.add(f"{key}|{self.trials}")
            summary.failed += 1
            summary.failures["tune"] += 1
            return
        line = run.to_line(hw, spec.model_id, w.name, self.versions)
        line["other_load"] = [round(before, 4), round(other_load(), 4)]
        self.writer.append(line)
        self.covered.add(key)
        self.extendable.pop(key, None)
        summary.done += 1


def collect_tuning(out: str | Path, specs: Sequence[zoo.ModelSpec],
                   hw: Sequence[tuple[str, int]], trials: int, *, seed: int = 0,
                   settings: MeasureSettings | None = None, max_minutes: float | None = None,
                   progress: bool = True) -> CollectSummary:
    """Tune the workloads of ``specs`` at ``trials`` per workload on each of ``hw``;
    ``done`` counts workloads tuned. Stops cleanly after ``max_minutes`` (the model in
    progress is finished first)."""
    summary = CollectSummary()
    start = time.time()
    collector = TuningCollector(out, hw, trials, seed=seed, settings=settings)
    try:
        with tqdm(total=len(specs), desc="tuning", unit="model", disable=not progress) as bar:
            for spec in specs:
                if max_minutes is not None and (time.time() - start) / 60 > max_minutes:
                    break
                collector.collect_model(spec, summary)
                summary.seconds = time.time() - start
                bar.update()
    finally:
        collector.close()
    summary.seconds = time.time() - start
    return summary
