"""First stage of the pipeline: ONNX file -> checked, static, folded ONNX -> Relax IRModule.

TVM 0.27's Relax ONNX frontend is fragile on graphs that compute shapes at run time
(TorchScript exports of ``transformers`` models do this everywhere: Shape -> Gather ->
Unsqueeze -> Concat -> Reshape, Expand, ConstantOfShape, Range, attention masks). Once every
graph input has a static shape, those subgraphs are constants, so :func:`load_onnx` pins the
input shapes and folds them with ONNX's own reference evaluator before TVM sees the graph.

One module per step: ``checks`` (reading, refusing unusable models), ``static_shapes``,
``inference`` (ONNX shape inference without the big weights), ``folding``, ``frontend``
(TVM's importer); ``tensor_types`` is the vocabulary they share.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
from onnx import inliner

from gnnperf.frontend.checks import (
    MAX_TENSOR_BYTES,
    check_tensor_sizes,
    check_weights,
    name_unnamed_nodes,
    read_model_file,
    run_checker,
    validate_structure,
)
from gnnperf.frontend.folding import MAX_FOLD_ELEMENTS, MAX_FOLD_WEIGHT_ELEMENTS, fold_constants
from gnnperf.frontend.frontend import import_to_relax
from gnnperf.frontend.static_shapes import make_inputs_static, onnx_input_shapes

__all__ = ["MAX_FOLD_ELEMENTS", "MAX_FOLD_WEIGHT_ELEMENTS", "MAX_TENSOR_BYTES",
           "import_to_relax", "load_onnx", "onnx_input_shapes"]


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
        model = read_model_file(path)
        where = str(path)
    validate_structure(model, where)
    run_checker(model, where, path)

    if model.functions:
        # Model-local functions (dynamo exports) would hide their bodies from folding and TVM.
        model = inliner.inline_local_functions(model)
    name_unnamed_nodes(model.graph)
    check_weights(model, where)
    make_inputs_static(model, input_shapes or {})
    model = fold_constants(model)
    check_tensor_sizes(model, where)
    return model
