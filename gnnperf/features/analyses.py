"""Per-kernel static analyses of a scheduled PrimFunc: FLOPs, loop nest, MetaSchedule features.

An analysis that cannot run on a kernel (scans and kernels with opaque blocks defeat
TVM's schedule analyses) leaves its features at zero and is named in ``missing``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import tvm
from tvm import tirx

from gnnperf.features.cache import default_cache, target_key
from gnnperf.features.vocabulary import MS_FEATURE_DIM
from gnnperf.lowering.schedules import kernel_hash, tune_context


def _blocks_and_loops(func: tirx.PrimFunc) -> list[tuple[Any, list[tirx.For]]]:
    """Every block under the root block, with the loops between it and its enclosing block
    (what ``Schedule.get_loops`` returns), from one walk over the TIR: the schedule API
    costs ~6 ms a kernel in argument checks alone. Raises on a kernel without a root block
    (scans), as the schedule does."""
    from tvm.s_tir import SBlockRealize

    found: list[tuple[Any, list[tirx.For]]] = []
    has_root = False

    def walk(stmt: Any, loops: list[tirx.For], under_root: bool) -> None:
        nonlocal has_root
        if isinstance(stmt, SBlockRealize):
            block = stmt.block
            if under_root:
                found.append((block, loops))
            is_root = block.name_hint == "root"
            has_root |= is_root
            walk(block.body, [], under_root or is_root)
        elif isinstance(stmt, tirx.For):
            walk(stmt.body, [*loops, stmt], under_root)
        elif isinstance(stmt, tirx.SeqStmt):
            for part in stmt.seq:
                walk(part, loops, under_root)
        elif isinstance(stmt, tirx.IfThenElse):
            walk(stmt.then_case, loops, under_root)
            if stmt.else_case is not None:
                walk(stmt.else_case, loops, under_root)
        elif isinstance(getattr(stmt, "body", None), tirx.Stmt):
            walk(stmt.body, loops, under_root)

    walk(func.body, [], False)
    if not has_root:
        raise LookupError("the kernel has no root block")
    return found


def loop_features(func: tirx.PrimFunc) -> dict[str, float]:
    """Loop-nest and schedule figures of a (scheduled) PrimFunc."""
    seen_loops: dict[Any, Any] = {}
    max_depth = 0
    parallel = vector = 1
    unroll_product = 1
    auto_unroll = 0
    reduction = spatial = 1
    reduce_blocks = 0
    blocks = _blocks_and_loops(func)
    for block, loops in blocks:
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
        red = sp = 1
        for iv in block.iter_vars:
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


#: per target: a TuneContext and PerStoreFeature, built once (~5 ms each time otherwise)
_FEATURE_CONTEXTS: dict[str, tuple[Any, Any]] = {}


def ms_store_matrix(func: tirx.PrimFunc, target: tvm.target.Target) -> np.ndarray:
    """MetaSchedule's PerStoreFeature of a scheduled PrimFunc: one row per store, all of
    the extractor's columns (TVM's own cost model scores these rows one by one)."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.feature_extractor import PerStoreFeature
    from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate

    func = func.with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    key = target_key(target)
    if key not in _FEATURE_CONTEXTS:  # the extractor reads the target, not the context's mod
        _FEATURE_CONTEXTS[key] = (tune_context(mod, target, 1),
                                  PerStoreFeature(extract_workload=False))
    ctx, extractor = _FEATURE_CONTEXTS[key]
    cand = MeasureCandidate(Schedule(mod), ArgInfo.from_prim_func(func))
    return extractor.extract_from(ctx, [cand])[0].numpy()


def ms_store_features(func: tirx.PrimFunc, target: tvm.target.Target) -> list[float]:
    """PerStoreFeature averaged over stores: a fixed-width row for any kernel."""
    stores = ms_store_matrix(func, target)
    if stores.size == 0:
        return [0.0] * MS_FEATURE_DIM
    mean = stores.mean(axis=0)
    return [round(float(v), 4) for v in mean[:MS_FEATURE_DIM]]


def _estimate_flops(func: tirx.PrimFunc) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    return float(estimate_tir_flops(tvm.IRModule({"main": func})))


@dataclass
class KernelStatics:
    """What the static analyses say about one PrimFunc (shared by its calls)."""

    flops: float
    loops: dict[str, float]
    ms_features: list[float]
    struct_hash: str
    missing: list[str]

    def candidate_features(self) -> dict[str, Any]:
        """The analyses as a kernel record and a ``best-of`` kernel's candidate store them
        (no hash: the record's workload and the candidate's kernel have their own).
        Shallow, unlike ``asdict``: the lists are shared (read, never changed), and
        deep-copying 100,000 schedules' features took minutes."""
        return {"flops": self.flops, "loops": self.loops, "ms_features": self.ms_features,
                "missing": self.missing}


def kernel_statics(func: tirx.PrimFunc, target: tvm.target.Target,
                   ms_features: bool = True) -> KernelStatics:
    """Run every analysis of :data:`ANALYSES` on ``func``; one that fails is ``missing``.

    TVM's analyses raise on kernels they cannot parse (a scan such as ``cumsum`` or
    ``topk`` has no root block for the schedule to get); such a kernel still runs, so it
    still gets a node, with zeros and a flag instead of the figures. Results are kept in
    the feature cache (:mod:`gnnperf.features.cache`), so a kernel is analysed once.
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
