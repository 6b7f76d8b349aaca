"""The distinct kernels of a lowered model, as MetaSchedule workloads."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tvm
from tvm import tirx

from gnnperf.errors import GnnperfError
from gnnperf.lowering.pipeline import LoweredModel, compile_to_files
from gnnperf.lowering.schedules import kernel_hash, sample_traced_schedule
from gnnperf.measure import MeasureSettings, MeasureWorker, make_inputs
from gnnperf.measure.local import capture_kernel_inputs
from gnnperf.zoo import ModelSpec

#: the stage of a workload that its model never runs as a kernel (not a failure)


@dataclass(frozen=True)
class KernelWorkload:
    """A fused kernel as fusion left it: what every schedule of it starts from.

    ``workload_id`` is the structural hash of the unscheduled PrimFunc (the name in
    its model left out), so one kernel shared by many models is one workload.
    """

    workload_id: str
    name: str
    func: tirx.PrimFunc

    def module(self) -> tvm.IRModule:
        """MetaSchedule's form of a workload: a module whose one function is ``main``."""
        return tvm.IRModule({"main": self.func.with_attr("global_symbol", "main")})


def workload_id(func: tirx.PrimFunc) -> str:
    return f"{kernel_hash(func):016x}"


def model_workloads(lowered: LoweredModel) -> list[KernelWorkload]:
    """The distinct workloads of a lowered model, in kernel order (first name kept)."""
    seen: dict[str, KernelWorkload] = {}
    for name, func in lowered.unscheduled.items():
        wid = workload_id(func)
        seen.setdefault(wid, KernelWorkload(wid, name, func))
    return list(seen.values())


def capture_inputs(spec: ModelSpec, lowered: LoweredModel, folder: Path, worker: MeasureWorker,
                   settings: MeasureSettings, compile_timeout_s: float | None = None
                   ) -> dict[str, Path]:
    """Compile ``spec``'s lowered model and run it once in ``worker``, saving each kernel's
    argument tensors under ``folder``: kernel name → its ``.npz``, the inputs its timings
    use, with the values the kernel sees inside the model.

    The compile gives up after ``compile_timeout_s`` (a ``LoweringError``): LLVM spends
    an hour on the sampled schedules of some audio front-ends (``tf-hubert``), and a
    collector must record that and move on."""
    lib = compile_to_files(lowered, folder / "model.so", timeout_s=compile_timeout_s)
    return capture_kernel_inputs(lib, make_inputs(dict(spec.inputs), seed=spec.seed),
                                 folder / "args", worker, settings)


@dataclass
class Candidate:
    """One schedule of a workload: its PrimFunc, trace, and the seeds that drew it."""

    func: tirx.PrimFunc
    trace: Any  # tvm.s_tir.schedule.Trace; empty for the unscheduled kernel
    seeds: list[int]

    @property
    def schedule(self) -> str:
        return "unscheduled" if not self.seeds else "sampled"


def candidates(workload: KernelWorkload, target: tvm.target.Target, schedules: int,
               unscheduled: bool = True) -> tuple[list[Candidate], dict[int, str]]:
    """The unscheduled kernel and the distinct schedules drawn by seeds ``0..schedules-1``
    (two seeds that draw the same program share a candidate), and per seed whose draw
    failed, why."""
    import tvm_ffi
    from tvm.s_tir.schedule import Trace

    out: list[Candidate] = []
    if unscheduled:
        out.append(Candidate(workload.module()["main"], Trace([], {}), []))
    by_hash: dict[int, Candidate] = {}
    failed: dict[int, str] = {}
    for seed in range(schedules):
        try:
            sch = sample_traced_schedule(workload.func, target, seed)
        except Exception as exc:  # TVM raises its own error types from C++
            failed[seed] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1:]}"
            continue
        if sch is None:
            failed[seed] = "empty design space"
            continue
        func = sch.mod["main"]
        h = int(tvm_ffi.structural_hash(func))
        if h in by_hash:
            by_hash[h].seeds.append(seed)
            continue
        by_hash[h] = Candidate(func, sch.trace, [seed])
        out.append(by_hash[h])
    return out, failed


