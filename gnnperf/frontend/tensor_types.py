"""The ONNX type vocabulary the other stages share: element type + static-or-not shape."""

from __future__ import annotations

import onnx

from gnnperf.errors import ModelLoadError

Shape = tuple[int | None, ...]
TypeInfo = tuple[int, Shape | None]  # (ONNX elem_type, shape or None when rank is unknown)

DEFAULT_DOMAINS = ("", "ai.onnx")
SHAPE_OPS = frozenset({"Shape", "Size"})


def tensor_type_info(tensor_type: onnx.TypeProto.Tensor) -> TypeInfo:
    if not tensor_type.HasField("shape"):
        return tensor_type.elem_type, None
    dims = tuple(
        int(dim.dim_value)
        if dim.WhichOneof("value") == "dim_value" and dim.dim_value >= 0
        else None
        for dim in tensor_type.shape.dim
    )
    return tensor_type.elem_type, dims


def collect_types(inferred: onnx.ModelProto) -> dict[str, TypeInfo]:
    graph = inferred.graph
    types: dict[str, TypeInfo] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type"):
            types[value.name] = tensor_type_info(value.type.tensor_type)
    for init in graph.initializer:
        types[init.name] = (init.data_type, tuple(int(d) for d in init.dims))
    return types


def default_opset(model: onnx.ModelProto, where: str) -> int:
    """The ai.onnx opset decides operator semantics for both folding and TVM."""
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            return int(entry.version)
    raise ModelLoadError(f"{where} does not import the default ONNX opset")
