"""Per-kernel static analyses of a scheduled PrimFunc: FLOPs, loop nest, MetaSchedule features.

An analysis that cannot run on a kernel (scans and kernels with opaque blocks defeat
TVM's schedule analyses) leaves its features at zero and is named in ``missing``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import tvm
from tvm import tirx

from ..builds import kernel_hash, tune_context
from ..feature_cache import default_cache, target_key

#: Length of MetaSchedule's PerStoreFeature vector (buffers_per_store=5).
MS_FEATURE_DIM = 164


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
    struct_hash = f"{kernel_hash(func):016x}"
    key = f"{struct_hash}|{target_key(target)}|{int(ms_features)}"
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
    statics = KernelStatics(flops, loops, msf, struct_hash, missing)
    if cache is not None:
        cache.put("kernel", key, asdict(statics))
    return statics
