"""Prediction: ONNX model + hardware → latency with an interval and a per-kernel breakdown.

The model is lowered exactly as the collector lowers it (same pipeline, same build
configuration), so the graph the GNN sees is the graph of the code that would run;
nothing is compiled or executed.

This module imports neither TVM nor PyTorch: a new process that predicts one model starts
lowering it in a second interpreter while this one loads PyTorch Geometric and the
checkpoint (:class:`~gnnperf.prediction.graphs.BackgroundLowering`), which saves the
seconds those imports take one after the other.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from gnnperf.errors import BuildConfigError
from gnnperf.estimators.types import (
    DEFAULT_CHECKPOINT,
    KernelPrediction,
    OutOfDistributionWarning,
    Prediction,
    default_checkpoint,
)
from gnnperf.features import KernelGraph
from gnnperf.hardware.spec import HardwareSpec, available_cores
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.prediction.graphs import (
    BackgroundLowering,
    cached_graph,
    is_onnx_proto,
    lower_for_prediction,
    lower_in_worker,
)

if TYPE_CHECKING:
    import onnx

    from gnnperf.estimators.gnn.predictor import Predictor

__all__ = ["DEFAULT_CHECKPOINT", "KernelPrediction", "OutOfDistributionWarning", "Prediction",
           "default_checkpoint", "lower_for_prediction", "predict", "predict_many"]


def _predictor(checkpoint: str | os.PathLike[str] | None) -> Predictor:
    from gnnperf.estimators.gnn.predictor import load_predictor  # PyTorch and PyG load here

    return load_predictor(checkpoint)


def predict(
    onnx_path: str | os.PathLike[str] | onnx.ModelProto,
    hw: HardwareSpec | dict[str, Any] | str = "local",
    build: str = "default",
    checkpoint: str | os.PathLike[str] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> Prediction:
    """Predict the latency of an ONNX model on ``hw`` with the given build configuration.

    ``hw`` is a :class:`HardwareSpec`, its dict, or an id: ``"local"`` (this machine, best
    ISA, all cores), ``"local/x86-64-v3/1t"``, ... The time taken (lowering included) is
    in ``predict_s``. An ISA or figures outside the training hardware give a warning. A
    CPU calibrated by ``gnnperf calibrate`` gets its correction (named in ``calibration``);
    an uncalibrated CPU the checkpoint never trained on gets an interval widened by the
    unseen-CPU prior (said there too).
    """
    start = time.perf_counter()
    build = str(BuildConfig.parse(build))
    target_hw = HardwareSpec.coerce(hw)
    graph: KernelGraph | None = None
    background: BackgroundLowering | None = None
    if "tvm" not in sys.modules:
        # a new process: unless the graph is cached, lower it in a second interpreter
        # while this one loads the network (with TVM loaded, lower_for_prediction below
        # reads the cache itself)
        graph = cached_graph(onnx_path, target_hw, build, input_shapes)
        if graph is None:
            background = BackgroundLowering.start(onnx_path, target_hw, build, input_shapes)
    try:
        predictor = _predictor(checkpoint)
        predictor.check_build(build)  # a build it never learned: before waiting to lower
        spec = predictor.hardware(target_hw)
        if graph is None and background is not None:
            graph = background.result()
    finally:
        if background is not None:
            background.cancel()
    if graph is None:
        graph = lower_for_prediction(onnx_path, spec, build, input_shapes)
    result = predictor.predict_graphs([(graph, spec)])[0]
    result.predict_s = time.perf_counter() - start
    return result


def predict_many(
    models: Sequence[str | os.PathLike[str] | onnx.ModelProto | KernelGraph],
    hw: HardwareSpec | dict[str, Any] | str = "local",
    build: str = "default",
    checkpoint: str | os.PathLike[str] | None = None,
    *,
    workers: int | None = None,
    progress: bool = False,
) -> list[Prediction]:
    """Predict a batch, in input order; already-lowered :class:`KernelGraph` items and
    models whose graph is in the feature cache skip lowering. The others are lowered by
    ``workers`` processes (default: one per core, serial for a single model) sharing the
    feature cache; ``progress`` shows a tqdm bar."""
    predictor = _predictor(checkpoint)
    build = predictor.check_build(build)
    spec = predictor.hardware(hw)
    for m in models:
        if isinstance(m, KernelGraph) and m.build != build:
            raise BuildConfigError(f"a graph lowered for build '{m.build}' was passed to "
                                   f"predict_many(build='{build}')")
    graphs: list[KernelGraph | None] = [
        m if isinstance(m, KernelGraph) else cached_graph(m, spec, build) for m in models]
    todo = [i for i, g in enumerate(graphs) if g is None]
    n_workers = min(workers or available_cores(), len(todo))
    bar = tqdm(total=len(todo), desc="lower", unit="model", disable=not progress)
    if n_workers <= 1:
        for i in todo:
            graphs[i] = lower_for_prediction(models[i], spec, build)  # type: ignore[arg-type]
            bar.update()
    else:
        sources = [models[i] if is_onnx_proto(models[i]) else str(models[i])
                   for i in todo]
        with ProcessPoolExecutor(n_workers, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(lower_in_worker, src, spec.to_dict(), build): i
                       for i, src in zip(todo, sources, strict=True)}
            for future in as_completed(futures):
                graphs[futures[future]] = KernelGraph.from_dict(future.result())
                bar.update()
    bar.close()
    return predictor.predict_graphs([(g, spec) for g in graphs if g is not None])
