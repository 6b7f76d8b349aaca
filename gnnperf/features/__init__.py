"""The kernel graph: one node per kernel call the VM executes, edges for dataflow.

It is read from the *final* lowered module (the one that is compiled), walking the
Relax ``main`` function in binding order, which is the VM's execution order:

- a call to a PrimFunc is a ``tir`` node, named by its symbol in the compiled library;
- a call to a ``vm.builtin`` that moves or views tensor data (``reshape`` and friends)
  is a ``builtin`` node; bookkeeping builtins (allocation, shape checks, kills) are not;
- every tensor a node writes (its destination-passing outputs) is produced by that node,
  and an edge goes to each later node that reads it, with the tensor's bytes as feature.

Weights (constants) and graph inputs are not nodes: each kernel carries the bytes it
reads from them as ``param_bytes`` and ``input_bytes`` features. Kernel features come
from the scheduled TIR (FLOPs, bytes, loop nest, MetaSchedule's per-store features),
so whatever produced the schedule, the features describe what runs. An analysis that
cannot run on a kernel (scans and kernels with opaque blocks defeat TVM's schedule
analyses) leaves its features at zero and is named in the node's ``missing``, which
the encoding turns into a flag feature: every kernel the VM executes is a node.

Modules: :mod:`.graph` (the data types), :mod:`.analyses` (per-kernel static analyses),
:mod:`.extract` (the graph of a lowered module), :mod:`.encoding` (node feature vectors),
:mod:`.schema` (every encoder's column names, versioned), :mod:`.vocabulary` (operator
patterns and analysis sizes) and :mod:`.onnx_graph` (the unfused ONNX
operator graph). The TVM-bound parts (analyses, extraction) load on first use.
"""

from __future__ import annotations

from typing import Any

from gnnperf.features.encoding import node_feature_vector, op_class
from gnnperf.features.graph import KernelGraph, KernelNode, dtype_bytes, ops_of, tensor_bytes
from gnnperf.features.schema import LOOP_KEYS, OP_CLASSES, PATTERN_NAMES, node_feature_names
from gnnperf.features.vocabulary import ANALYSES, MS_FEATURE_DIM, OP_PATTERNS

#: the parts that need TVM load on first use: reading a graph needs no compiler
_LAZY = {
    "KernelStatics": ".analyses",
    "kernel_statics": ".analyses",
    "loop_features": ".analyses",
    "ms_store_features": ".analyses",
    "ms_store_matrix": ".analyses",
    "BOOKKEEPING_BUILTINS": ".extract",
    "extract_graph": ".extract",
    "extract_onnx_graph": ".onnx_graph",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ANALYSES",
    "BOOKKEEPING_BUILTINS",
    "LOOP_KEYS",
    "MS_FEATURE_DIM",
    "OP_CLASSES",
    "OP_PATTERNS",
    "PATTERN_NAMES",
    "KernelGraph",
    "KernelNode",
    "KernelStatics",
    "dtype_bytes",
    "extract_graph",
    "extract_onnx_graph",
    "kernel_statics",
    "loop_features",
    "ms_store_features",
    "ms_store_matrix",
    "node_feature_names",
    "node_feature_vector",
    "op_class",
    "ops_of",
    "tensor_bytes",
]
