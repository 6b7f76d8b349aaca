"""The distinct kernels of a lowered model, as MetaSchedule workloads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from ..builds import kernel_hash, sample_traced_schedule
from ..lowering import LoweredModel

#: the stage of a workload that its model never runs as a kernel (not a failure)
NOT_EXECUTED = "not-executed"


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
