"""The kernel-time noise floor: measured schedules timed again, later, from scratch (A/A).

Random (workload, hardware) pairs of this CPU, at least ``min_age_s`` old, are timed
again the way the collector timed them: the source model is lowered and run anew to
capture the kernel's inputs, each stored trace is replayed on the stored workload (so
the programs are those timed the first time), all are compiled into a fresh library
and timed in a fresh worker under measurement v2. The re-measurements go to
``DIR/noise`` as ``kernel_remeasure`` lines; :func:`.database.kernel_noise_floor_by_cpu`
compares them with the first timings.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from gnnperf import zoo
from gnnperf.collect.kernels.database import kernel_records
from gnnperf.collect.kernels.workloads import Candidate, capture_inputs, compile_candidates
from gnnperf.collect.models import CollectSummary
from gnnperf.errors import one_line
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.cpu_identity import signature_of_hw
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.pipeline import lower
from gnnperf.measure import MeasureSettings, WorkerPool
from gnnperf.measure.local import time_funcs
from gnnperf.measure.reference import reference_library
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import KernelRecordLine
from gnnperf.store.shards import ShardWriter, iter_lines


def _candidates(recs: list[KernelRecordLine], workload_json: Any) -> list[Candidate]:
    """The program each record timed, rebuilt by replaying its trace on its workload."""
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    workload = Workload.from_json(workload_json)
    out = []
    for rec in recs:
        sch = TuningRecord.from_json(rec["ms_record"], workload).as_measure_candidate().sch
        out.append(Candidate(sch.mod["main"], sch.trace, list(rec["seeds"])))
    return out


def remeasure_kernels(root: str | os.PathLike[str] | DatasetFolder | None, count: int, *,
                      seed: int = 0, min_age_s: float = 1800.0,
                      settings: MeasureSettings | None = None) -> CollectSummary:
    """Time ``count`` random (workload, hardware) pairs of this CPU again (all their
    schedules) into the folder's ``noise/``; ``done`` counts schedules re-timed."""
    folder = DatasetFolder.resolve(root)
    settings = settings or MeasureSettings(quiet_timeout_s=float("inf"))
    cpu = HardwareSpec.local(measure=False).cpu_id
    now = time.time()
    pairs: dict[tuple[str, str], list[KernelRecordLine]] = defaultdict(list)
    for rec in kernel_records(folder):
        if signature_of_hw(rec["hw"]).id == cpu:
            pairs[(rec["workload_id"], rec["hw_id"])].append(rec)
    eligible = sorted(k for k, recs in pairs.items()
                      if now - max(r["created_at"] for r in recs) >= min_age_s)
    chosen = random.Random(seed).sample(eligible, min(count, len(eligible)))
    workloads = {o["workload_id"]: o["ms_workload"]
                 for o in iter_lines(folder.kernels, kinds=("kernel_workload",))}
    by_model: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in chosen:
        by_model[pairs[key][0]["model_id"]].append(key)
    models = {o["model_id"]: o["model"]
              for o in iter_lines(folder.kernels, kinds=("kernel_model",))}
    summary = CollectSummary()
    start = time.time()
    writer = ShardWriter(folder.noise, "kernel-noise")
    workers = WorkerPool()  # fresh worker processes for this run
    try:
        for model_id, keys in by_model.items():
            spec = zoo.ModelSpec.from_dict(models[model_id])
            try:
                _remeasure_model(spec, [pairs[k] for k in keys], workloads, writer, workers,
                                 settings, summary)
            except Exception as exc:
                summary.failed += sum(len(pairs[k]) for k in keys)
                summary.failures[type(exc).__name__] += 1
                writer.append({"kind": "kernel_remeasure_failure", "model_id": model_id,
                               "reason": one_line(exc, 300), "created_at": time.time()})
    finally:
        workers.close()
        writer.close()
    summary.seconds = time.time() - start
    return summary


def _remeasure_model(spec: zoo.ModelSpec, groups: list[list[KernelRecordLine]],
                     workloads: dict[str, Any], writer: ShardWriter, workers: WorkerPool,
                     settings: MeasureSettings, summary: CollectSummary) -> None:
    """Capture ``spec``'s kernel inputs once, then time each group's schedules again."""
    first = HardwareSpec.from_dict(groups[0][0]["hw"])
    lowered = lower(import_to_relax(load_onnx(zoo.export_onnx(spec))), first.target(),
                    "sampled:0")
    with tempfile.TemporaryDirectory(prefix="gnnperf-kernel-noise-") as tmp:
        captured = capture_inputs(spec, lowered, Path(tmp), workers.get(first.threads),
                                  settings)
        for j, recs in enumerate(groups):
            hw = HardwareSpec.from_dict(recs[0]["hw"])
            lib = Path(tmp) / f"cands{j}.so"
            # under the collector's time limits: code generation can run away here too
            kept, dropped = compile_candidates(
                _candidates(recs, workloads[recs[0]["workload_id"]]), hw.target(), lib)
            summary.failed += len(dropped)
            batch = time_funcs(lib, {f"cand{k}": captured[recs[0]["kernel"]] for k in kept},
                               workers.get(hw.threads), settings=settings,
                               reference=reference_library(hw))
            for k, timing in zip(kept, batch.timings, strict=True):
                writer.append({"kind": "kernel_remeasure", "key": recs[k]["key"],
                               "latency": timing.stats.label(), "slowdown": timing.slowdown,
                               "reference": batch.reference, "other_load": batch.other_load,
                               "first_created_at": recs[k]["created_at"],
                               "created_at": time.time()})
                summary.done += 1
