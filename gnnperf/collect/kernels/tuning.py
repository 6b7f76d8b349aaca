"""A workload tuned as a TVM user tunes it: MetaSchedule's evolutionary search at a budget.

What a ``tuned:N`` label stands for (issue 47): TVM's documented flow,
``relax.get_pipeline("static_shape_tuning", target, total_trials=..., max_trials_per_task=N)``,
tunes every task of a
model with ``MetaScheduleTuneIRMod`` (the evolutionary strategy guided by the XGBoost cost
model, 64 trials per iteration, the gradient task scheduler) and then applies the fastest
record of each with ``MetaScheduleApplyDatabase``. Here each workload is tuned alone, with
the same strategy, cost model and trials, once per (CPU, threads, budget): a workload that
many models share is tuned once, and a model's ``tuned:N`` build is composed from its
workloads' databases. Two differences from the flow, both stated where the figures are: the
seed is given (the flow draws one), and the cost model learns from one task's trials rather
than from every task of the model. A seed does not make a run repeatable: the search
mutates candidates on several threads, and two runs with one seed measured different
candidates (``tests/test_tuning.py``, 2026-11-28).

The result keeps MetaSchedule's own records in trial order (``TuningRecord.as_json``), so
the best-so-far curve comes for free, and one run also gives the budgets that are whole
search iterations of it: ``tuned:64`` is the best of the first 64 trials of a 256-trial run,
the same search stopped after its first iteration. A budget inside an iteration is not (an
iteration measures the cost model's picks first and its random ones last), so
:meth:`~.tuning_run.TuningRun.database` refuses it. A larger budget extends a stored run
(``extend``): its records go into the search's database first, where the evolutionary
search draws its initial population from the best of them, and only the trials beyond
them are measured.

A run is stored as one ``kernel_tuning`` line of the kernel dataset
(:meth:`~.tuning_run.TuningRun.to_line`), read back by
:meth:`~.tuning_run.TuningRun.from_line`; that record type and the budgets a run holds
live in :mod:`.tuning_run`, which does not import TVM.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.collect.kernels.tuning_run import (
    RUNNER_MIN_REPEAT_MS,
    RUNNER_NUMBER,
    RUNNER_REPEAT,
    TRIALS_PER_ITERATION,
    TuningRun,
)
from gnnperf.collect.kernels.workloads import KernelWorkload
from gnnperf.errors import GnnperfError, one_line
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.schedules import build_candidate


@contextmanager
def _seeded_numpy(seed: int) -> Iterator[None]:
    """NumPy's global generator seeded for the search and restored after: until it holds
    enough measurements, MetaSchedule's XGBoost cost model scores candidates with
    ``np.random.uniform``, so the seed alone would not fix which candidates it measures."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


@contextmanager
def _threads(threads: int) -> Iterator[None]:
    """``TVM_NUM_THREADS`` for the runner's worker processes, which read it when they start
    (they inherit this process's environment)."""
    before = os.environ.get("TVM_NUM_THREADS")
    os.environ["TVM_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TVM_NUM_THREADS", None)
        else:
            os.environ["TVM_NUM_THREADS"] = before


def _run_ms(record: Any) -> float:
    secs = [float(s) for s in (record.run_secs or [])]
    return sum(secs) / len(secs) * 1e3 if secs and all(s < 1e9 for s in secs) else math.inf


def _search_module(workload: KernelWorkload) -> Any:
    """The workload as MetaSchedule's search commits it to its database (``TuneContext``
    marks a task's function ``tirx.noalias``): records preloaded for an extension must
    belong to that workload, or the search would not see them."""
    import tvm

    func = workload.func.with_attr("global_symbol", "main").with_attr("tirx.noalias", True)
    return tvm.IRModule({"main": func})


