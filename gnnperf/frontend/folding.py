"""Folding run-time shape computations into constants with ONNX's reference evaluator."""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from gnnperf.errors import ShapeFoldingError, one_line
from gnnperf.frontend.inference import adopt_inferred_types, infer, inference_skeleton
from gnnperf.frontend.tensor_types import (
    DEFAULT_DOMAINS,
    SHAPE_OPS,
    TypeInfo,
    collect_types,
    default_opset,
)

log = logging.getLogger(__name__)

# Never materialise a folded tensor larger than this (elements).
MAX_FOLD_ELEMENTS = 1 << 20
# Weights (initializers / Constant nodes of the original graph) larger than this are not pulled
# through folding: transposing or casting a real weight matrix is TVM's business, not ours.
MAX_FOLD_WEIGHT_ELEMENTS = 1 << 16
# When shape inference cannot tell an output's size, only fold nodes whose inputs are this small.
_SMALL_INPUT_ELEMENTS = 1024
_MAX_FOLD_ROUNDS = 32
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
_GRAPH_ATTR_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


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


def fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fold run-time shape computations into initializers until a fixed point is reached."""
    opset = default_opset(model, "model")
    weights = {init.name for init in model.graph.initializer}
    weights |= {
        name for node in model.graph.node if node.op_type == "Constant" for name in node.output
    }
    total = 0
    for _ in range(_MAX_FOLD_ROUNDS):
        types = collect_types(infer(model))
        folded = _fold_round(model, types, opset, weights)
        total += folded
        if folded == 0:
            break
    _prune(model.graph)

    inferred = infer(model)
    adopt_inferred_types(model, inferred)
    log.debug("folded %d nodes; %d nodes remain", total, len(model.graph.node))
    try:
        # Folding never touches the big weights the skeleton leaves out; checking without them
        # avoids serialising hundreds of MB again.
        onnx.checker.check_model(inference_skeleton(model))
    except Exception as err:  # noqa: BLE001
        raise ShapeFoldingError(
            f"constant folding produced an invalid model: {one_line(err)}"
        ) from err
    return model


def _fold_round(
    model: onnx.ModelProto, types: dict[str, TypeInfo], opset: int, weights: set[str]
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
    types: dict[str, TypeInfo],
    opset: int,
    weights: set[str],
) -> dict[str, np.ndarray] | None:
    """Values of the node's outputs if it can be computed now and cheaply, else None."""
    if node.domain not in DEFAULT_DOMAINS or node.op_type in _NEVER_FOLD:
        return None
    if any(attr.type in _GRAPH_ATTR_TYPES for attr in node.attribute):
        return None  # If/Loop/Scan: leave control flow alone
    if node.op_type == "Dropout" and len(node.input) >= 3:
        return None  # training_mode may turn it random

    if node.op_type in SHAPE_OPS and node.input:
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
    name: str, consts: _Constants, types: dict[str, TypeInfo]
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
    node: onnx.NodeProto, consts: _Constants, types: dict[str, TypeInfo], inputs: list[str]
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


def _dtype_matches(array: np.ndarray, info: TypeInfo | None) -> bool:
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
