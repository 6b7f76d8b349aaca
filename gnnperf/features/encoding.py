"""Numeric encoding of a kernel node for the model: one-hot classes, sizes, loops, flags."""

from __future__ import annotations

import math

import numpy as np

from gnnperf.features.graph import KernelNode
from gnnperf.features.schema import LOOP_KEYS, OP_CLASSES, PATTERN_NAMES
from gnnperf.features.vocabulary import ANALYSES, MS_FEATURE_DIM


def op_class(node: KernelNode) -> str:
    """A coarse class of the kernel's anchor op, for a one-hot feature."""
    if node.kind == "builtin":
        return "builtin"
    # adjacent pairs too, so compound names split by older versions of ops_of still match
    ops = set(node.ops) | {f"{a}_{b}" for a, b in zip(node.ops, node.ops[1:], strict=False)}
    rules = [
        ("conv", ("conv2d", "conv1d", "conv3d", "conv2d_transpose")),
        ("matmul", ("matmul", "dense", "batch_matmul", "einsum")),
        ("pool", ("max_pool2d", "avg_pool2d", "adaptive_avg", "pool2d")),
        ("softmax", ("softmax", "log_softmax")),
        ("norm", ("layer_norm", "group_norm", "batch_norm", "rms_norm", "instance_norm")),
        ("reduce", ("mean", "sum", "max", "min", "variance", "prod", "argmax")),
        ("concat", ("concatenate",)),
        ("gather", ("take", "gather", "gather_elements", "gather_nd", "embedding")),
        ("layout", ("reshape", "transpose", "strided_slice", "squeeze", "expand_dims",
                    "permute_dims", "split", "broadcast_to", "tile", "flatten")),
    ]
    for cls, names in rules:
        if ops & set(names):
            return cls
    if node.pattern in ("elemwise", "broadcast"):
        return "elementwise"
    return "other"


def node_feature_vector(node: KernelNode, n_nodes: int) -> list[float]:
    """Numeric features of one node, in :func:`node_feature_names` order (no hardware)."""
    cls = op_class(node)
    vec = [1.0 if cls == c else 0.0 for c in OP_CLASSES]
    vec += [1.0 if node.pattern == p else 0.0 for p in PATTERN_NAMES]
    out_elems = sum(int(np.prod(s)) if s else 1 for s in node.out_shapes)
    vec += [
        math.log1p(node.flops),
        math.log1p(node.bytes_read),
        math.log1p(node.bytes_written),
        math.log1p(node.param_bytes),
        math.log1p(node.input_bytes),
        math.log1p(node.intensity),
        float(len(node.in_shapes)),
        float(len(node.out_shapes)),
        math.log1p(out_elems),
        float(len(node.ops)),
        1.0 if node.index == 0 else 0.0,
        1.0 if node.index == n_nodes - 1 else 0.0,
    ]
    vec += [math.log1p(node.loops.get(k, 0.0)) for k in LOOP_KEYS]
    ms = node.ms_features or [0.0] * MS_FEATURE_DIM
    vec += [float(v) for v in ms[:MS_FEATURE_DIM]]
    vec += [1.0 if a in node.missing else 0.0 for a in ANALYSES]
    vec += [1.0 if node.schedule_fallback else 0.0]
    return vec
