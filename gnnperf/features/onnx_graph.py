"""The unfused ONNX operator graph, for the NNLQP/DIPPM-style ablation."""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnperf.features.graph import KernelGraph, KernelNode, tensor_bytes

#: ONNX op types → names the kernel-graph encoding understands (see :func:`.encoding.op_class`).
_ONNX_OPS = {
    "Conv": "conv2d", "ConvTranspose": "conv2d_transpose", "MatMul": "matmul", "Gemm": "matmul",
    "MaxPool": "max_pool2d", "AveragePool": "avg_pool2d", "GlobalAveragePool": "adaptive_avg",
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "LayerNormalization": "layer_norm",
    "BatchNormalization": "batch_norm", "GroupNormalization": "group_norm",
    "InstanceNormalization": "instance_norm", "ReduceMean": "mean", "ReduceSum": "sum",
    "ReduceMax": "max", "Concat": "concatenate", "Gather": "take", "Reshape": "reshape",
    "Transpose": "transpose", "Slice": "strided_slice", "Squeeze": "squeeze",
    "Unsqueeze": "expand_dims", "Flatten": "flatten", "Split": "split", "Expand": "broadcast_to",
}
_ELEMWISE = {"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Pow",
             "Exp", "Clip", "HardSigmoid", "HardSwish", "Gelu", "Neg", "Abs", "Where", "Cast",
             "Max", "Min", "LeakyRelu", "Softplus", "Reciprocal", "Equal", "Not"}


def extract_onnx_graph(model: Any) -> KernelGraph:
    """One node per ONNX operator of a :func:`gnnperf.frontend.load_onnx` model.

    The same encoding as the kernel graph, minus everything lowering adds (fusion,
    schedules, loop nests): what an NNLQP/DIPPM-style predictor sees.
    """
    import onnx
    from onnx import numpy_helper

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    shapes: dict[str, tuple[list[int], str]] = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name
            shapes[vi.name] = ([int(d.dim_value) for d in tt.shape.dim], dtype)
    weights = {}
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        shapes[init.name] = (list(arr.shape), arr.dtype.name)
        weights[init.name] = True
    graph_inputs = {i.name for i in graph.input} - set(weights)
    producer: dict[str, int] = {}
    nodes: list[KernelNode] = []
    edges: list[tuple[int, int, int]] = []
    for index, node in enumerate(graph.node):
        ins = [shapes[n] for n in node.input if n in shapes]
        outs = [shapes[n] for n in node.output if n in shapes]
        param = sum(tensor_bytes(*shapes[n]) for n in node.input if n in weights)
        from_inputs = sum(tensor_bytes(*shapes[n]) for n in node.input if n in graph_inputs)
        for name in node.input:
            if name in producer and name in shapes:
                edges.append((producer[name], index, tensor_bytes(*shapes[name])))
        for name in node.output:
            producer[name] = index
        op = _ONNX_OPS.get(node.op_type, node.op_type.lower())
        pattern = "elemwise" if node.op_type in _ELEMWISE else (
            "out_elemwise_fusable" if op in ("conv2d", "matmul") else "injective")
        nodes.append(KernelNode(
            index=index, name=node.name or f"{node.op_type}_{index}", kind="tir", ops=[op],
            pattern=pattern, struct_hash=node.op_type, in_shapes=[s for s, _ in ins],
            in_dtypes=[d for _, d in ins], out_shapes=[s for s, _ in outs],
            out_dtypes=[d for _, d in outs], flops=_onnx_flops(node, ins, outs),
            bytes_read=sum(tensor_bytes(*s) for s in ins),
            bytes_written=sum(tensor_bytes(*s) for s in outs),
            param_bytes=param, input_bytes=from_inputs))
    return KernelGraph(nodes=nodes, edges=edges, target={"kind": "onnx"}, build="onnx",
                       inputs={i.name: (tuple(shapes[i.name][0]), shapes[i.name][1])
                               for i in graph.input if i.name in graph_inputs
                               and i.name in shapes})


def _onnx_flops(node: Any, ins: list[tuple[list[int], str]],
                outs: list[tuple[list[int], str]]) -> float:
    """Multiply-adds × 2 for Conv/MatMul/Gemm; one FLOP per output element otherwise."""
    out_elems = float(sum(np.prod(s) for s, _ in outs)) if outs else 0.0
    if node.op_type in ("Conv", "ConvTranspose") and len(ins) >= 2:
        weight = ins[1][0]
        return 2.0 * out_elems * float(np.prod(weight[1:]))
    if node.op_type in ("MatMul", "Gemm") and len(ins) >= 2 and ins[0][0]:
        a = ins[0][0]
        trans_a = any(at.name == "transA" and at.i for at in node.attribute)
        k = a[-2] if trans_a and len(a) >= 2 else a[-1]
        return 2.0 * out_elems * float(k)
    return out_elems
