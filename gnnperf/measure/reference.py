"""Reference kernels: the machine's state, timed beside every label (measurement v2).

On these VM guests another tenant slows the CPUs through two channels that move
independently: the sibling hardware thread (throughput-bound arithmetic slows, a
latency-bound chain does not) and the shared L3/DRAM (memory-bound code slows on its own
schedule). One generic probe cannot track both, so three fixed kernels are timed:

- ``gemm``: a 256×256×256 float32 matrix product with a tiled, vectorized, parallel
  schedule (compute-bound);
- ``stream``: ``c = 1.5·a + b`` over 2^24 floats, 192 MiB touched per call, far beyond
  any L3 seen here (memory-bound);
- ``chain``: 32 dependent additions on a 16-float vector, each its own kernel call
  (latency-bound: VM dispatch and call overhead).

They are compiled once per (CPU, ISA, cores) into one library, cached on disk, and
timed in rounds between the blocks of a model's timing samples, in a random order per
round (randomised interleaved trials, Abedi & Brecht, ICPE'17), so the label and the
machine state it was taken in are measured side by side (duet benchmarking, Bulej et
al., ICPE'20).
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnnperf.hardware.spec import REFERENCE_KERNELS, HardwareSpec, cache_dir

if TYPE_CHECKING:
    import tvm

#: Bump when a kernel or its schedule changes: cached libraries are rebuilt.
SUITE_VERSION = 1

GEMM_N = 256
STREAM_N = 1 << 24
CHAIN_LENGTH = 32
CHAIN_N = 16
#: calls averaged into one timed sample, so each sample lasts about a millisecond or more
CALLS_PER_SAMPLE = {"gemm": 4, "stream": 1, "chain": 200}


def _gemm_func() -> Any:
    from tvm import s_tir
    from tvm.script import tirx as T

    n = GEMM_N

    @T.prim_func(s_tir=True)
    def gemm(a: T.Buffer((n, n), "float32"), b: T.Buffer((n, n), "float32"),
             c: T.Buffer((n, n), "float32")) -> None:
        for i, j, k in T.grid(n, n, n):
            with T.sblock("c"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    c[vi, vj] = T.float32(0)
                c[vi, vj] = c[vi, vj] + a[vi, vk] * b[vk, vj]

    sch = s_tir.Schedule(gemm)
    block = sch.get_sblock("c")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(io, jo, ko, ki, ii, ji)
    sch.parallel(sch.fuse(io, jo))
    sch.vectorize(ji)
    sch.unroll(ii)
    init = sch.decompose_reduction(block, ko)
    sch.vectorize(sch.get_loops(init)[-1])
    return sch.mod["main"]


def _stream_func() -> Any:
    from tvm import s_tir
    from tvm.script import tirx as T

    n = STREAM_N

    @T.prim_func(s_tir=True)
    def stream(a: T.Buffer((n,), "float32"), b: T.Buffer((n,), "float32"),
               c: T.Buffer((n,), "float32")) -> None:
        for i in range(n):
            with T.sblock("c"):
                vi = T.axis.spatial(n, i)
                c[vi] = T.float32(1.5) * a[vi] + b[vi]

    sch = s_tir.Schedule(stream)
    (i,) = sch.get_loops(sch.get_sblock("c"))
    outer, inner = sch.split(i, [None, 4096])
    sch.parallel(outer)
    _, lanes = sch.split(inner, [None, 16])
    sch.vectorize(lanes)
    return sch.mod["main"]


def reference_module() -> tvm.IRModule:
    """One Relax module with a function per reference kernel."""
    from tvm import relax

    f32 = "float32"
    bb = relax.BlockBuilder()
    scheduled = {"gemm": _gemm_func(), "stream": _stream_func()}
    for name, func in scheduled.items():
        func = func.with_attrs({"global_symbol": f"{name}_kernel", "tirx.is_scheduled": True})
        gv = bb.add_func(func, f"{name}_kernel")
        shape = (GEMM_N, GEMM_N) if name == "gemm" else (STREAM_N,)
        a, b = (relax.Var(v, relax.TensorType(shape, f32)) for v in ("a", "b"))
        with bb.function(name, [a, b]):
            out = bb.emit(relax.call_tir(gv, [a, b], relax.TensorType(shape, f32)))
            bb.emit_func_output(out)
    x = relax.Var("x", relax.TensorType((CHAIN_N,), f32))
    with bb.function("chain", [x]):
        y: Any = x
        for _ in range(CHAIN_LENGTH):
            y = bb.emit(relax.op.add(y, relax.const(1.0, f32)))
        bb.emit_func_output(y)
    return bb.get()


def reference_library(hw: HardwareSpec) -> Path:
    """The compiled suite for ``hw``'s CPU, ISA and cores, built once and cached.

    ``tvm.compile`` with its generic pipeline is used on purpose: it does not fuse, so
    the chain stays 32 separate kernel calls.
    """
    path = (cache_dir() / "reference"
            / f"v{SUITE_VERSION}-{hw.cpu_id}-{hw.isa}-{hw.cores}c.so")
    if path.is_file():
        return path
    import tvm

    from gnnperf.lowering.pipeline import export_executable

    return export_executable(tvm.compile(reference_module(), hw.target()), path)


def _inputs() -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(0)

    def floats(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype("float32")

    return {"gemm": [floats(GEMM_N, GEMM_N), floats(GEMM_N, GEMM_N)],
            "stream": [floats(STREAM_N), floats(STREAM_N)],
            "chain": [floats(CHAIN_N)]}


class ReferenceSuite:
    """The compiled suite loaded in a measurement worker, ready to time a round."""

    def __init__(self, library: str | os.PathLike[str], seed: int | None = None) -> None:
        import tvm
        from tvm import relax

        dev = tvm.cpu()
        self._vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), dev)
        self._args = {name: [tvm.runtime.tensor(a, dev) for a in arrays]
                      for name, arrays in _inputs().items()}
        self._timers = {name: self._vm.time_evaluator(name, dev, number=CALLS_PER_SAMPLE[name],
                                                      repeat=1)
                        for name in REFERENCE_KERNELS}
        self._rng = random.Random(seed)
        for _ in range(2):  # warm-up: the first calls page the buffers in
            for name in REFERENCE_KERNELS:
                self._vm[name](*self._args[name])

    def round(self) -> dict[str, float]:
        """One sample (ms per call) of each kernel, in a fresh random order."""
        order = list(REFERENCE_KERNELS)
        self._rng.shuffle(order)
        return {name: float(self._timers[name](*self._args[name]).results[0]) * 1e3
                for name in order}


def summarise(rounds: Sequence[Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per kernel: median, samples and CV over the rounds of one measurement."""
    out: dict[str, dict[str, Any]] = {}
    for name in REFERENCE_KERNELS:
        samples = np.array([r[name] for r in rounds if name in r], dtype=np.float64)
        if samples.size == 0:
            continue
        out[name] = {"median_ms": round(float(np.median(samples)), 6),
                     "samples_ms": [round(float(v), 6) for v in samples],
                     "cv": round(float(samples.std() / samples.mean()), 5)}
    return out


