"""TVM's Relax ONNX frontend, with failures turned into gnnperf errors that name the node."""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import onnx

from gnnperf.errors import (
    FrontendError,
    ModelLoadError,
    ShapeFoldingError,
    UnsupportedOpError,
    one_line,
)
from gnnperf.frontend.tensor_types import SHAPE_OPS, default_opset

if TYPE_CHECKING:  # importing TVM costs seconds; only the annotations need it here
    import tvm


def import_to_relax(model: onnx.ModelProto) -> tvm.IRModule:
    """Convert a (preferably :func:`load_onnx`-prepared) model into a Relax ``tvm.IRModule``.

    Equivalent to ``tvm.relax.frontend.onnx.from_onnx(model, keep_params_in_input=False)``
    with the model's own opset, but frontend failures become gnnperf errors that name the
    operator and the node, since the frontend's own messages rarely say where they failed.
    """
    if model.ir_version < 3:  # the frontend's own floor (ONNX 1.1)
        raise ModelLoadError(f"ONNX IR version {model.ir_version} is too old for TVM (< 3)")
    _check_supported_ops(model)
    opset = default_opset(model, "model")
    importer = _make_tracing_importer()
    try:
        # Redirecting stdout is process-wide: do not run imports concurrently in threads.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            # The frontend warns for every renamed input and prints every failing operator.
            warnings.filterwarnings("ignore", message="Renaming name")
            return importer.from_onnx(model.graph, opset)
    except Exception as err:  # noqa: BLE001 - re-raised as a typed gnnperf error below
        raise _frontend_error(err, importer.current_node, model) from err


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
    shape_nodes = [node.name for node in model.graph.node if node.op_type in SHAPE_OPS]
    if shape_nodes:
        return ShapeFoldingError(
            f"TVM's Relax ONNX frontend failed on {where}: {message}; the graph still computes "
            f"shapes at run time ({len(shape_nodes)} Shape/Size nodes, e.g. '{shape_nodes[0]}'): "
            "load it with load_onnx(..., input_shapes=...) so they fold into constants"
        )
    return FrontendError(f"TVM's Relax ONNX frontend failed on {where}: {message}")
