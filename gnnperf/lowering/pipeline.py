"""Lowering: Relax module → the fused, scheduled kernels that really run → executable.

The stages are TVM's own CPU pipeline (library dispatch, legalize, FuseOps,
FuseTIR, dataflow lowering, memory planning, VM lowering), split so that the
build configuration is applied to the fused kernels in between. Constant folding
compiles its evaluators in batches (:mod:`gnnperf.lowering.constant_folding`): same module, a
fraction of the time. The module
returned by :func:`lower` is exactly the one :func:`compile_lowered` compiles,
and the one the kernel graph is read from: no second module is ever described.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
import tvm
from tvm import relax, tirx

from gnnperf.atomic import atomic_path
from gnnperf.errors import LoweringError, one_line
from gnnperf.hardware.spec import HardwareSpec, available_cores
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.lowering.constant_folding import with_batched_folding
from gnnperf.lowering.schedules import apply_build


def _backend(target: tvm.target.Target) -> Any:
    """The Relax backend whose pass lists match ``target`` (CPU today, GPU later)."""
    kind = target.kind.name
    if kind == "llvm":
        from tvm.relax.backend.cpu_generic import pipeline

        return pipeline
    if kind == "cuda":
        from tvm.relax.backend.cuda import pipeline

        return pipeline
    raise LoweringError(f"no lowering backend for target kind '{kind}'")


@dataclass
class LoweredModel:
    """A model lowered for one (target, build): the final module plus what we learned."""

    module: tvm.IRModule
    target: tvm.target.Target
    build: BuildConfig
    inputs: dict[str, tuple[tuple[int, ...], str]]
    op_patterns: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    #: kernels the build could not schedule and left as they were → why
    schedule_fallbacks: dict[str, str] = field(default_factory=dict)
    #: each kernel as fusion left it, before the build scheduled it: its workload
    unscheduled: dict[str, tirx.PrimFunc] = field(default_factory=dict)
    #: kernel → MetaSchedule trace JSON of its schedule (sampled and searched builds)
    traces: dict[str, list[Any]] = field(default_factory=dict)

    def primfuncs(self) -> dict[str, tirx.PrimFunc]:
        return {
            gv.name_hint: f
            for gv, f in self.module.functions.items()
            if isinstance(f, tirx.PrimFunc)
        }


def _main_inputs(mod: tvm.IRModule) -> dict[str, tuple[tuple[int, ...], str]]:
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for param in mod["main"].params:
        ty = param.ty
        shape = tuple(int(d) for d in ty.shape.values)
        out[param.name] = (shape, str(ty.dtype))
    return out


def _op_patterns(mod: tvm.IRModule) -> dict[str, int]:
    """Op pattern kind per fused kernel (FuseTIR drops the attribute, so annotate again)."""
    annotated = relax.transform.AnnotateTIROpPattern()(mod)
    patterns: dict[str, int] = {}
    for gv, func in annotated.functions.items():
        if isinstance(func, tirx.PrimFunc):
            attrs = func.attrs
            patterns[gv.name_hint] = (
                int(attrs["op_pattern"]) if attrs is not None and "op_pattern" in attrs else 8
            )
    return patterns


def _as_target(target: HardwareSpec | tvm.target.Target | Mapping[str, Any]
               ) -> tvm.target.Target:
    """A TVM target; CPU targets get ``num-cores`` (MetaSchedule's rules require it)."""
    if isinstance(target, HardwareSpec):
        return target.target()
    if isinstance(target, tvm.target.Target):
        if target.kind.name != "llvm" or "num-cores" in target.attrs:
            return target
        target = dict(target.export())
    spec = dict(target)
    if spec.get("kind") == "llvm":
        spec.setdefault("num-cores", available_cores())
    return tvm.target.Target(spec)


def lower(
    mod: tvm.IRModule,
    target: HardwareSpec | tvm.target.Target | Mapping[str, Any],
    build: BuildConfig | str = "default",
    database: Any = None,
) -> LoweredModel:
    """Run TVM's pipeline for ``target`` on an imported Relax module, scheduling per ``build``
    (``database``: the MetaSchedule database of a searched build, ``best-of`` or ``tuned``)."""
    target = _as_target(target)
    build = BuildConfig.parse(build)
    backend = _backend(target)
    inputs = _main_inputs(mod)
    timings: dict[str, float] = {}
    try:
        with target:
            start = time.perf_counter()
            fused = tvm.transform.Sequential(
                backend.library_dispatch_passes(target)
                + with_batched_folding(backend.legalize_passes(target))
            )(mod)
            timings["fuse_s"] = time.perf_counter() - start
            patterns = _op_patterns(fused)
            # taken before scheduling, which replaces the module's functions in place
            unscheduled = {gv.name_hint: f for gv, f in fused.functions.items()
                           if isinstance(f, tirx.PrimFunc)}
            start = time.perf_counter()
            scheduled, fallbacks, traces = apply_build(fused, build, target, database)
            timings["schedule_s"] = time.perf_counter() - start
            start = time.perf_counter()
            final = tvm.transform.Sequential(
                backend.dataflow_lower_passes(target) + backend.finalize_passes(target)
            )(scheduled)
            timings["finalize_s"] = time.perf_counter() - start
    except LoweringError:
        raise
    except Exception as exc:  # TVM raises C++-side errors of many types
        raise LoweringError(f"lowering for {target.kind.name} failed: {one_line(exc)}") from exc
    return LoweredModel(final, target, build, inputs, patterns, timings, fallbacks, unscheduled,
                        traces)


def lower_onnx(
    source: str | os.PathLike[str] | onnx.ModelProto,
    target: HardwareSpec | tvm.target.Target | Mapping[str, Any],
    build: BuildConfig | str = "default",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    database: Any = None,
) -> LoweredModel:
    """Load, check and fold an ONNX model, import it into Relax and lower it."""
    from gnnperf.frontend import import_to_relax, load_onnx

    start = time.perf_counter()
    model = load_onnx(source, input_shapes)
    mod = import_to_relax(model)
    import_s = time.perf_counter() - start
    lowered = lower(mod, target, build, database)
    lowered.timings["import_s"] = import_s
    return lowered


def compile_lowered(lowered: LoweredModel) -> relax.Executable:
    """Compile exactly the lowered module (no further Relax passes)."""
    start = time.perf_counter()
    try:
        ex = tvm.compile(lowered.module, lowered.target, relax_pipeline=None)
    except Exception as exc:
        raise LoweringError(f"compilation failed: {one_line(exc)}") from exc
    lowered.timings["compile_s"] = time.perf_counter() - start
    return ex


def _export_atomic(module: Any, path: str | os.PathLike[str]) -> Path:
    with atomic_path(path) as tmp:
        # export_library picks the toolchain from the suffix, so give it a .so name
        so = tmp.with_suffix(".so")
        try:
            module.export_library(str(so))
            os.replace(so, tmp)
        finally:
            if so.exists():
                so.unlink()
    return Path(path)


def export_executable(ex: relax.Executable, path: str | os.PathLike[str]) -> Path:
    """Write the compiled VM library atomically (temp file in the same folder, then rename)."""
    return _export_atomic(ex, path)


def export_kernel_library(ex: relax.Executable, path: str | os.PathLike[str]) -> Path:
    """Write the kernels alone as a shared library.

    A VM library loaded through RPC does not expose its imported kernel module, so
    per-kernel timing on a remote board needs the kernels as a library of their own.
    """
    return _export_atomic(ex.mod.imports[0], path)


def _compile_and_write(lowered: LoweredModel, lib: Path, kernels: Path | None) -> Path:
    ex = compile_lowered(lowered)
    if kernels is not None:
        export_kernel_library(ex, kernels)
    return export_executable(ex, lib)


def _compile_into(lowered: LoweredModel, lib: Path, kernels: Path | None, error: Path) -> None:
    """The child's part of :func:`compile_to_files`: compile, write, or say why not."""
    try:
        _compile_and_write(lowered, lib, kernels)
    except Exception as exc:  # noqa: BLE001  (the parent turns it into a LoweringError)
        error.write_text(one_line(exc))
        os._exit(1)
    os._exit(0)


def compile_to_files(lowered: LoweredModel, lib: str | os.PathLike[str],
                     kernels: str | os.PathLike[str] | None = None,
                     timeout_s: float | None = None) -> Path:
    """Compile ``lowered`` and write its VM library to ``lib`` (and the kernels alone to
    ``kernels``), giving up after ``timeout_s``.

    LLVM can spend an hour on one schedule that unrolls a large loop nest (a sampled
    ``tf-hubert`` front-end did), and a collector must record that and move on: with a
    timeout the compiler runs in a forked child, killed when the time is up."""
    lib_path = Path(lib)
    kernels_path = Path(kernels) if kernels is not None else None
    if timeout_s is None:
        return _compile_and_write(lowered, lib_path, kernels_path)
    import multiprocessing

    error = lib_path.with_name(lib_path.name + ".error")
    error.unlink(missing_ok=True)
    start = time.perf_counter()
    child = multiprocessing.get_context("fork").Process(
        target=_compile_into, args=(lowered, lib_path, kernels_path, error), daemon=True)
    child.start()
    child.join(timeout_s)
    if child.is_alive():
        child.kill()
        child.join()
        raise LoweringError(f"compilation took longer than {timeout_s:g} s (killed)")
    if child.exitcode != 0:
        why = error.read_text() if error.exists() else f"exit code {child.exitcode}"
        raise LoweringError(f"compilation failed: {why}")
    lowered.timings["compile_s"] = time.perf_counter() - start
    return lib_path