def machine_state(line: Mapping[str, Any]) -> float | None:
    """Geometric mean (ms) of the reference kernels timed beside a v2 label; None for v1."""
    reference = line.get("reference")
    if not reference:
        return None
    medians = [float(reference[k]["median_ms"]) for k in REFERENCE_KERNELS if k in reference]
    return float(np.exp(np.mean(np.log(medians)))) if medians else None


def aa_floor(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], label: str
             ) -> dict[str, Any]:
    """The A/A noise floor of (first, second) measurements of the same thing: MAPE (%) and
    median error of ``line[label]["median_ms"]`` (``whole`` for model labels, ``latency``
    for kernel timings), raw and normalised by each side's :func:`machine_state`; only
    pairs with the machine state on both sides count in the normalised figure."""
    raw, normalised = [], []
    for first, second in pairs:
        ratio = float(second[label]["median_ms"]) / float(first[label]["median_ms"])
        raw.append(abs(ratio - 1.0))
        before, after = machine_state(first), machine_state(second)
        if before is not None and after is not None:
            normalised.append(abs(ratio * before / after - 1.0))
    return {"pairs": len(raw),
            "mape": float(np.mean(raw) * 100) if raw else None,
            "mape_median": float(np.median(raw) * 100) if raw else None,
            "pairs_normalised": len(normalised),
            "mape_normalised": float(np.mean(normalised) * 100) if normalised else None}
