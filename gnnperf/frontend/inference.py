"""ONNX shape inference on a copy without its large weights (cheap, under the 2 GiB limit)."""

from __future__ import annotations

import math

import onnx
from onnx import helper

from gnnperf.errors import ShapeFoldingError, one_line

# Initializers larger than this are hidden from shape inference (it never needs their values).
_INFERENCE_INIT_ELEMENTS = 1 << 12


def inference_skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the model in which large weights are typed inputs instead of data.

    Shape inference serialises the whole model; hiding big weights keeps each of the many
    folding rounds cheap and keeps >2 GiB models below the protobuf limit.
    """
    graph = model.graph
    skeleton_graph = onnx.GraphProto(name=graph.name)
    skeleton_graph.node.extend(graph.node)
    skeleton_graph.input.extend(graph.input)
    skeleton_graph.output.extend(graph.output)
    listed = {value.name for value in graph.input}
    for init in graph.initializer:
        if math.prod(init.dims) <= _INFERENCE_INIT_ELEMENTS and not _uses_external_data(init):
            skeleton_graph.initializer.append(init)
        elif init.name not in listed:
            skeleton_graph.input.append(
                helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
            )
    skeleton = onnx.ModelProto(
        ir_version=model.ir_version,
        producer_name=model.producer_name,
        graph=skeleton_graph,
    )
    skeleton.opset_import.extend(model.opset_import)
    skeleton.functions.extend(model.functions)
    return skeleton


def _uses_external_data(init: onnx.TensorProto) -> bool:
    return init.data_location == onnx.TensorProto.EXTERNAL


def infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference with data propagation, so Shape->Gather->Concat chains get values."""
    skeleton = inference_skeleton(model)
    try:
        return onnx.shape_inference.infer_shapes(
            skeleton, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception as err:  # noqa: BLE001 - InferenceError and C++ failures
        raise ShapeFoldingError(f"ONNX shape inference failed: {one_line(err)}") from err


def adopt_inferred_types(model: onnx.ModelProto, inferred: onnx.ModelProto) -> None:
    """Keep the final inferred types so later stages can read intermediate shapes."""
    graph = model.graph
    del graph.value_info[:]
    graph.value_info.extend(inferred.graph.value_info)
    by_name = {value.name: value for value in inferred.graph.output}
    for value in graph.output:
        if value.name in by_name:
            value.type.CopyFrom(by_name[value.name].type)
