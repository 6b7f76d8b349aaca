"""Reading a model file and refusing what is not a usable model, in one line each."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gnnperf.errors import ModelLoadError, one_line
from gnnperf.frontend.inference import inference_skeleton
from gnnperf.frontend.tensor_types import collect_types

_PROTOBUF_LIMIT = (1 << 31) - 1
# No tensor of a model may exceed this: larger ones are dimensions gone wrong, not models.
MAX_TENSOR_BYTES = 100e9
_FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16,
                          TensorProto.BFLOAT16})


def read_model_file(path: Path) -> onnx.ModelProto:
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


def validate_structure(model: onnx.ModelProto, where: str) -> None:
    """Protobuf parses many non-ONNX byte strings without complaint; reject the empty results."""
    if model.ir_version <= 0:
        raise ModelLoadError(f"{where} is not an ONNX model (no ir_version)")
    if not model.HasField("graph"):
        raise ModelLoadError(f"{where} is not an ONNX model (no graph)")
    if len(model.graph.node) == 0:
        raise ModelLoadError(f"{where} is not a usable ONNX model (graph has no nodes)")
    if len(model.graph.output) == 0:
        raise ModelLoadError(f"{where} is not a usable ONNX model (graph has no outputs)")


def run_checker(model: onnx.ModelProto, where: str, path: Path | None) -> None:
    """Reject malformed graphs here rather than as a confusing TVM failure later."""
    try:
        if path is not None:
            # Checking the file lets C++ parse it: no 2 GiB limit, no Python re-serialisation.
            onnx.checker.check_model(str(path))
        elif _approx_bytes(model) < _PROTOBUF_LIMIT:
            onnx.checker.check_model(model)
        else:
            onnx.checker.check_model(inference_skeleton(model))  # graph structure only
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


def name_unnamed_nodes(graph: onnx.GraphProto) -> None:
    """Give every node a name so that errors (and later stages) can point at it."""
    for index, node in enumerate(graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"


def check_weights(model: onnx.ModelProto, where: str) -> None:
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


def check_tensor_sizes(model: onnx.ModelProto, where: str) -> None:
    """Refuse a model with a tensor no machine here could hold (a dimension gone wrong)."""
    for name, (elem_type, shape) in collect_types(model).items():
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
