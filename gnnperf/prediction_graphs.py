"""The kernel graph a prediction reads: lowered once per (model, build, target), then cached.

Kept apart from :mod:`gnnperf.predictor` so that the processes that lower models for
``predict_many`` import TVM only, not PyTorch Geometric and the checkpoint (two seconds
less to start each), and so that a model whose graph is cached needs no process at all.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from .feature_cache import default_cache, target_key
from .features import KernelGraph, extract_graph
from .hardware import HardwareSpec
from .lowering import lower_onnx

ModelSource = str | os.PathLike[str] | onnx.ModelProto


def graph_key(model: ModelSource, hw: HardwareSpec, build: str,
              input_shapes: Mapping[str, Sequence[int]] | None = None) -> str:
    """What determines a model's kernel graph: its bytes, shapes, build and target (not
    the thread count: one lowering serves every thread count of an ISA)."""
    data = (model.SerializeToString() if isinstance(model, onnx.ModelProto)
            else Path(model).read_bytes() if Path(model).is_file() else b"")
    shapes = json.dumps({k: list(v) for k, v in (input_shapes or {}).items()}, sort_keys=True)
    return "|".join([hashlib.sha256(data).hexdigest(), shapes, build,
                     target_key(hw.target_dict())])


def cached_graph(model: ModelSource, hw: HardwareSpec, build: str,
                 input_shapes: Mapping[str, Sequence[int]] | None = None
                 ) -> KernelGraph | None:
    """The graph from the feature cache, or None (not lowered before, or no cache)."""
    cache = default_cache()
    if cache is None:
        return None
    hit = cache.get("graph", graph_key(model, hw, build, input_shapes))
    return None if hit is None else KernelGraph.from_dict(hit)


def lower_for_prediction(model: ModelSource, hw: HardwareSpec, build: str,
                         input_shapes: Mapping[str, Sequence[int]] | None = None
                         ) -> KernelGraph:
    """The kernel graph of ``model`` for ``hw``'s target and ``build``, from the feature
    cache when this model was lowered for this target before (any thread count)."""
    hit = cached_graph(model, hw, build, input_shapes)
    if hit is not None:
        return hit
    graph = extract_graph(lower_onnx(model, hw, build, input_shapes))
    cache = default_cache()
    if cache is not None:
        cache.put("graph", graph_key(model, hw, build, input_shapes), graph.to_dict())
    return graph


def lower_in_worker(model: str | onnx.ModelProto, hw: dict[str, Any], build: str
                    ) -> dict[str, Any]:
    """One model's kernel graph, in a pool process (a dict crosses the process boundary)."""
    return lower_for_prediction(model, HardwareSpec.from_dict(hw), build).to_dict()
