"""Build configurations: which schedule each fused kernel gets before code generation.

A build configuration is a recorded dimension of every graph and label, because
the same kernel runs 1 GFLOP/s as an unscheduled loop nest and 100 GFLOP/s when
tiled, vectorized and parallelized. Three are supported:

- ``default``: kernels as the Relax pipeline leaves them (serial loops);
- ``dlight``: TVM's dlight CPU rules (GEMV, Reduction) where they match;
- ``sampled:SEED``: one schedule per kernel drawn from MetaSchedule's CPU design
  space (multi-level tiling, parallel/vectorize/unroll, auto-inline) with its
  post-processors, without any measurement. The draw is seeded by SEED and the
  kernel's structural hash, so one kernel gets one schedule in every model;
- ``best-of:S``: each kernel gets the fastest of the S schedules measured for its
  workload on the hardware config (best of ``sampled:0`` .. ``sampled:S-1``, timed alone;
  S is stored with the kernel records), read from a MetaSchedule database built from the
  kernel dataset: MetaSchedule's ReplayTrace search at S trials per kernel (called
  ``tuned`` until 2026-11-28);
- ``tuned:N``: each kernel gets the fastest schedule MetaSchedule's evolutionary search
  found in N trials (:mod:`gnnperf.collect.kernels.tuning`), what TVM's
  ``static_shape_tuning`` gives a user at ``max_trials_per_task=N``.

Both searched builds take their database from the caller, as ``MetaScheduleApplyDatabase``
does; a kernel the database does not hold stays unscheduled, and says so. Features are
read from the scheduled TIR this pass returns, except under the searched builds: there
they are read from the unscheduled kernel, because a prediction for a model never tuned
has no tuned schedule to read (the estimator learns the searched time from the workload
itself).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import tvm
import tvm_ffi
from tvm import tirx

from gnnperf.errors import LoweringError, one_line
from gnnperf.lowering.build_config import BuildConfig


def kernel_hash(func: tirx.PrimFunc) -> int:
    """Structural hash of a PrimFunc, independent of its name in the module."""
    return int(tvm_ffi.structural_hash(func.without_attr("global_symbol"))) & 0x7FFFFFFFFFFFFFFF


def block_names(func: tirx.PrimFunc) -> tuple[str, ...]:
    """The names of ``func``'s blocks in program order. A trace finds its blocks by name,
    and the structural hash ignores names: two kernels equal but for their names (``lv8_sum``
    in one model, ``lv37_sum`` in another) share a hash and not a trace."""
    from tvm.s_tir import SBlockRealize

    names: list[str] = []
    stack: list[Any] = [func.body]
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, SBlockRealize):
            names.append(stmt.block.name_hint)
            stack.append(stmt.block.body)
        elif isinstance(stmt, tirx.SeqStmt):
            stack.extend(reversed(list(stmt.seq)))
        elif isinstance(stmt, tirx.IfThenElse):
            stack.extend(s for s in (stmt.else_case, stmt.then_case) if s is not None)
        elif isinstance(getattr(stmt, "body", None), tirx.Stmt):
            stack.append(stmt.body)
    return tuple(names)


def _primfuncs(mod: tvm.IRModule) -> list[tuple[Any, tirx.PrimFunc]]:
    return [(gv, f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]


def _dlight_schedule(func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc | None:
    """TVM's dlight CPU rules on one kernel (None: no rule matched, the kernel is as it was)."""
    from tvm.s_tir import dlight

    name = "main"
    with target:
        out = dlight.ApplyDefaultSchedule(dlight.cpu.GEMV(), dlight.cpu.Reduction())(
            tvm.IRModule({name: func.with_attr("global_symbol", name)}))[name]
    return out if out.attrs is not None and "tirx.is_scheduled" in out.attrs else None


_X86_INTRINSICS_LOADED = False


def _register_x86_intrinsics() -> None:
    """Register TVM's x86 tensor intrinsics without the rest of ``tensor_intrin``.

    On AVX-512 targets the llvm schedule rules look up the VNNI/AVX-512 dot-product
    intrinsics by name. Importing the ``tvm.s_tir.tensor_intrin`` package registers
    them but also every CUDA/ROCm/ARM intrinsic (about a minute per process), so only
    its ``x86.py`` file is loaded (about a second).
    """
    global _X86_INTRINSICS_LOADED
    if _X86_INTRINSICS_LOADED or "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    import tvm.s_tir

    name = "tvm.s_tir.tensor_intrin.x86"
    path = Path(tvm.s_tir.__path__[0]) / "tensor_intrin" / "x86.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoweringError(f"cannot load TVM's x86 tensor intrinsics from {path}")
    module = importlib.util.module_from_spec(spec)
    # known to the import system: a later import of the whole package (MetaSchedule's
    # TuneContext does one) takes this module instead of registering its intrinsics twice,
    # which TVM refuses
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _X86_INTRINSICS_LOADED = True


