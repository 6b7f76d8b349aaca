"""Measuring a compiled library on this machine, through a worker, under the guards."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.errors import MeasurementError
from gnnperf.hardware.spec import HardwareSpec, cached_figures
from gnnperf.measure.guard import LoadProbe, wait_for_quiet
from gnnperf.measure.reference import reference_library, summarise
from gnnperf.measure.results import (
    FuncTiming,
    KernelTiming,
    LatencyStats,
    Measurement,
    MeasureSettings,
)
from gnnperf.measure.worker import MeasureWorker

# -- public entry points --------------------------------------------------------------------


def _write_inputs(arrays: Sequence[np.ndarray], folder: Path) -> Path:
    path = folder / "inputs.npz"
    np.savez(path, **{f"arg{i}": a for i, a in enumerate(arrays)})
    return path


def measure_library(
    lib_path: str | os.PathLike[str],
    arrays: Sequence[np.ndarray],
    threads: int,
    *,
    per_kernel: bool = False,
    settings: MeasureSettings | None = None,
    worker: MeasureWorker | None = None,
    reference: str | os.PathLike[str] | None = None,
) -> Measurement:
    """Measure a compiled library locally at ``threads``, guarding against a busy machine.

    ``reference`` is the compiled reference suite (:func:`reference_library`): its
    kernels are timed in rounds between blocks of the model's samples (v2 protocol).
    """
    settings = settings or MeasureSettings()
    own_worker = worker is None
    worker = worker or MeasureWorker(threads)
    if worker.threads != threads:
        raise MeasurementError(f"worker runs {worker.threads} threads, {threads} requested")
    started = time.time()
    best: Measurement | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="gnnperf-measure-") as tmp:
            inputs = _write_inputs(arrays, Path(tmp))
            payload = {"lib": str(Path(lib_path).resolve()), "inputs": str(inputs),
                       "per_kernel": per_kernel, "settings": settings.to_dict(),
                       "reference": str(Path(reference).resolve()) if reference else None}
            for attempt in range(1, settings.max_attempts + 1):
                wait_for_quiet(settings.max_other_load, settings.quiet_timeout_s)
                probe = LoadProbe()
                reply = worker.request(payload, settings.timeout_s)
                load = probe.other_load()
                result = Measurement(
                    whole=LatencyStats.from_samples(reply["whole_ms"]),
                    threads=threads,
                    kernels=[KernelTiming(**k) for k in reply["kernels"]]
                    if per_kernel else None,
                    other_load=round(load, 4),
                    attempts=attempt,
                    settings=settings.to_dict(),
                    started_at=started,
                    slowdown=reply.get("whole_slowdown"),
                    slow_tries=int(reply.get("whole_tries", 0)),
                    reference=summarise(reply["reference_rounds"])
                    if reply.get("reference_rounds") else None,
                )
                if best is None or _score(result) < _score(best):
                    best = result
                if result.whole.cv <= settings.max_cv and load <= settings.max_other_load:
                    break
    finally:
        if own_worker:
            worker.close()
    assert best is not None
    best.attempts = attempt  # how many measurements were taken; the best one is kept
    best.duration_s = time.time() - started
    return best


def measure_reference(library: str | os.PathLike[str], threads: int, rounds: int = 9,
                      settings: MeasureSettings | None = None) -> dict[str, dict[str, Any]]:
    """The reference kernels alone, ``rounds`` rounds at ``threads``: the machine's state
    now, as ``gnnperf hw`` reports it (a few seconds, most of it starting the worker)."""
    settings = settings or MeasureSettings()
    wait_for_quiet(settings.max_other_load, settings.quiet_timeout_s)
    with MeasureWorker(threads) as worker:
        reply = worker.request({"reference_only": str(Path(library).resolve()),
                                "rounds": rounds}, settings.timeout_s)
    return summarise(reply["reference_rounds"])


def _score(m: Measurement) -> float:
    """Lower is better: spread, with load and host slowdown during the run as penalties."""
    return m.whole.cv + 10.0 * m.other_load + max(0.0, (m.slowdown or 1.0) - 1.0)


# -- kernels alone (the kernel dataset; the worker's side is :mod:`.kernels`) -------------


def capture_kernel_inputs(lib_path: str | os.PathLike[str], arrays: Sequence[np.ndarray],
                          out_dir: str | os.PathLike[str], worker: MeasureWorker,
                          settings: MeasureSettings | None = None) -> dict[str, Path]:
    """Save the argument tensors of each kernel of a compiled model (one instrumented
    run in ``worker`` on ``arrays``) under ``out_dir``; returns kernel name → its file."""
    settings = settings or MeasureSettings()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    reply = worker.request({"capture": True, "lib": str(Path(lib_path).resolve()),
                            "inputs": str(_write_inputs(arrays, out_dir).resolve()),
                            "out": str(out_dir.resolve())}, settings.timeout_s)
    return {name: Path(path) for name, path in reply["kernels"].items()}


@dataclass
class FuncBatch:
    """A batch of PrimFuncs timed alone: each one's timing, the reference kernels' summary
    over the rounds between them (None without a reference suite), and the load other
    processes put on the CPUs meanwhile."""

    timings: list[FuncTiming]
    reference: dict[str, dict[str, Any]] | None
    other_load: float
    attempts: int


def time_funcs(lib_path: str | os.PathLike[str], funcs: Mapping[str, str | os.PathLike[str]],
               worker: MeasureWorker, *, settings: MeasureSettings | None = None,
               reference: str | os.PathLike[str] | None = None, seed: int | None = None,
               ) -> FuncBatch:
    """Time PrimFuncs of a library alone (name → file of saved arguments), in ``worker``.

    Like a whole-model label, the batch waits for a quiet machine and is taken again (up
    to ``max_attempts``) when other processes loaded the CPUs while it ran; the least
    loaded attempt is kept.
    """
    settings = settings or MeasureSettings()
    payload = {"time_funcs": True, "lib": str(Path(lib_path).resolve()),
               "funcs": {name: str(Path(p).resolve()) for name, p in funcs.items()},
               "settings": settings.to_dict(), "seed": seed,
               "reference": str(Path(reference).resolve()) if reference else None}
    best: FuncBatch | None = None
    for attempt in range(1, settings.max_attempts + 1):
        wait_for_quiet(settings.max_other_load, settings.quiet_timeout_s)
        probe = LoadProbe()
        reply = worker.request(payload, settings.timeout_s)
        load = round(probe.other_load(), 4)
        timings = []
        for name in funcs:
            t = reply["timings"].get(name)
            if t is None:
                raise MeasurementError(f"the worker did not time {name}")
            timings.append(FuncTiming(name, LatencyStats.from_samples(t["samples_ms"]),
                                      float(t["slowdown"]), int(t["tries"])))
        rounds = reply["reference_rounds"]
        batch = FuncBatch(timings, summarise(rounds) if rounds else None, load, attempt)
        if best is None or load < best.other_load:
            best = batch
        if load <= settings.max_other_load:
            break
    assert best is not None
    return best


def with_reference_figures(spec: HardwareSpec, remeasure: bool = False) -> HardwareSpec:
    """``spec`` of this machine with the reference kernels' median times filled in.

    Measured once per (CPU, ISA, threads), a few seconds, and cached beside the peak
    figures: the machine's usual state, which predictions for ``local`` hardware see
    (``gnnperf hw`` times the kernels again for the state *now*). A spec that already
    carries reference times keeps them.
    """
    if spec.reference_ms and not remeasure and (
            spec.serial is None or "reference_ms" in spec.serial):
        return spec

    def medians(threads: int) -> dict[str, float]:
        def measure() -> dict[str, float]:
            timed = measure_reference(reference_library(spec), threads)
            return {k: v["median_ms"] for k, v in timed.items()}

        cached = cached_figures("reference_figures", f"{spec.cpu_id}|{spec.isa}|{threads}",
                                measure, remeasure)
        return {k: float(v) for k, v in cached.items()}

    if not spec.reference_ms or remeasure:
        spec = replace(spec, reference_ms=medians(spec.threads))
    if spec.serial is not None:  # what a serial kernel sees: the one-thread figures
        spec = replace(spec, serial={**spec.serial, "reference_ms": medians(1)})
    return spec
