"""First stage of the pipeline: ONNX file -> checked, static, folded ONNX -> Relax IRModule.

TVM 0.27's Relax ONNX frontend is fragile on graphs that compute shapes at run time
(TorchScript exports of ``transformers`` models do this everywhere: Shape -> Gather ->
Unsqueeze -> Concat -> Reshape, Expand, ConstantOfShape, Range, attention masks). Once every
graph input has a static shape, those subgraphs are constants, so :func:`load_onnx` pins the
input shapes and folds them with ONNX's own reference evaluator before TVM sees the graph.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import operator
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper, inliner, numpy_helper

from gnnperf.errors import (
    DynamicShapeError,
    FrontendError,
    ModelLoadError,
    ShapeFoldingError,
    UnsupportedOpError,
    one_line,
)

if TYPE_CHECKING:  # importing TVM costs seconds; only the annotations need it here
    import tvm

__all__ = ["import_to_relax", "load_onnx", "onnx_input_shapes"]

log = logging.getLogger(__name__)

# Never materialise a folded tensor larger than this (elements).
MAX_FOLD_ELEMENTS = 1 << 20
# Weights (initializers / Constant nodes of the original graph) larger than this are not pulled
# through folding: transposing or casting a real weight matrix is TVM's business, not ours.
MAX_FOLD_WEIGHT_ELEMENTS = 1 << 16
# When shape inference cannot tell an output's size, only fold nodes whose inputs are this small.
_SMALL_INPUT_ELEMENTS = 1024
# Initializers larger than this are hidden from shape inference (it never needs their values).
_INFERENCE_INIT_ELEMENTS = 1 << 12
_MAX_FOLD_ROUNDS = 32
_PROTOBUF_LIMIT = (1 << 31) - 1
# No tensor of a model may exceed this: larger ones are dimensions gone wrong, not models.
MAX_TENSOR_BYTES = 100e9
_FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16,
                          TensorProto.BFLOAT16})

_DEFAULT_DOMAINS = ("", "ai.onnx")
# Non-deterministic ops: folding them would freeze one random draw into the model.
_NEVER_FOLD = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)
_SHAPE_OPS = frozenset({"Shape", "Size"})
_GRAPH_ATTR_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)

_Shape = tuple[int | None, ...]
_TypeInfo = tuple[int, _Shape | None]  # (ONNX elem_type, shape or None when rank is unknown)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def load_onnx(
    source: str | os.PathLike[str] | onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> onnx.ModelProto:
    """Load, check, make static and constant-fold an ONNX model.

    The result has fully static graph inputs and no run-time shape arithmetic left that could
    be computed ahead of time, which is what TVM's Relax frontend needs. A ``ModelProto``
    argument is copied, never modified.
    """
    path: Path | None = None
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        where = "model"
    else:
        path = Path(os.fspath(source))
        model = _read_model_file(path)
        where = str(path)
    _validate_structure(model, where)
    _run_checker(model, where, path)

    if model.functions:
        # Model-local functions (dynamo exports) would hide their bodies from folding and TVM.
        model = inliner.inline_local_functions(model)
    _name_unnamed_nodes(model.graph)
    _check_weights(model, where)
    _make_inputs_static(model, input_shapes or {})
    model = _fold_constants(model)
    _check_tensor_sizes(model, where)
    return model


def import_to_relax(model: onnx.ModelProto) -> tvm.IRModule:
    """Convert a (preferably :func:`load_onnx`-prepared) model into a Relax ``tvm.IRModule``.

    Equivalent to ``tvm.relax.frontend.onnx.from_onnx(model, keep_params_in_input=False)``
    with the model's own opset, but frontend failures become gnnperf errors that name the
    operator and the node, since the frontend's own messages rarely say where they failed.
    """
    if model.ir_version < 3:  # the frontend's own floor (ONNX 1.1)
        raise ModelLoadError(f"ONNX IR version {model.ir_version} is too old for TVM (< 3)")
    _check_supported_ops(model)
    opset = _default_opset(model, "model")
    importer = _make_tracing_importer()
    try:
        # Redirecting stdout is process-wide: do not run imports concurrently in threads.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            # The frontend warns for every renamed input and prints every failing operator.
            warnings.filterwarnings("ignore", message="Renaming name")
            return importer.from_onnx(model.graph, opset)
    except Exception as err:  # noqa: BLE001 - re-raised as a typed gnnperf error below
        raise _frontend_error(err, importer.current_node, model) from err


def onnx_input_shapes(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...], str]]:
    """Map each real graph input (not an initializer) to its static shape and numpy dtype.

    Later stages build random inputs from this; it raises :class:`DynamicShapeError` rather
    than return a shape that cannot be allocated.
    """
    result: dict[str, tuple[tuple[int, ...], str]] = {}
    for value in _real_inputs(model.graph):
        elem_type, shape = _value_info_type(value)
        if shape is None:
            raise DynamicShapeError(
                f"input '{value.name}' has unknown rank; pass input_shapes={{'{value.name}': "
                "[...]}} to load_onnx"
            )
        static = _require_static(value, shape)
        result[value.name] = (static, _np_dtype_name(elem_type, value.name))
    return result


# --------------------------------------------------------------------------------------------
# Reading and checking
# --------------------------------------------------------------------------------------------


def _read_model_file(path: Path) -> onnx.ModelProto:
    """Turn every way a path can be wrong into one clear line."""
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if path.is_dir():
        raise ModelLoadError(f"{path} is a directory, not an ONNX model file")
    try:
        size = path.stat().st_size
    except OSError as err:
        raise ModelLoadError(f"cannot stat model file {path}: {err.strerror}") from err
    if size == 0:
        raise ModelLoadError(f"model file {path} is empty (0 bytes)")
    try:
        return onnx.load(str(path))
    except Exception as err:  # noqa: BLE001 - protobuf raises many unrelated types
        raise ModelLoadError(
            f"{path} is not a readable ONNX model (truncated or corrupt protobuf?): "
            f"{one_line(err)}"
        ) from err


def _validate_structure(model: onnx.ModelProto, where: str) -> None:
    """Protobuf parses many non-ONNX byte strings without complaint; reject the empty results."""
    if model.ir_version <= 0:
        raise ModelLoadError(f"{where} is not an ONNX model (no ir_version)")
    if not model.HasField("graph"):
        raise ModelLoadError(f"{where} is not an ONNX model (no graph)")
    if len(model.graph.node) == 0:
        raise ModelLoadError(f"{where} is not a usable ONNX model (graph has no nodes)")
    if len(model.graph.output) == 0:
        raise ModelLoadError(f"{where} is not a usable ONNX model (graph has no outputs)")


def _run_checker(model: onnx.ModelProto, where: str, path: Path | None) -> None:
    """Reject malformed graphs here rather than as a confusing TVM failure later."""
    try:
        if path is not None:
            # Checking the file lets C++ parse it: no 2 GiB limit, no Python re-serialisation.
            onnx.checker.check_model(str(path))
        elif _approx_bytes(model) < _PROTOBUF_LIMIT:
            onnx.checker.check_model(model)
        else:
            onnx.checker.check_model(_inference_skeleton(model))  # graph structure only
    except Exception as err:  # noqa: BLE001 - ValidationError and protobuf errors
        raise ModelLoadError(f"{where} fails the ONNX checker: {one_line(err)}") from err


def _approx_bytes(model: onnx.ModelProto) -> int:
    """Serialised size estimate without paying for ModelProto.ByteSize() on big models."""
    total = 0
    for init in model.graph.initializer:
        try:
            itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type)).itemsize
        except (KeyError, TypeError, ValueError):
            itemsize = 8
        total += math.prod(init.dims) * itemsize
    return total + (1 << 20) * (1 + len(model.graph.node) // 1000)


def _default_opset(model: onnx.ModelProto, where: str) -> int:
    """The ai.onnx opset decides operator semantics for both folding and TVM."""
    for entry in model.opset_import:
        if entry.domain in _DEFAULT_DOMAINS:
            return int(entry.version)
    raise ModelLoadError(f"{where} does not import the default ONNX opset")


def _name_unnamed_nodes(graph: onnx.GraphProto) -> None:
    """Give every node a name so that errors (and later stages) can point at it."""
    for index, node in enumerate(graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"


# --------------------------------------------------------------------------------------------
# Static input shapes
# --------------------------------------------------------------------------------------------


def _real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are fed at run time (initializers listed as inputs are weights)."""
    init_names = {init.name for init in graph.initializer}
    return [value for value in graph.input if value.name not in init_names]


