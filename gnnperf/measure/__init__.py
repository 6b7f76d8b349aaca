"""Measurement: whole-model and per-kernel latency of a compiled model, locally or over RPC.

Method (what every label in the dataset means):

- **Threads.** TVM sizes its thread pool once, at runtime start-up, from
  ``TVM_NUM_THREADS``; ``config_threadpool`` can only lower it. So each thread
  count gets its own long-lived worker process started with that variable set,
  and the compiled library is handed to it as a file.
- **Whole model.** ``warmup`` untimed runs, then ``VirtualMachine.time_evaluator``
  with ``repeat`` samples of at least ``min_repeat_ms`` each; the label is the
  median sample, stored with all samples, CV and IQR.
- **Per kernel.** One instrumented VM run captures the real argument tensors of
  every kernel call (kernels calling ``erf``/``exp`` run at value-dependent speed,
  so random inputs would mislead); then each PrimFunc is timed in the compiled
  library on its captured arguments with ``time_evaluator`` (no recompile).
  Data-moving builtins (``vm.builtin.reshape``) are timed as packed-function calls.
- **Quiet machine.** Before measuring, wait until other processes use less than
  ``max_other_load`` of the CPUs; during measuring, record their load; re-measure
  when the spread (CV) or the load is too high, keeping the best attempt.
- **Quiet host.** A VM's CPUs slow down 1.3-2x for seconds at a time when the host
  is busy, which no load figure inside the guest shows. A :class:`SpeedProbe`
  times a fixed workload on each CPU before and after every timing. A timing starts
  once the probe runs at most ``max_slowdown`` times slower than its best (polled,
  up to ``slow_wait_s``) and is repeated when the probe after it is slow; the least
  disturbed try is kept and its slowdown stored. One-thread workers pin themselves to
  the quieter CPU for each timing.
- **Machine state (v2).** Three reference kernels (compute-, memory- and latency-bound,
  :mod:`gnnperf.measure.reference`) are timed in rounds of random order between blocks
  of the model's samples, and their medians are stored with the label.
- **Remote.** The same library is uploaded to a TVM RPC server found through a
  tracker (``HOST:PORT:KEY``); the server's own ``TVM_NUM_THREADS`` sets threads.
"""

from __future__ import annotations

from gnnperf.measure.guard import (
    LoadProbe,
    SpeedProbe,
    other_load,
    timed_on_quiet_host,
    wait_for_quiet,
    wait_for_quiet_host,
)
from gnnperf.measure.local import measure_library, measure_reference, with_reference_figures
from gnnperf.measure.reference import REFERENCE_KERNELS, ReferenceSuite, reference_library
from gnnperf.measure.remote import measure_remote, parse_rpc
from gnnperf.measure.results import KernelTiming, LatencyStats, Measurement, MeasureSettings
from gnnperf.measure.timing import (
    capture_kernel_calls,
    make_inputs,
    time_kernel_calls,
    time_whole_model,
)
from gnnperf.measure.worker import MeasureWorker, WorkerPool

__all__ = [
    "REFERENCE_KERNELS",
    "KernelTiming",
    "LatencyStats",
    "LoadProbe",
    "MeasureSettings",
    "MeasureWorker",
    "Measurement",
    "ReferenceSuite",
    "SpeedProbe",
    "capture_kernel_calls",
    "make_inputs",
    "measure_library",
    "measure_reference",
    "measure_remote",
    "other_load",
    "parse_rpc",
    "reference_library",
    "time_kernel_calls",
    "time_whole_model",
    "timed_on_quiet_host",
    "wait_for_quiet",
    "wait_for_quiet_host",
    "WorkerPool",
    "with_reference_figures",
]