def tune_workload(workload: KernelWorkload, hw: HardwareSpec, trials: int, *, seed: int = 0,
                  work_dir: str | os.PathLike[str] | None = None,
                  extend: TuningRun | None = None) -> TuningRun:
    """Tune ``workload`` for ``hw`` (its ISA, and its thread count at run time) with
    ``trials`` trials of MetaSchedule's evolutionary search, as ``static_shape_tuning`` does.

    With ``extend`` (a stored run of this workload and hardware, of whole iterations and
    fewer trials), its trials are the first ones: they seed the search's database and only
    ``trials - extend.trials`` more are measured. The candidates are built and timed here,
    so ``hw`` must be this machine (a spec of another CPU would file local timings under
    its id). Raises :class:`GnnperfError` for a budget below 1, another machine's spec, a
    run that cannot be extended, and a workload MetaSchedule cannot tune.
    """
    if trials < 1:
        raise GnnperfError(f"a tuning budget must be at least 1 trial, got {trials}")
    if extend is not None:
        if (extend.workload_id, extend.hw_id) != (workload.workload_id, hw.record_hw_id):
            raise GnnperfError(f"run {extend.key} is not of workload {workload.workload_id} "
                               f"on {hw.record_hw_id}")
        if extend.trials >= trials or extend.trials % TRIALS_PER_ITERATION:
            raise GnnperfError(f"a {extend.trials}-trial run extends to more trials only from "
                               f"whole search iterations ({TRIALS_PER_ITERATION} trials each);"
                               f" asked for {trials}")
    here = HardwareSpec.local(hw.isa, hw.threads, measure=False)
    if here.cpu_id != hw.cpu_id:
        raise GnnperfError(f"tuning times candidates on this machine ({here.cpu_id}), not on "
                           f"{hw.cpu_id}")
    from tvm.s_tir import meta_schedule as ms

    # tune_tir makes MetaSchedule's logger log every trial to standard output
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    start = time.monotonic()
    # MetaSchedule's logs and its own database files go to work_dir, or nowhere kept
    scratch = (nullcontext(str(work_dir)) if work_dir is not None
               else tempfile.TemporaryDirectory(prefix="gnnperf-tune-"))
    with scratch as where, _threads(hw.threads), _seeded_numpy(seed):
        folder = Path(where)
        database = ms.database.MemoryDatabase()
        done = 0
        if extend is not None:
            searched = database.commit_workload(_search_module(workload))
            for record in extend.records:
                database.commit_tuning_record(
                    ms.database.TuningRecord.from_json(record, searched))
            done = len(extend.records)
        runner = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(
            number=RUNNER_NUMBER, repeat=RUNNER_REPEAT, min_repeat_ms=RUNNER_MIN_REPEAT_MS))
        builder = ms.builder.LocalBuilder(f_build=build_candidate, max_workers=hw.cores)
        try:
            more = trials - done
            ms.tune_tir(workload.module(), hw.target(), str(folder), max_trials_global=more,
                        max_trials_per_task=more,
                        num_trials_per_iter=min(more, TRIALS_PER_ITERATION),
                        builder=builder, runner=runner, database=database, cost_model="xgb",
                        strategy="evolutionary", seed=seed, num_tuning_cores=hw.cores)
        except Exception as exc:  # TVM raises its own error types from C++
            raise GnnperfError(f"tuning workload {workload.workload_id} failed: "
                               f"{one_line(exc, 300)}") from None
        records = list(database.get_all_tuning_records())
    if not records:
        raise GnnperfError(f"tuning workload {workload.workload_id} measured no candidate")
    # the workload as given, not as tune_tir normalised it (it adds ``tirx.noalias``): a
    # build queries the database with the module it lowered
    stored = ms.database.MemoryDatabase().commit_workload(workload.module())
    # the database keeps records in the order they were committed: the extended run's
    # first, then this search's, each in the order it measured them
    return TuningRun(
        workload_id=workload.workload_id, hw_id=hw.record_hw_id, trials=trials, seed=seed,
        workload=stored.as_json(), records=[r.as_json() for r in records],
        run_ms=[_run_ms(r) for r in records],
        minutes=(extend.minutes if extend is not None else 0.0)
        + (time.monotonic() - start) / 60)
