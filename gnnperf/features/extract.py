"""The kernel graph read from the final lowered module (see :mod:`gnnperf.features`)."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import relax, tirx

from gnnperf.features.analyses import KernelStatics, kernel_statics
from gnnperf.features.graph import KernelGraph, KernelNode, ops_of, tensor_bytes
from gnnperf.features.vocabulary import OP_PATTERNS
from gnnperf.lowering.pipeline import LoweredModel

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
                    # a searched build is described by its workloads (see
                    # gnnperf.lowering.schedules)
                    analysed = (lowered.unscheduled.get(name, func)
                                if lowered.build.searched else func)
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
                    # a searched build is described by its workloads, whose trace is empty
                    schedule_trace=(lowered.traces.get(name) if not lowered.build.searched
                                    else None),
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