def _has_avx512(target: tvm.target.Target) -> bool:
    """Whether MetaSchedule picks its AVX-512/VNNI rules for ``target`` (which name x86
    tensor intrinsics); the plain llvm rules of AVX2 and older targets name none, so their
    processes skip the half second the registration takes (same schedules: checked on
    every zoo family at x86-64-v2 and v3)."""
    from tvm.target import codegen

    return bool(codegen.target_has_features("avx512f", target))


def build_candidate(mod: tvm.IRModule, target: tvm.target.Target, _params: Any) -> Any:
    """MetaSchedule's ``default_build`` of a tuning candidate, for ``LocalBuilder``'s worker
    processes, without its import of every tensor intrinsic: that import (about a minute)
    ran in each fresh worker of each build batch, most of a tuning's time on 2 cores.
    Only the x86 intrinsics the llvm rules can name are registered, on the targets whose
    rules name them."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    if target.kind.name == "llvm" and _has_avx512(target):
        _register_x86_intrinsics()
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def tune_context(func_mod: tvm.IRModule, target: tvm.target.Target, seed: int) -> Any:
    """A MetaSchedule TuneContext built through its FFI constructor.

    ``TuneContext.__init__`` imports ``tvm.s_tir.tensor_intrin`` (about a minute per
    process); the constructor is called directly and only the x86 intrinsics that the
    llvm rules can reference are registered.
    """
    if target.kind.name == "llvm" and _has_avx512(target):
        _register_x86_intrinsics()  # the only targets whose rules name them
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.logging import get_logger, get_logging_func
    from tvm.s_tir.meta_schedule.space_generator import SpaceGenerator

    ctx = ms.TuneContext.__new__(ms.TuneContext)
    ctx.__init_handle_by_constructor__(
        _ffi_api.TuneContext,
        func_mod,
        target,
        SpaceGenerator.create("post-order-apply"),
        ms.search_strategy.ReplayTrace(),
        "gnnperf",
        1,
        seed,
        get_logging_func(get_logger("gnnperf.lowering.schedules")),
    )
    _ffi_api.TuneContextInitialize(ctx)
    return ctx


def sample_traced_schedule(func: tirx.PrimFunc, target: tvm.target.Target, seed: int
                           ) -> Any | None:
    """Draw one post-processed schedule for ``func`` as a ``tvm.s_tir.Schedule`` (its
    ``trace`` is MetaSchedule's record of the decisions); None if the space is empty.

    The draw is seeded by ``seed`` and the kernel's structural hash, so the schedule of
    seed k is the one every ``sampled:k`` build gives this kernel.
    """
    rand_state = (kernel_hash(func) ^ (seed * 0x9E3779B1)) % (2**31 - 2) + 1
    func_mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    ctx = tune_context(func_mod, target, rand_state)
    spaces = ctx.generate_design_space()
    if not spaces:
        return None
    ctx.pre_tuning(max_trials=1, num_trials_per_iter=1, design_spaces=spaces)
    candidates = ctx.generate_measure_candidates()
    ctx.post_tuning()
    if not candidates:
        return None
    return candidates[0].sch


class Scheduled(NamedTuple):
    """A scheduled kernel and the MetaSchedule trace (JSON) that made it."""

    func: tirx.PrimFunc
    trace: list[Any]


def cached_sampled_schedule(func: tirx.PrimFunc, target: tvm.target.Target, seed: int
                            ) -> Scheduled | None:
    """:func:`sample_traced_schedule`, remembered in the feature cache by workload, block
    names (:func:`block_names`), seed and target: a kernel seen before is rebuilt by
    replaying its trace on a copy (~10 ms) instead of generating the design space and
    sampling it again (~30 ms). The replay makes the same PrimFunc
    (``tests/test_feature_cache.py`` checks it)."""
    from gnnperf.features.cache import default_cache, target_key

    cache = default_cache()
    names = hashlib.sha256("|".join(block_names(func)).encode()).hexdigest()[:16]
    key = f"{kernel_hash(func)}|{names}|{seed}|{target_key(target)}"
    hit = cache.get("schedule", key) if cache is not None else None
    if hit is not None:
        if hit["trace"] is None:
            return None
        return Scheduled(replay_trace(func, hit["trace"]), hit["trace"])
    sch = sample_traced_schedule(func, target, seed)
    out = None if sch is None else Scheduled(sch.mod["main"], trace_json(sch.trace))
    if cache is not None:
        cache.put("schedule", key, {"trace": None if out is None else out.trace})
    return out


def replay_trace(func: tirx.PrimFunc, trace: list[Any]) -> tirx.PrimFunc:
    """``func`` scheduled by a stored MetaSchedule trace (``Trace.as_json()`` form).

    The schedule works on a deep copy: a ``Schedule`` rewrites the TIR it is given in place,
    and ``func`` is still the model's unscheduled kernel (its workload id) to the caller.
    MetaSchedule deep-copies the same way (a JSON round trip, ~4 ms; ``ffi.DeepCopy`` would
    also copy the ``Op`` singletons, which then no longer compare equal)."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.schedule import Trace

    private = tvm.ir.load_json(tvm.ir.save_json(func))
    sch = Schedule(tvm.IRModule({"main": private.with_attr("global_symbol", "main")}))
    Trace.apply_json_to_schedule(trace, sch)
    return sch.mod["main"]


def sample_schedule(
    func: tirx.PrimFunc, target: tvm.target.Target, seed: int
) -> tirx.PrimFunc | None:
    """Draw one post-processed schedule for ``func``; None if the design space is empty."""
    sch = sample_traced_schedule(func, target, seed)
    return None if sch is None else sch.mod["main"]


class AppliedBuild(NamedTuple):
    """A fused module scheduled by a build, and what the scheduling left behind."""

    module: tvm.IRModule
    #: kernels left unscheduled because their schedule could not be made → why
    fallbacks: dict[str, str]
    #: kernel → MetaSchedule trace (``Trace.as_json()``) of the schedule it got, for the
    #: builds whose schedules MetaSchedule makes (``sampled:*``, ``best-of:S``, ``tuned:N``)
    traces: dict[str, list[Any]]


def _plain(value: Any) -> Any:
    """TVM containers and immediates (``IntImm`` indices inside a trace) as Python values."""
    if isinstance(value, str | bool | int | float) or value is None:
        return value
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    if isinstance(value, tirx.FloatImm):
        return float(value.value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value]


def trace_json(trace: Any) -> list[Any]:
    """A MetaSchedule trace (``Trace.as_json()``, post-processing kept) as plain JSON values,
    the form a ``TuningRecord`` stores it in."""
    return _plain(trace.as_json(remove_postproc=False))


def _schedule_each(mod: tvm.IRModule, schedule: Any, what: str) -> AppliedBuild:
    """``schedule(func)`` (a PrimFunc, or a ``Schedule`` or :class:`Scheduled` whose trace is
    kept) on every kernel;
    kernels it cannot schedule (scans, extern calls, opaque blocks, a rule's assertion)
    stay as they are, and why is returned per kernel."""
    updates = {}
    fallbacks: dict[str, str] = {}
    traces: dict[str, list[Any]] = {}
    for gv, func in _primfuncs(mod):
        try:
            scheduled = schedule(func)
        except Exception as exc:  # TVM raises its own error types from C++
            detail = type(exc).__name__ + (f": {one_line(exc, 200)}" if str(exc).strip() else "")
            fallbacks[gv.name_hint] = f"{what} failed: {detail}"
            continue
        if scheduled is None:
            continue
        if isinstance(scheduled, Scheduled):
            traces[gv.name_hint] = scheduled.trace
            scheduled = scheduled.func
        elif not isinstance(scheduled, tirx.PrimFunc):  # a Schedule: keep its decisions
            traces[gv.name_hint] = trace_json(scheduled.trace)
            scheduled = scheduled.mod["main"]
        updates[gv] = scheduled.with_attrs(
            {"global_symbol": gv.name_hint, "tirx.is_scheduled": True, **_kept_attrs(func)}
        )
    for gv, func in updates.items():
        mod[gv] = func
    return AppliedBuild(mod, fallbacks, traces)


def _kept_attrs(func: tirx.PrimFunc) -> dict[str, Any]:
    keep = ("op_pattern", "tirx.noalias")
    return {k: func.attrs[k] for k in keep if func.attrs is not None and k in func.attrs}


def _database_schedule(func: tirx.PrimFunc, target: tvm.target.Target, database: Any) -> Any:
    """The fastest schedule ``database`` holds for ``func``'s workload (MetaSchedule's own
    query, a ``Schedule`` with its trace); raises when it holds none, so the kernel is left
    as it was and flagged."""
    sch = database.query_schedule(
        tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target, "main")
    if sch is None:
        raise LookupError("no measured schedule for this workload")
    return sch


def apply_build(mod: tvm.IRModule, build: BuildConfig, target: tvm.target.Target,
                database: Any = None) -> AppliedBuild:
    """Schedule every PrimFunc of a fused module according to ``build``.

    Returns the module, per kernel left unscheduled because its schedule could not be
    made, why (a model TVM compiles must still get a graph and a prediction), and the
    MetaSchedule trace of each kernel's schedule where MetaSchedule made it.
    ``database`` (a MetaSchedule database: :func:`gnnperf.collect.kernels.tuned_database`
    for ``best-of``, :func:`gnnperf.collect.kernels.tuning_database` for ``tuned:N``) gives
    a searched build its schedules; without one it is lowered for prediction only (its
    kernels stay unscheduled).
    """
    if build.kind == "default":
        return AppliedBuild(mod, {}, {})
    if build.searched:
        if database is None:
            return AppliedBuild(mod, {}, {})
        return _schedule_each(mod, lambda f: _database_schedule(f, target, database),
                              str(build))
    if build.kind == "dlight":
        return _schedule_each(mod, lambda f: _dlight_schedule(f, target), "dlight")
    return _schedule_each(mod, lambda f: cached_sampled_schedule(f, target, build.seed),
                          "schedule sampling")