def _value_info_type(value: onnx.ValueInfoProto) -> _TypeInfo:
    if not value.type.HasField("tensor_type"):
        raise ModelLoadError(
            f"input '{value.name}' is not a tensor ({value.type.WhichOneof('value')}); "
            "only tensor inputs are supported"
        )
    return _tensor_type_info(value.type.tensor_type)


def _tensor_type_info(tensor_type: onnx.TypeProto.Tensor) -> _TypeInfo:
    if not tensor_type.HasField("shape"):
        return tensor_type.elem_type, None
    dims = tuple(
        int(dim.dim_value)
        if dim.WhichOneof("value") == "dim_value" and dim.dim_value >= 0
        else None
        for dim in tensor_type.shape.dim
    )
    return tensor_type.elem_type, dims


def _dim_label(value: onnx.ValueInfoProto, index: int) -> str:
    dim = value.type.tensor_type.shape.dim[index]
    return dim.dim_param if dim.WhichOneof("value") == "dim_param" and dim.dim_param else "?"


def _require_static(value: onnx.ValueInfoProto, shape: _Shape) -> tuple[int, ...]:
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


def _make_inputs_static(model: onnx.ModelProto, overrides: Mapping[str, Sequence[int]]) -> None:
    """Apply overrides to the input types in place and insist that nothing stays dynamic."""
    graph = model.graph
    inputs = {value.name: value for value in _real_inputs(graph)}
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


