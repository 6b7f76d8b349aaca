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
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax, tirx

from .builds import kernel_hash, tune_context
from .feature_cache import default_cache, target_key
from .lowering import OP_PATTERNS, LoweredModel

#: Builtins that do no tensor work: allocation, checks and liveness bookkeeping.
BOOKKEEPING_BUILTINS = frozenset(
    {
        "vm.builtin.check_tensor_info",
        "vm.builtin.check_shape_info",
        "vm.builtin.check_tuple_info",
        "vm.builtin.check_func_info",
        "vm.builtin.match_shape",
        "vm.builtin.make_shape",
        "vm.builtin.alloc_storage",
        "vm.builtin.alloc_tensor",
        "vm.builtin.null_value",
        "vm.builtin.tuple_getitem",
        "vm.builtin.make_tuple",
        "vm.builtin.read_if_cond",
    }
)

#: Length of MetaSchedule's PerStoreFeature vector (buffers_per_store=5).
MS_FEATURE_DIM = 164

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8,
                "int32": 4, "int8": 1, "uint8": 1, "bool": 1, "int16": 2}


def dtype_bytes(dtype: str) -> int:
    if dtype in _DTYPE_BYTES:
        return _DTYPE_BYTES[dtype]
    bits = re.findall(r"\d+", dtype)
    return max(1, int(bits[-1]) // 8) if bits else 4


def tensor_bytes(shape: Iterable[int], dtype: str) -> int:
    return int(np.prod(list(shape), dtype=np.int64)) * dtype_bytes(dtype)


@dataclass
class KernelNode:
    """One executed kernel call and what it does."""

    index: int
    name: str
    kind: str  # "tir" or "builtin"
    ops: list[str]
    pattern: str
    struct_hash: str
    in_shapes: list[list[int]]
    in_dtypes: list[str]
    out_shapes: list[list[int]]
    out_dtypes: list[str]
    flops: float
    bytes_read: int
    bytes_written: int
    param_bytes: int
    input_bytes: int
    loops: dict[str, float] = field(default_factory=dict)
    ms_features: list[float] = field(default_factory=list)
    #: analyses (of :data:`ANALYSES`) that could not run on this kernel
    missing: list[str] = field(default_factory=list)
    #: why the build left this kernel unscheduled (empty: the build's schedule applied)
    schedule_fallback: str = ""

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved: where the kernel sits on the roofline."""
        return self.flops / max(1, self.bytes_read + self.bytes_written)


@dataclass
class KernelGraph:
    """The executed kernel DAG of one model, for one target and build configuration."""

    nodes: list[KernelNode]
    edges: list[tuple[int, int, int]]  # (src, dst, tensor bytes)
    target: dict[str, Any]
    build: str
    inputs: dict[str, tuple[tuple[int, ...], str]]

    # -- views ------------------------------------------------------------------------------
    @property
    def total_flops(self) -> float:
        return float(sum(n.flops for n in self.nodes))

    @property
    def total_bytes(self) -> int:
        return int(sum(n.bytes_read + n.bytes_written for n in self.nodes))

    def summary(self) -> dict[str, Any]:
        return {
            "kernels": len(self.nodes),
            "tir_kernels": sum(n.kind == "tir" for n in self.nodes),
            "kernels_missing_analyses": sum(bool(n.missing) for n in self.nodes),
            "kernels_unscheduled_by_build": sum(bool(n.schedule_fallback) for n in self.nodes),
            "distinct_kernels": len({n.name for n in self.nodes}),
            "edges": len(self.edges),
            "gflops": self.total_flops / 1e9,
            "mbytes": self.total_bytes / 1e6,
            "build": self.build,
            "target": self.target,
        }

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [asdict(n) for n in self.nodes],
            "edges": [list(e) for e in self.edges],
            "target": self.target,
            "build": self.build,
            "inputs": {k: [list(s), d] for k, (s, d) in self.inputs.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelGraph:
        return cls(
            nodes=[KernelNode(**n) for n in data["nodes"]],
            edges=[(int(a), int(b), int(c)) for a, b, c in data["edges"]],
            target=dict(data["target"]),
            build=str(data["build"]),
            inputs={k: (tuple(s), d) for k, (s, d) in data["inputs"].items()},
        )


# -- per-kernel static features -------------------------------------------------------------


def ops_of(name: str) -> list[str]:
    """Primitive ops fused into a kernel, from TVM's naming (``fused_conv2d1_add_relu``)."""
    parts = name.removeprefix("fused_").split("_")
    ops: list[str] = []
    merged: list[str] = []
    # TVM joins op names with '_' and op names may themselves contain '_' (layer_norm,
    # strided_slice): keep known compound names together.
    compound = {("layer", "norm"), ("strided", "slice"), ("group", "norm"),
                ("batch", "norm"), ("max", "pool2d"), ("avg", "pool2d"),
                ("adaptive", "avg"), ("rms", "norm"), ("instance", "norm"),
                ("expand", "dims"), ("broadcast", "to"), ("permute", "dims")}
    i = 0
    while i < len(parts):
        if i + 1 < len(parts) and (parts[i], re.sub(r"\d+$", "", parts[i + 1])) in compound:
            merged.append(parts[i] + "_" + parts[i + 1])
            i += 2
        else:
            merged.append(parts[i])
            i += 1
    for part in merged:
        op = re.sub(r"\d+$", "", part)
        if op:
            ops.append(op)
    return ops


def loop_features(func: tirx.PrimFunc) -> dict[str, float]:
    """Loop-nest and schedule figures of a (scheduled) PrimFunc."""
    from tvm import s_tir

    sch = s_tir.Schedule(func)
    blocks = []
    stack = list(sch.get_child_blocks(sch.get_sblock("root")))
    while stack:
        block = stack.pop()
        blocks.append(block)
        stack.extend(sch.get_child_blocks(block))
    seen_loops: dict[Any, Any] = {}
    max_depth = 0
    parallel = vector = 1
    unroll_product = 1
    auto_unroll = 0
    reduction = spatial = 1
    reduce_blocks = 0
    for block in blocks:
        loops = [sch.get(lp) for lp in sch.get_loops(block)]
        max_depth = max(max_depth, len(loops))
        block_parallel = 1
        for loop in loops:
            seen_loops[loop] = loop
            extent = int(loop.extent) if isinstance(loop.extent, tirx.IntImm) else 1
            if loop.kind == tirx.ForKind.PARALLEL:
                block_parallel *= extent
            elif loop.kind == tirx.ForKind.VECTORIZED:
                vector = max(vector, extent)
            if loop.annotations and "pragma_auto_unroll_max_step" in loop.annotations:
                auto_unroll = max(auto_unroll, int(loop.annotations["pragma_auto_unroll_max_step"]))
        parallel = max(parallel, block_parallel)
        node = sch.get(block)
        red = sp = 1
        for iv in node.iter_vars:
            ext = int(iv.dom.extent) if isinstance(iv.dom.extent, tirx.IntImm) else 1
            if int(iv.iter_type) == 2:
                red *= ext
            else:
                sp *= ext
        if red > 1:
            reduce_blocks += 1
        reduction = max(reduction, red)
        spatial = max(spatial, sp)
    for loop in seen_loops.values():
        if loop.kind == tirx.ForKind.UNROLLED and isinstance(loop.extent, tirx.IntImm):
            unroll_product *= int(loop.extent)
    return {
        "n_blocks": float(len(blocks)),
        "n_loops": float(len(seen_loops)),
        "max_depth": float(max_depth),
        "parallel_extent": float(parallel),
        "vector_lanes": float(vector),
        "unroll_extent": float(unroll_product),
        "auto_unroll_max_step": float(auto_unroll),
        "reduction_size": float(reduction),
        "spatial_size": float(spatial),
        "reduce_blocks": float(reduce_blocks),
    }


def ms_store_features(func: tirx.PrimFunc, target: tvm.target.Target) -> list[float]:
    """MetaSchedule's PerStoreFeature (TVM's own cost-model input), averaged over stores."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.feature_extractor import PerStoreFeature
    from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate

    func = func.with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    ctx = tune_context(mod, target, 1)
    cand = MeasureCandidate(Schedule(mod), ArgInfo.from_prim_func(func))
    feats = PerStoreFeature(extract_workload=False).extract_from(ctx, [cand])[0].numpy()
    if feats.size == 0:
        return [0.0] * MS_FEATURE_DIM
    mean = feats.mean(axis=0)
    return [round(float(v), 4) for v in mean[:MS_FEATURE_DIM]]


def _estimate_flops(func: tirx.PrimFunc) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    return float(estimate_tir_flops(tvm.IRModule({"main": func})))


#: The static analyses run on every kernel, each of which may fail on some kernels.
ANALYSES = ("flops", "loops", "ms_features")


@dataclass
class KernelStatics:
    """What the static analyses say about one PrimFunc (shared by its calls)."""

    flops: float
    loops: dict[str, float]
    ms_features: list[float]
    struct_hash: str
    missing: list[str]


def kernel_statics(func: tirx.PrimFunc, target: tvm.target.Target,
                   ms_features: bool = True) -> KernelStatics:
    """Run every analysis of :data:`ANALYSES` on ``func``; one that fails is ``missing``.

    TVM's analyses raise on kernels they cannot parse (a scan such as ``cumsum`` or
    ``topk`` has no root block for the schedule to get); such a kernel still runs, so it
    still gets a node, with zeros and a flag instead of the figures. Results are kept in
    the feature cache (:mod:`gnnperf.feature_cache`), so a kernel is analysed once.
    """
    cache = default_cache()
    key = f"{kernel_hash(func):016x}|{target_key(target)}|{int(ms_features)}"
    if cache is not None and (hit := cache.get("kernel", key)) is not None:
        return KernelStatics(**hit)
    missing: list[str] = []

    def attempt(name: str, analysis: Any, empty: Any) -> Any:
        try:
            return analysis()
        except Exception:  # TVM analysis errors come from C++ with many types
            missing.append(name)
            return empty

    flops = attempt("flops", lambda: _estimate_flops(func), 0.0)
    loops = attempt("loops", lambda: loop_features(func), {})
    msf = attempt("ms_features", lambda: ms_store_features(func, target), []) \
        if ms_features else []
    statics = KernelStatics(flops, loops, msf, f"{kernel_hash(func):016x}", missing)
    if cache is not None:
        cache.put("kernel", key, asdict(statics))
    return statics


# -- graph extraction -----------------------------------------------------------------------


def _callee(call: relax.Call) -> tuple[str, str] | None:
    """(kind, name) for a kernel call, or None for bookkeeping."""
    op = call.op
    if isinstance(op, tvm.ir.GlobalVar):
        return ("tir", op.name_hint)
    if isinstance(op, relax.ExternFunc):
        name = str(op.global_symbol)
        if name in BOOKKEEPING_BUILTINS:
            return None
        return ("builtin", name)
    return None


def _arg_tensor(arg: Any) -> tuple[list[int], str] | None:
    ty = getattr(arg, "ty", None)
    if ty is None or not isinstance(ty, relax.TensorType):
        return None
    shape = ty.shape
    if shape is None or not hasattr(shape, "values"):
        return None
    try:
        return [int(v) for v in shape.values], str(ty.dtype)
    except (TypeError, ValueError):
        return None


def extract_graph(lowered: LoweredModel, *, ms_features: bool = True) -> KernelGraph:
    """Build the :class:`KernelGraph` of the final module of ``lowered``."""
    funcs = lowered.primfuncs()
    main = lowered.module["main"]
    params = {p for p in main.params}
    producer: dict[Any, int] = {}
    nodes: list[KernelNode] = []
    edges: list[tuple[int, int, int]] = []
    func_cache: dict[str, KernelStatics] = {}
    for block in main.body.blocks:
        for binding in block.bindings:
            call = binding.value
            if not isinstance(call, relax.Call):
                continue
            callee = _callee(call)
            if callee is None:
                continue
            kind, name = callee
            index = len(nodes)
            ins: list[tuple[list[int], str]] = []
            outs: list[tuple[list[int], str]] = []
            param_bytes = input_bytes = 0
            if kind == "tir":
                func = funcs[name]
                fparams = list(func.params)
                tensor_args = list(call.args)
                n_out = sum(
                    1
                    for a in tensor_args
                    if isinstance(a, relax.Var) and a not in producer and a not in params
                )
                for pos, (arg, fp) in enumerate(zip(tensor_args, fparams, strict=False)):
                    shape = [int(d) for d in fp.shape] if hasattr(fp, "shape") else []
                    spec = (shape, str(fp.dtype))
                    is_out = pos >= len(tensor_args) - n_out
                    if is_out:
                        outs.append(spec)
                        producer[arg] = index
                        continue
                    ins.append(spec)
                    nbytes = tensor_bytes(*spec)
                    if isinstance(arg, relax.Var) and arg in producer:
                        edges.append((producer[arg], index, nbytes))
                    elif isinstance(arg, relax.Var) and arg in params:
                        input_bytes += nbytes
                    else:
                        param_bytes += nbytes
                if name not in func_cache:
                    # a tuned build is described by its workloads (see gnnperf.builds)
                    analysed = (lowered.unscheduled.get(name, func)
                                if lowered.build.kind == "tuned" else func)
                    func_cache[name] = kernel_statics(analysed, lowered.target, ms_features)
                statics = func_cache[name]
                flops, loops, msf, shash = (statics.flops, statics.loops,
                                            statics.ms_features, statics.struct_hash)
                missing = list(statics.missing)
                pattern = OP_PATTERNS.get(lowered.op_patterns.get(name, 8), "opaque")
                ops = ops_of(name)
            else:
                for arg in call.args:
                    spec = _arg_tensor(arg)
                    if spec is None:
                        continue
                    ins.append(spec)
                    if isinstance(arg, relax.Var) and arg in producer:
                        edges.append((producer[arg], index, tensor_bytes(*spec)))
                    elif isinstance(arg, relax.Var) and arg in params:
                        input_bytes += tensor_bytes(*spec)
                out_spec = _arg_tensor(binding.var)
                if out_spec is not None:
                    outs.append(out_spec)
                    producer[binding.var] = index
                flops, loops, msf, shash = 0.0, {}, [], name
                missing = []
                pattern = "injective"
                ops = [name.rsplit(".", 1)[-1]]
            nodes.append(
                KernelNode(
                    index=index,
                    name=name,
                    kind=kind,
                    ops=ops,
                    pattern=pattern,
                    struct_hash=shash,
                    in_shapes=[s for s, _ in ins],
                    in_dtypes=[d for _, d in ins],
                    out_shapes=[s for s, _ in outs],
                    out_dtypes=[d for _, d in outs],
                    flops=flops,
                    bytes_read=sum(tensor_bytes(*s) for s in ins),
                    bytes_written=sum(tensor_bytes(*s) for s in outs),
                    param_bytes=param_bytes,
                    input_bytes=input_bytes,
                    loops=dict(loops),
                    ms_features=list(msf),
                    missing=missing,
                    schedule_fallback=lowered.schedule_fallbacks.get(name, ""),
                )
            )
    return KernelGraph(
        nodes=nodes,
        edges=edges,
        target=dict(_target_dict(lowered.target)),
        build=str(lowered.build),
        inputs=dict(lowered.inputs),
    )


def _target_dict(target: tvm.target.Target) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": target.kind.name}
    for key in ("mcpu", "num-cores"):
        if key in target.attrs:
            val = target.attrs[key]
            out[key] = int(val) if isinstance(val, tirx.IntImm | int) else str(val)
    return out


# -- numeric encoding for the model ---------------------------------------------------------

OP_CLASSES = ("conv", "matmul", "pool", "reduce", "softmax", "norm", "elementwise",
              "concat", "layout", "gather", "builtin", "other")

LOOP_KEYS = ("n_blocks", "n_loops", "max_depth", "parallel_extent", "vector_lanes",
             "unroll_extent", "auto_unroll_max_step", "reduction_size", "spatial_size",
             "reduce_blocks")

PATTERN_NAMES = tuple(OP_PATTERNS.values())


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


def node_feature_names() -> list[str]:
    names = [f"op_{c}" for c in OP_CLASSES] + [f"pattern_{p}" for p in PATTERN_NAMES]
    names += ["log_flops", "log_bytes_read", "log_bytes_written", "log_param_bytes",
              "log_input_bytes", "log_intensity", "n_inputs", "n_outputs", "log_out_elems",
              "n_ops", "is_first", "is_last"]
    names += [f"loop_log_{k}" for k in LOOP_KEYS]
    names += [f"ms_{i}" for i in range(MS_FEATURE_DIM)]
    names += [f"missing_{a}" for a in ANALYSES] + ["schedule_fallback"]
    return names


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


# -- the unfused ONNX operator graph (for the NNLQP/DIPPM-style ablation) --------------------

#: ONNX op types → names the kernel-graph encoding understands (see :func:`op_class`).
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
    """One node per ONNX operator of a :func:`gnnperf.onnx_import.load_onnx` model.

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
