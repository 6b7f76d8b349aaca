"""Measure the calibration models on this machine and fit its correction."""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .. import zoo
from ..errors import GnnperfError
from ..features.tuned_candidates import graph_for_prediction
from ..graph_predictor import load_predictor
from ..hardware import HardwareSpec
from ..lowering import compile_lowered, export_executable, lower_onnx
from ..measure import MeasureSettings, make_inputs, measure_library, reference_library
from .store import (
    MIN_MODELS,
    Calibration,
    CalibrationPoint,
    checkpoint_sha256,
    save_calibration,
)

#: the models calibration measures are at most this big (a few seconds each to compile
#: and measure on 2 cores)
MAX_CALIBRATION_GFLOP = 0.2


def calibration_models(count: int, max_gflop: float = MAX_CALIBRATION_GFLOP
                       ) -> list[zoo.ModelSpec]:
    """``count`` small zoo models, one per generated family in turn (the same list on every
    machine): for each, the first seed whose FLOPs are at most ``max_gflop``."""
    specs: list[zoo.ModelSpec] = []
    seed_base = 0
    while len(specs) < count:
        for family in zoo.FAMILIES:
            if len(specs) == count:
                break
            for seed in range(seed_base, seed_base + 50):
                spec = zoo.sample_spec(family, seed)
                if zoo.estimate_flops(spec) <= max_gflop * 1e9:
                    specs.append(spec)
                    break
        seed_base += 50
    return specs


def calibrate(hw: HardwareSpec | str = "local", *, models: int = 10, build: str = "sampled:0",
              checkpoint: str | os.PathLike[str] | None = None,
              settings: MeasureSettings | None = None,
              progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure ``models`` small zoo models on this machine at ``hw`` (measurement v2:
    quiet-machine guard, repeated runs, reference kernels interleaved), predict them with
    the checkpoint *uncorrected*, fit the correction and store it for this CPU."""
    spec = HardwareSpec.coerce(hw)
    if spec.host != "local":
        raise GnnperfError(f"calibration measures this machine; '{spec.hw_id}' is not local")
    if models < MIN_MODELS:  # before minutes of measuring, not after (Calibration.fit)
        raise GnnperfError(f"calibration needs at least {MIN_MODELS} models, got {models}")
    start = time.perf_counter()
    predictor = load_predictor(checkpoint)
    spec = predictor.hardware(spec)
    settings = settings or MeasureSettings()
    points = []
    for model in calibration_models(models):
        # one lowering: the graph predicted is read from the module that is measured
        lowered = lower_onnx(zoo.export_onnx(model), spec, build)
        predicted = predictor.predict_graphs([(graph_for_prediction(lowered), spec)],
                                             calibrated=False)[0]
        with tempfile.TemporaryDirectory(prefix="gnnperf-calibrate-") as tmp:
            lib = export_executable(compile_lowered(lowered), Path(tmp) / "model.so")
            measured = measure_library(lib, make_inputs(lowered.inputs), spec.threads,
                                       settings=settings, reference=reference_library(spec))
        point = CalibrationPoint(model.model_id, predicted.latency_ms,
                                 measured.whole.median_ms, measured.whole.cv)
        points.append(point)
        if progress is not None:
            progress(f"{model.model_id}: predicted {point.predicted_ms:.3f} ms, measured "
                     f"{point.measured_ms:.3f} ms (x{math.exp(point.log_ratio):.2f})")
    calibration = Calibration.fit(
        points, cpu_id=spec.cpu_id, checkpoint_sha256=checkpoint_sha256(predictor.path),
        hw_id=spec.hw_id, build=build, seconds=time.perf_counter() - start)
    save_calibration(calibration)
    return calibration