def _format_shape(value: onnx.ValueInfoProto, shape: _Shape) -> str:
    parts = [str(dim) if dim is not None else _dim_label(value, i) for i, dim in enumerate(shape)]
    return "[" + ", ".join(parts) + "]"


def _set_static_shape(value: onnx.ValueInfoProto, dims: Sequence[int]) -> None:
    tensor_type = value.type.tensor_type
    tensor_type.ClearField("shape")
    shape = tensor_type.shape  # accessing the field creates an empty (rank-0) shape
    for dim in dims:
        shape.dim.add().dim_value = int(dim)


# --------------------------------------------------------------------------------------------
# Shape inference
# --------------------------------------------------------------------------------------------


def _check_weights(model: onnx.ModelProto, where: str) -> None:
    """Refuse NaN weights: such a model computes nothing meaningful, and NaNs run at other
    speeds than numbers, so neither a label nor a prediction would mean anything."""
    tensors = [(init.name, init) for init in model.graph.initializer]
    tensors += [(node.output[0], attr.t) for node in model.graph.node
                if node.op_type == "Constant" for attr in node.attribute if attr.name == "value"]
    for name, tensor in tensors:
        if tensor.data_type not in _FLOAT_TYPES:
            continue
        try:
            values = numpy_helper.to_array(tensor)
        except Exception as err:  # noqa: BLE001 - a tensor whose data is unreadable
            raise ModelLoadError(f"{where}: weight '{name}' cannot be read: {one_line(err)}"
                                 ) from err
        if np.isnan(values).any():
            raise ModelLoadError(f"{where}: weight '{name}' holds {int(np.isnan(values).sum())} "
                                 "NaN values; export the model from finite weights")


def _check_tensor_sizes(model: onnx.ModelProto, where: str) -> None:
    """Refuse a model with a tensor no machine here could hold (a dimension gone wrong)."""
    for name, (elem_type, shape) in _collect_types(model).items():
        if not shape or any(d is None for d in shape):
            continue
        try:
            itemsize = helper.tensor_dtype_to_np_dtype(elem_type).itemsize
        except (KeyError, TypeError):
            continue
        nbytes = math.prod(shape) * itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise ModelLoadError(
                f"{where}: tensor '{name}' of shape {list(shape)} would take "
                f"{nbytes / 1e9:,.0f} GB, over the {MAX_TENSOR_BYTES / 1e9:.0f} GB gnnperf "
                "accepts; check the model's dimensions and --input-shape")