#: seconds LLVM may take for all candidates of a workload, then for each one alone: a
#: schedule with a large unroll can keep code generation busy for many minutes
BATCH_COMPILE_TIMEOUT_S = 180.0
EACH_COMPILE_TIMEOUT_S = 45.0


def _compile_to(mod: tvm.IRModule, target: tvm.target.Target, path: str) -> None:
    tvm.compile(mod, target).export_library(path)


def _start_forked(mod: tvm.IRModule, target: tvm.target.Target, path: Path) -> Any:
    """Start compiling ``mod`` to ``path`` in a forked child (a code generation that runs
    away can then be stopped)."""
    import multiprocessing

    proc = multiprocessing.get_context("fork").Process(target=_compile_to,
                                                       args=(mod, target, str(path)))
    proc.start()
    return proc


def _finish_forked(proc: Any, mod: tvm.IRModule, target: tvm.target.Target, path: Path,
                   timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for a child of :func:`_start_forked`; False (and the child
    stopped) when it did not finish in time."""
    proc.join(max(0.0, timeout_s))
    if proc.is_alive():
        proc.kill()
        proc.join()
        return False
    if proc.exitcode != 0:  # compile here to raise the real error
        _compile_to(mod, target, str(path))
    return True


def _compile_forked(mod: tvm.IRModule, target: tvm.target.Target, path: Path,
                    timeout_s: float) -> bool:
    """Compile in a forked child; False when it did not finish within ``timeout_s``."""
    return _finish_forked(_start_forked(mod, target, path), mod, target, path, timeout_s)


class CandidateCompile:
    """The candidates of one workload compiled into one library at ``path`` (function
    ``cand{j}`` for candidate j), started at once in a forked child and waited for by
    :meth:`result`.

    Why two steps: code generation is single-threaded, so the collector starts the
    libraries of two workloads together on the two cores and waits for both before it
    times either (no compile runs while a kernel is timed)."""

    def __init__(self, cands: list[Candidate], target: tvm.target.Target, path: Path,
                 batch_timeout_s: float = BATCH_COMPILE_TIMEOUT_S,
                 each_timeout_s: float = EACH_COMPILE_TIMEOUT_S) -> None:
        self.cands, self.target, self.path = cands, target, path
        self.batch_timeout_s, self.each_timeout_s = batch_timeout_s, each_timeout_s
        self.started = time.perf_counter()
        self.proc = _start_forked(self._module(list(range(len(cands)))), target, path)

    def _module(self, indices: list[int]) -> tvm.IRModule:
        return tvm.IRModule({f"cand{j}": self.cands[j].func.with_attr("global_symbol",
                                                                        f"cand{j}")
                             for j in indices})

    def result(self) -> tuple[list[int], dict[int, str]]:
        """The indices compiled and, for candidates left out, why (raises when none
        compiles)."""
        everything = list(range(len(self.cands)))
        left = self.batch_timeout_s - (time.perf_counter() - self.started)
        if _finish_forked(self.proc, self._module(everything), self.target, self.path, left):
            return everything, {}
        kept, dropped = [], {}
        for j in everything:  # find the candidates code generation cannot finish
            if _compile_forked(self._module([j]), self.target,
                               self.path.with_suffix(f".{j}.so"), self.each_timeout_s):
                kept.append(j)
            else:
                dropped[j] = f"code generation took over {self.each_timeout_s:.0f} s"
        # each of them compiled in time alone, so together they get the sum of those limits
        if not kept or not _compile_forked(self._module(kept), self.target, self.path,
                                           self.each_timeout_s * len(kept)):
            raise GnnperfError("code generation of the candidates did not finish")
        return kept, dropped


def compile_candidates(cands: list[Candidate], target: tvm.target.Target, path: Path,
                       batch_timeout_s: float = BATCH_COMPILE_TIMEOUT_S,
                       each_timeout_s: float = EACH_COMPILE_TIMEOUT_S
                       ) -> tuple[list[int], dict[int, str]]:
    """Compile the candidates into one library at ``path`` (function ``cand{j}`` for
    candidate j); returns the indices compiled and, for candidates left out, why."""
    return CandidateCompile(cands, target, path, batch_timeout_s, each_timeout_s).result()
