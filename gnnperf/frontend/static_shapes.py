"""Static input shapes: the user's overrides applied, nothing left dynamic."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from gnnperf.errors import DynamicShapeError, ModelLoadError
from gnnperf.frontend.tensor_types import Shape, TypeInfo, tensor_type_info


def onnx_input_shapes(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...], str]]:
    """Map each real graph input (not an initializer) to its static shape and numpy dtype.

    Later stages build random inputs from this; it raises :class:`DynamicShapeError` rather
    than return a shape that cannot be allocated.
    """
    result: dict[str, tuple[tuple[int, ...], str]] = {}
    for value in real_inputs(model.graph):
        elem_type, shape = _value_info_type(value)
        if shape is None:
            raise DynamicShapeError(
                f"input '{value.name}' has unknown rank; pass input_shapes={{'{value.name}': "
                "[...]}} to load_onnx"
            )
        static = _require_static(value, shape)
        result[value.name] = (static, _np_dtype_name(elem_type, value.name))
    return result


def real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are fed at run time (initializers listed as inputs are weights)."""
    init_names = {init.name for init in graph.initializer}
    return [value for value in graph.input if value.name not in init_names]


def _value_info_type(value: onnx.ValueInfoProto) -> TypeInfo:
    if not value.type.HasField("tensor_type"):
        raise ModelLoadError(
            f"input '{value.name}' is not a tensor ({value.type.WhichOneof('value')}); "
            "only tensor inputs are supported"
        )
    return tensor_type_info(value.type.tensor_type)


def _dim_label(value: onnx.ValueInfoProto, index: int) -> str:
    dim = value.type.tensor_type.shape.dim[index]
    return dim.dim_param if dim.WhichOneof("value") == "dim_param" and dim.dim_param else "?"


def _require_static(value: onnx.ValueInfoProto, shape: Shape) -> tuple[int, ...]:
    for index, dim in enumerate(shape):
        if dim is None:
            raise DynamicShapeError(
                f"input '{value.name}' has dynamic dimension {index} "
                f"('{_dim_label(value, index)}'); pass input_shapes={{'{value.name}': [...]}}"
            )
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def _np_dtype_name(elem_type: int, name: str) -> str:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError) as err:
        raise ModelLoadError(f"input '{name}' has unsupported element type {elem_type}") from err


def _check_override(name: str, dims: Sequence[int]) -> tuple[int, ...]:
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Iterable):
        raise DynamicShapeError(
            f"input_shapes['{name}'] must be a sequence of positive integers, got {dims!r}"
        )
    result = []
    for dim in dims:
        if isinstance(dim, bool):
            raise DynamicShapeError(f"input_shapes['{name}'] contains a boolean: {list(dims)}")
        try:
            value = operator.index(dim)  # numpy integers are fine, floats are not
        except TypeError as err:
            raise DynamicShapeError(
                f"input_shapes['{name}'] must contain integers, got {list(dims)}"
            ) from err
        if value <= 0:
            raise DynamicShapeError(
                f"input_shapes['{name}'] must contain positive integers, got {list(dims)}"
            )
        result.append(value)
    return tuple(result)


def make_inputs_static(model: onnx.ModelProto, overrides: Mapping[str, Sequence[int]]) -> None:
    """Apply overrides to the input types in place and insist that nothing stays dynamic."""
    graph = model.graph
    inputs = {value.name: value for value in real_inputs(graph)}
    init_names = {init.name for init in graph.initializer}
    for name in overrides:
        if name not in inputs:
            kind = "a weight (initializer)" if name in init_names else "not a graph input"
            raise DynamicShapeError(
                f"input_shapes names '{name}', which is {kind}; model inputs are {sorted(inputs)}"
            )

    pending: dict[str, str] = {}  # dynamic inputs without override -> template for the hint
    first_problem: str | None = None
    for name, value in inputs.items():
        _, shape = _value_info_type(value)
        if name in overrides:
            wanted = _check_override(name, overrides[name])
            if shape is not None and len(wanted) != len(shape):
                raise DynamicShapeError(
                    f"input_shapes['{name}'] has rank {len(wanted)} but input '{name}' has "
                    f"rank {len(shape)} (shape {_format_shape(value, shape)})"
                )
            for index, (have, want) in enumerate(zip(shape or (), wanted, strict=False)):
                if have is not None and have != want:
                    raise DynamicShapeError(
                        f"input_shapes['{name}'] sets dimension {index} to {want} but the model "
                        f"fixes it to {have}"
                    )
            _set_static_shape(value, wanted)
            continue
        if shape is None:
            pending[name] = "[...]"
            first_problem = first_problem or f"input '{name}' has unknown rank"
            continue
        dynamic = [i for i, dim in enumerate(shape) if dim is None]
        if dynamic:
            pending[name] = _format_shape(value, shape)
            index = dynamic[0]
            first_problem = first_problem or (
                f"input '{name}' has dynamic dimension {index} ('{_dim_label(value, index)}')"
            )
    if first_problem is not None:
        hint = ", ".join(f"'{name}': {template}" for name, template in pending.items())
        flags = " ".join(f"--input-shape {name}={template.strip('[]').replace(' ', '')}"
                         for name, template in pending.items())
        raise DynamicShapeError(f"{first_problem}; pass input_shapes={{{hint}}} "
                                f"(command line: {flags})")

    # Old inferred types may carry symbolic dims that contradict the new static ones.
    del graph.value_info[:]
    for value in graph.output:
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.WhichOneof("value") == "dim_param":
                    dim.ClearField("dim_param")


def _format_shape(value: onnx.ValueInfoProto, shape: Shape) -> str:
    parts = [str(dim) if dim is not None else _dim_label(value, i) for i, dim in enumerate(shape)]
    return "[" + ", ".join(parts) + "]"


def _set_static_shape(value: onnx.ValueInfoProto, dims: Sequence[int]) -> None:
    tensor_type = value.type.tensor_type
    tensor_type.ClearField("shape")
    shape = tensor_type.shape  # accessing the field creates an empty (rank-0) shape
    for dim in dims:
        shape.dim.add().dim_value = int(dim)