def _inference_skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
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


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference with data propagation, so Shape->Gather->Concat chains get values."""
    skeleton = _inference_skeleton(model)
    try:
        return onnx.shape_inference.infer_shapes(
            skeleton, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception as err:  # noqa: BLE001 - InferenceError and C++ failures
        raise ShapeFoldingError(f"ONNX shape inference failed: {one_line(err)}") from err


def _collect_types(inferred: onnx.ModelProto) -> dict[str, _TypeInfo]:
    graph = inferred.graph
    types: dict[str, _TypeInfo] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type"):
            types[value.name] = _tensor_type_info(value.type.tensor_type)
    for init in graph.initializer:
        types[init.name] = (init.data_type, tuple(int(d) for d in init.dims))
    return types


# --------------------------------------------------------------------------------------------
# Constant folding
# --------------------------------------------------------------------------------------------


class _Constants:
    """Known constant values by name; initializers are decoded only when a fold needs them."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.protos: dict[str, onnx.TensorProto] = {init.name: init for init in graph.initializer}
        self.arrays: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.arrays or name in self.protos

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self.arrays:
            return tuple(self.arrays[name].shape)
        return tuple(int(d) for d in self.protos[name].dims)

    def size(self, name: str) -> int:
        return math.prod(self.shape(name))

    def value(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            self.arrays[name] = numpy_helper.to_array(self.protos[name])
        return self.arrays[name]


def _fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fold run-time shape computations into initializers until a fixed point is reached."""
    opset = _default_opset(model, "model")
    weights = {init.name for init in model.graph.initializer}
    weights |= {
        name for node in model.graph.node if node.op_type == "Constant" for name in node.output
    }
    total = 0
    for _ in range(_MAX_FOLD_ROUNDS):
        types = _collect_types(_infer(model))
        folded = _fold_round(model, types, opset, weights)
        total += folded
        if folded == 0:
            break
    _prune(model.graph)

    inferred = _infer(model)
    _adopt_inferred_types(model, inferred)
    log.debug("folded %d nodes; %d nodes remain", total, len(model.graph.node))
    try:
        # Folding never touches the big weights the skeleton leaves out; checking without them
        # avoids serialising hundreds of MB again.
        onnx.checker.check_model(_inference_skeleton(model))
    except Exception as err:  # noqa: BLE001
        raise ShapeFoldingError(
            f"constant folding produced an invalid model: {one_line(err)}"
        ) from err
    return model


def _fold_round(
    model: onnx.ModelProto, types: dict[str, _TypeInfo], opset: int, weights: set[str]
) -> int:
    """One topological sweep; returns how many nodes were replaced by constants."""
    graph = model.graph
    consts = _Constants(graph)
    graph_outputs = {value.name for value in graph.output}
    kept: list[onnx.NodeProto] = []
    new_inits: list[onnx.TensorProto] = []
    folded = 0
    for node in graph.node:
        values = _try_fold(node, consts, types, opset, weights)
        if values is None:
            kept.append(node)
            continue
        for name, array in values.items():
            consts.arrays[name] = array
        if graph_outputs.intersection(node.output):
            kept.append(node)  # a graph output must stay produced by a node
            continue
        folded += 1
        new_inits.extend(numpy_helper.from_array(array, name) for name, array in values.items())
    if folded:
        del graph.node[:]
        graph.node.extend(kept)
        graph.initializer.extend(new_inits)
        _prune(graph)
    return folded


def _try_fold(
    node: onnx.NodeProto,
    consts: _Constants,
    types: dict[str, _TypeInfo],
    opset: int,
    weights: set[str],
) -> dict[str, np.ndarray] | None:
    """Values of the node's outputs if it can be computed now and cheaply, else None."""
    if node.domain not in _DEFAULT_DOMAINS or node.op_type in _NEVER_FOLD:
        return None
    if any(attr.type in _GRAPH_ATTR_TYPES for attr in node.attribute):
        return None  # If/Loop/Scan: leave control flow alone
    if node.op_type == "Dropout" and len(node.input) >= 3:
        return None  # training_mode may turn it random

    if node.op_type in _SHAPE_OPS and node.input:
        shape = _static_shape(node.input[0], consts, types)
        if shape is None:
            return None
        return {node.output[0]: _eval_shape_op(node, shape)}

    inputs = [name for name in node.input if name]
    if not all(name in consts for name in inputs):
        return None
    if any(name in weights and consts.size(name) > MAX_FOLD_WEIGHT_ELEMENTS for name in inputs):
        return None
    if node.op_type != "Constant" and _too_large(node, consts, types, inputs):
        return None

    feeds = {name: consts.value(name) for name in inputs}
    if node.op_type == "GatherElements":
        results = _gather_elements(node, feeds)
    else:
        results = _evaluate(node, feeds, opset)
    if results is None:
        return None
    values: dict[str, np.ndarray] = {}
    for name, result in zip(node.output, results, strict=False):
        if not name:
            continue
        if not isinstance(result, (np.ndarray, np.generic)):
            return None  # sequences, optionals, maps
        array = np.asarray(result)
        if node.op_type != "Constant" and array.size > MAX_FOLD_ELEMENTS:
            return None
        if array.dtype == object or not _dtype_matches(array, types.get(name)):
            return None
        values[name] = array
    return values or None


def _static_shape(
    name: str, consts: _Constants, types: dict[str, _TypeInfo]
) -> tuple[int, ...] | None:
    if name in consts:
        return consts.shape(name)
    info = types.get(name)
    if info is None or info[1] is None or any(dim is None for dim in info[1]):
        return None
    return tuple(int(d) for d in info[1])  # type: ignore[arg-type]


def _eval_shape_op(node: onnx.NodeProto, shape: tuple[int, ...]) -> np.ndarray:
    if node.op_type == "Size":
        return np.array(math.prod(shape), dtype=np.int64)
    attrs = {attr.name: helper.get_attribute_value(attr) for attr in node.attribute}
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    # ONNX clamps start/end exactly like Python slicing does.
    return np.array(shape[start : None if end is None else int(end)], dtype=np.int64)


def _too_large(
    node: onnx.NodeProto, consts: _Constants, types: dict[str, _TypeInfo], inputs: list[str]
) -> bool:
    """Refuse folds whose outputs would be huge, before paying for evaluating them."""
    sizes = []
    for name in node.output:
        shape = _static_shape(name, consts, types) if name else ()
        if shape is None:
            break
        sizes.append(math.prod(shape))
    else:
        return max(sizes, default=0) > MAX_FOLD_ELEMENTS

    try:
        estimate = _generator_size(node, consts)
    except (ValueError, TypeError, IndexError, OverflowError):
        return True
    if estimate is not None:
        return estimate > MAX_FOLD_ELEMENTS
    return sum(consts.size(name) for name in inputs) > _SMALL_INPUT_ELEMENTS


def _generator_size(node: onnx.NodeProto, consts: _Constants) -> int | None:
    """Output size of ops whose size depends on input values, or None for other ops."""
    op = node.op_type
    if op == "ConstantOfShape":
        return math.prod(int(d) for d in consts.value(node.input[0]).reshape(-1))
    if op == "Expand":
        target = tuple(int(d) for d in consts.value(node.input[1]).reshape(-1))
        return math.prod(np.broadcast_shapes(consts.shape(node.input[0]), target))
    if op == "Tile":
        repeats = consts.value(node.input[1]).reshape(-1)
        shape = consts.shape(node.input[0])
        return math.prod(int(s) * int(r) for s, r in zip(shape, repeats, strict=True))
    if op == "Range":
        start, limit, delta = (consts.value(name).item() for name in node.input[:3])
        return max(0, math.ceil((limit - start) / delta))
    return None


def _evaluate(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> list[Any] | None:
    """Run one node through ONNX's reference evaluator; any failure means "do not fold"."""
    from onnx.reference import ReferenceEvaluator

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            evaluator = ReferenceEvaluator(node, opsets={"": opset})
            return list(evaluator.run(None, feeds))
    except Exception as err:  # noqa: BLE001 - the evaluator raises anything
        log.debug("not folding %s (%s): %s", node.name, node.op_type, one_line(err))
        return None


def _gather_elements(node: onnx.NodeProto, feeds: dict[str, np.ndarray]) -> list[Any] | None:
    """GatherElements in numpy: onnx's reference version fails beyond 32 gathered positions."""
    data, indices = (feeds[name] for name in node.input[:2])
    attrs = {attr.name: helper.get_attribute_value(attr) for attr in node.attribute}
    axis = int(attrs.get("axis", 0))
    if data.ndim != indices.ndim or not -data.ndim <= axis < data.ndim:
        return None
    axis %= data.ndim
    extent = data.shape[axis]
    if np.any(indices < -extent) or np.any(indices >= extent):
        return None
    # Indices may be smaller than data along the other axes; take the matching corner.
    corner = tuple(
        slice(None) if dim == axis else slice(0, indices.shape[dim]) for dim in range(data.ndim)
    )
    index = np.where(indices < 0, indices + extent, indices).astype(np.int64)
    return [np.take_along_axis(data[corner], index, axis=axis)]


def _dtype_matches(array: np.ndarray, info: _TypeInfo | None) -> bool:
    """Only fold when the evaluator produced exactly the element type the graph declares."""
    if info is None or info[0] == onnx.TensorProto.UNDEFINED:
        return True
    try:
        expected = np.dtype(helper.tensor_dtype_to_np_dtype(info[0]))
    except (KeyError, TypeError, ValueError):
        return False
    return array.dtype == expected


def _subgraph_refs(node: onnx.NodeProto) -> set[str]:
    """Names a control-flow node reads from the enclosing scope (over-approximated)."""
    names: set[str] = set()
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for sub in graphs:
            for inner in sub.node:
                names.update(name for name in inner.input if name)
                names |= _subgraph_refs(inner)
            names.update(value.name for value in sub.output)
    return names


def _prune(graph: onnx.GraphProto) -> None:
    """Drop nodes nothing depends on, then initializers nothing reads."""
    needed = {value.name for value in graph.output}
    kept: list[onnx.NodeProto] = []
    for node in reversed(graph.node):
        if any(name in needed for name in node.output):
            kept.append(node)
            needed.update(name for name in node.input if name)
            needed |= _subgraph_refs(node)
    kept.reverse()
    if len(kept) != len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)

    unused = {init.name for init in graph.initializer if init.name not in needed}
    if unused:
        # Delete in place: rebuilding the list would copy every weight.
        for index in reversed(range(len(graph.initializer))):
            if graph.initializer[index].name in unused:
                del graph.initializer[index]
        # An initializer listed as an input would otherwise become a real, unfed input.
        inputs = [value for value in graph.input if value.name not in unused]
        del graph.input[:]
        graph.input.extend(inputs)


def _adopt_inferred_types(model: onnx.ModelProto, inferred: onnx.ModelProto) -> None:
    """Keep the final inferred types so later stages can read intermediate shapes."""
    graph = model.graph
    del graph.value_info[:]
    graph.value_info.extend(inferred.graph.value_info)
    by_name = {value.name: value for value in inferred.graph.output}
    for value in graph.output:
        if value.name in by_name:
            value.type.CopyFrom(by_name[value.name].type)


# --------------------------------------------------------------------------------------------
# TVM frontend
# --------------------------------------------------------------------------------------------


def _supported_ops() -> set[str]:
    from tvm.relax.frontend.onnx import onnx_frontend

    # "If" is converted by the importer itself, not through the converter map.
    return set(onnx_frontend._get_convert_map()) | {"If", "Constant"}


def _iter_nodes(graph: onnx.GraphProto) -> Iterable[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subgraphs:
                yield from _iter_nodes(sub)


def _check_supported_ops(model: onnx.ModelProto) -> None:
    """Name the first unsupported op and its node before the frontend fails less helpfully."""
    supported = _supported_ops()
    missing: dict[str, str] = {}
    for node in _iter_nodes(model.graph):
        if node.op_type not in supported and node.op_type not in missing:
            missing[node.op_type] = node.name
    if not missing:
        return
    op_type, node_name = next(iter(missing.items()))
    others = [op for op in missing if op != op_type]
    detail = f"node '{node_name}'; TVM's Relax ONNX frontend has no converter for it"
    if others:
        detail += f" (also unsupported: {', '.join(others)})"
    raise UnsupportedOpError(op_type, detail)


def _make_tracing_importer() -> Any:
    """The frontend's importer, remembering which node it is converting when it fails."""
    from tvm.relax.frontend.onnx import onnx_frontend

    class _TracingImporter(onnx_frontend.ONNXGraphImporter):  # type: ignore[misc]
        current_node: tuple[str, str] | None = None

        def _convert_operator(
            self, op_name: str, inputs: Any, attrs: dict[str, Any], opset: int
        ) -> Any:
            custom = attrs.get("tvm_custom", {})
            self.current_node = (op_name, str(custom.get("name", "")))
            return super()._convert_operator(op_name, inputs, attrs, opset)

    return _TracingImporter({}, "float32", keep_params_in_input=False, sanitize=True)


def _frontend_error(
    err: Exception, current: tuple[str, str] | None, model: onnx.ModelProto
) -> Exception:
    """Classify a frontend failure: unsupported op, leftover shape arithmetic, or other."""
    import tvm

    op_type, node_name = current if current is not None else ("?", "?")
    where = f"node '{node_name}' ({op_type})" if current is not None else "the graph"
    message = one_line(err)
    if isinstance(err, tvm.error.OpNotImplemented):
        return UnsupportedOpError(op_type, f"{where}: {message}")
    if isinstance(err, (tvm.error.OpError, NotImplementedError)):
        return UnsupportedOpError(op_type, f"{where} uses an unsupported form: {message}")
    shape_nodes = [node.name for node in model.graph.node if node.op_type in _SHAPE_OPS]
    if shape_nodes:
        return ShapeFoldingError(
            f"TVM's Relax ONNX frontend failed on {where}: {message}; the graph still computes "
            f"shapes at run time ({len(shape_nodes)} Shape/Size nodes, e.g. '{shape_nodes[0]}'): "
            "load it with load_onnx(..., input_shapes=...) so they fold into constants"
        )
    return FrontendError(f"TVM's Relax ONNX frontend failed on {where}: {message}")


