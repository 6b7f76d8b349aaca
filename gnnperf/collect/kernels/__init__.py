"""The kernel dataset: many measured schedules per fused kernel, in MetaSchedule's format.

Whole-model labels give each kernel one schedule; learning what a schedule does to a
kernel needs many (TenSet, TLP). For every distinct kernel of the zoo (a *workload*:
the unscheduled PrimFunc, identified by its structural hash) the collector times the
unscheduled kernel and S schedules drawn from MetaSchedule's CPU design space, each
alone, on the tensors the kernel sees inside its model, under measurement v2.

Records are MetaSchedule's own: a workload (``Workload.as_json``) and, per schedule,
a tuning record (``TuningRecord.as_json``: trace, run seconds, target, argument
info), with the hardware, the machine state and the latency statistics beside them,
in crash-safe shards under ``DIR/kernels``. :func:`export_database` writes a
``JSONDatabase`` that ``relax.transform.MetaScheduleApplyDatabase`` applies.

- :mod:`.workloads`: the distinct kernels of a lowered model, as MetaSchedule workloads;
- :mod:`.collector`: sample, compile, time and store (resumable);
- :mod:`.ordering`: which model to visit next when ``best-of`` records are the goal;
- :mod:`.progress`: what a collector resumes from, read from the shards in one pass;
- :mod:`.database`: read the shards back, export a MetaSchedule database, statistics;
- :mod:`.noise`: the A/A re-measurements behind the kernel-time noise floor;
- :mod:`.tuning_run`: a stored tuning run and the budgets it holds (no TVM);
- :mod:`.tuning`: one workload tuned by MetaSchedule's evolutionary search (``tuned:N``);
- :mod:`.tuning_collector`: every workload of the given models tuned, stored (resumable).

The names below load their module on first use (PEP 562), so reading the shards back
(:mod:`.database`, :mod:`.tuning_run`) does not import TVM through this package.
"""

from __future__ import annotations

import importlib
from typing import Any

#: each public name and the module that defines it
_HOMES = {
    "KernelCollector": "collector", "collect_kernels": "collector",
    "export_database": "database", "kernel_noise_floor_by_cpu": "database",
    "kernel_records": "database", "kernel_stats": "database", "tuned_database": "database",
    "tuned_databases": "database", "tuning_database": "database", "tuning_runs": "database",
    "tuning_stats": "database",
    "remeasure_kernels": "noise",
    "TuningRun": "tuning_run",
    "tune_workload": "tuning",
    "TuningCollector": "tuning_collector", "collect_tuning": "tuning_collector",
    "KernelWorkload": "workloads", "model_workloads": "workloads",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
