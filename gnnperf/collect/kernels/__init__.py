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
- :mod:`.tuning`: one workload tuned by MetaSchedule's evolutionary search (``tuned:N``);
- :mod:`.tuning_collector`: every workload of the given models tuned, stored (resumable).
"""

from __future__ import annotations

from gnnperf.collect.kernels.collector import KernelCollector, collect_kernels
from gnnperf.collect.kernels.database import (
           export_database,
           kernel_noise_floor_by_cpu,
           kernel_records,
           kernel_stats,
           tuned_database,
           tuned_databases,
           tuning_database,
           tuning_runs,
           tuning_stats,
)
from gnnperf.collect.kernels.noise import remeasure_kernels
from gnnperf.collect.kernels.tuning import TuningRun, tune_workload
from gnnperf.collect.kernels.tuning_collector import TuningCollector, collect_tuning
from gnnperf.collect.kernels.workloads import KernelWorkload, model_workloads

__all__ = ["KernelCollector", "KernelWorkload", "TuningCollector", "TuningRun",
           "collect_kernels", "collect_tuning", "export_database", "kernel_noise_floor_by_cpu",
           "kernel_records", "kernel_stats", "model_workloads", "remeasure_kernels",
           "tune_workload", "tuned_database", "tuned_databases", "tuning_database",
           "tuning_runs", "tuning_stats"]
