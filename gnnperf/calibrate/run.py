"""Measure the calibration models on this machine and fit its correction."""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import onnx

from gnnperf import zoo
from gnnperf.calibrate.selection import Candidate, spread_by_size
from gnnperf.calibrate.store import (
    CALIBRATION_BUILDS,
    MAX_CALIBRATION_GFLOP,
    MIN_MODELS,
    Calibration,
    CalibrationPoint,
    checkpoint_sha256,
    save_calibration,
)
from gnnperf.errors import GnnperfError
from gnnperf.estimators.gnn.predictor import Predictor, load_predictor
from gnnperf.features.tuned_candidates import graph_for_prediction
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.lowering.pipeline import compile_lowered, export_executable, lower_onnx
from gnnperf.measure import MeasureSettings, make_inputs, measure_library, reference_library

#: how many zoo seeds of each family calibration chooses its models from
CANDIDATE_SEEDS = 50


def calibration_models(count: int, max_gflop: float = MAX_CALIBRATION_GFLOP
                       ) -> list[zoo.ModelSpec]:
    """``count`` zoo models of at most ``max_gflop`` (the same list on every machine): among
    the first :data:`CANDIDATE_SEEDS` seeds of every generated family, spread over their
    sizes by :func:`.selection.spread_by_size`."""
    specs = {s.model_id: s for family in sorted(zoo.FAMILIES)
             for s in (zoo.sample_spec(family, seed) for seed in range(CANDIDATE_SEEDS))}
    candidates = [Candidate(m, s.family, zoo.estimate_flops(s) / 1e9)
                  for m, s in specs.items()]
    small = [c for c in candidates if c.gflop <= max_gflop]
    if len(small) < count:
        raise GnnperfError(f"only {len(small)} zoo models are at most {max_gflop} GFLOP; "
                           f"asked for {count}")
    return [specs[m] for m in spread_by_size(small, count)]


def calibrate(hw: HardwareSpec | str = "local", *, models: int = 10,
              builds: Sequence[str] = CALIBRATION_BUILDS,
              threads: Sequence[int] | None = None, max_gflop: float = MAX_CALIBRATION_GFLOP,
              checkpoint: str | os.PathLike[str] | None = None,
              settings: MeasureSettings | None = None,
              progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure ``models`` small zoo models on this machine at ``hw``'s ISA, in each of
    ``builds`` at each of ``threads`` (default: one thread and ``hw``'s), under measurement
    v2 (quiet-machine guard, repeated runs, reference kernels interleaved); predict them
    with the checkpoint *uncorrected*; fit a correction per (build kind, threads) cell and
    store it for this CPU."""
    spec = HardwareSpec.coerce(hw)
    if spec.host != "local":
        raise GnnperfError(f"calibration measures this machine; '{spec.hw_id}' is not local")
    if models < MIN_MODELS:  # before minutes of measuring, not after (Calibration.fit)
        raise GnnperfError(f"calibration needs at least {MIN_MODELS} models, got {models}")
    builds = [str(BuildConfig.parse(b)) for b in builds]
    if not builds or any(BuildConfig.parse(b).searched for b in builds):
        raise GnnperfError("calibration measures builds a new machine can make untuned "
                           "(default, sampled:SEED); searched builds (best-of, tuned) take "
                           "sampled's factor")
    start = time.perf_counter()
    predictor = load_predictor(checkpoint)
    counts = sorted({1, spec.threads} if threads is None else {int(t) for t in threads})
    configs = [predictor.hardware(HardwareSpec.local(spec.isa, n)) for n in counts]
    settings = settings or MeasureSettings()
    points = []
    for model in calibration_models(models, max_gflop):
        onnx_model = zoo.export_onnx(model)
        for config in configs:
            for build in builds:
                points.append(_measure_point(model.model_id, onnx_model, config, build,
                                             predictor, settings))
                if progress is not None:
                    p = points[-1]
                    progress(f"{model.model_id} {build} {config.threads}t: predicted "
                             f"{p.predicted_ms:.3f} ms, measured {p.measured_ms:.3f} ms "
                             f"(x{math.exp(p.log_ratio):.2f})")
    calibration = Calibration.fit(
        points, cpu_id=spec.cpu_id, checkpoint_sha256=checkpoint_sha256(predictor.path),
        hw_id=spec.hw_id, build=",".join(builds), seconds=time.perf_counter() - start)
    save_calibration(calibration)
    return calibration


def _measure_point(model_id: str, onnx_model: onnx.ModelProto, spec: HardwareSpec, build: str,
                   predictor: Predictor, settings: MeasureSettings) -> CalibrationPoint:
    """One model in one build at one hardware config: predicted uncorrected, then measured."""
    # one lowering: the graph predicted is read from the module that is measured
    lowered = lower_onnx(onnx_model, spec, build)
    predicted = predictor.predict_graphs([(graph_for_prediction(lowered), spec)],
                                         calibrated=False)[0]
    with tempfile.TemporaryDirectory(prefix="gnnperf-calibrate-") as tmp:
        lib = export_executable(compile_lowered(lowered), Path(tmp) / "model.so")
        measured = measure_library(lib, make_inputs(lowered.inputs), spec.threads,
                                   settings=settings, reference=reference_library(spec))
    return CalibrationPoint(model_id, predicted.latency_ms, measured.whole.median_ms,
                            measured.whole.cv, build, spec.threads)
