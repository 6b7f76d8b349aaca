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
:meth:`TuningRun.database` refuses it. A larger budget extends a stored run (``extend``):
its records go into the search's database first, where the evolutionary search draws its
initial population from the best of them, and only the trials beyond them are measured.

A run is stored as one ``kernel_tuning`` line of the kernel dataset
(:meth:`TuningRun.to_line`), read back by :meth:`TuningRun.from_line`.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.collect.kernels.workloads import KernelWorkload
from gnnperf.errors import GnnperfError, one_line
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.schedules import build_candidate

#: MetaSchedule's defaults in ``static_shape_tuning``: trials per search iteration
TRIALS_PER_ITERATION = 64
#: ``LocalRunner``'s timing of a candidate: 3 runs per measurement, one measurement, at
#: least 100 ms (MetaSchedule's ``EvaluatorConfig`` defaults, which the flow uses)
RUNNER_NUMBER, RUNNER_REPEAT, RUNNER_MIN_REPEAT_MS = 3, 1, 100
RUNNER_CONFIG = {"number": RUNNER_NUMBER, "repeat": RUNNER_REPEAT,
                 "min_repeat_ms": RUNNER_MIN_REPEAT_MS}
#: the search a ``tuned:N`` build stands for (stored with every run)
STRATEGY = "evolutionary+xgb"


#: the budgets the issue asks labels for (trials per workload)
TUNING_BUDGETS = (16, 64, 256)


def tuning_key(workload_id: str, hw_id: str, trials: int) -> str:
    """What one tuning run is of: a workload on one hardware setting. Runs of whole search
    iterations share a key (a larger one extends a smaller one, so the line with the most
    trials supersedes the others); a shorter search (``tuned:16`` searches 16 trials in one
    iteration, not the first 16 of a 64-trial iteration) has a key of its own."""
    base = f"{workload_id}|{hw_id}|{STRATEGY}"
    return base if trials % TRIALS_PER_ITERATION == 0 else f"{base}@{trials}"


def run_holds(trials: int, measured: int, budget: int) -> bool:
    """Whether a run of ``trials`` trials that measured ``measured`` candidates holds a
    ``budget``-trial search: it was one, or ``budget`` is a whole number of its iterations,
    or the search ran out of new candidates (a small design space) before ``budget``."""
    if budget == trials:
        return True
    exhausted = measured < trials
    if budget > trials:
        return exhausted
    return budget % TRIALS_PER_ITERATION == 0 or (exhausted and budget >= measured)


@dataclass
class TuningRun:
    """One workload tuned on one hardware setting: MetaSchedule's records in trial order."""

    workload_id: str
    hw_id: str
    #: the budget asked for (MetaSchedule may measure fewer: a small design space)
    trials: int
    seed: int
    #: ``Workload.as_json()`` of the workload as given (the module every build queries)
    workload: Any
    #: ``TuningRecord.as_json()`` per trial, in the order the search measured them
    records: list[Any]
    #: the mean run time of each trial (ms); inf for a candidate that failed to build or run
    run_ms: list[float]
    minutes: float

    @property
    def key(self) -> str:
        return tuning_key(self.workload_id, self.hw_id, self.trials)

    def to_line(self, hw: HardwareSpec, model_id: str, kernel: str,
                versions: dict[str, str]) -> dict[str, Any]:
        """The run as a ``kernel_tuning`` line (:class:`gnnperf.store.lines.KernelTuningLine`):
        a failed trial's time is stored as null (JSON has no infinity)."""
        return {
            "kind": "kernel_tuning", "key": self.key, "workload_id": self.workload_id,
            "hw_id": self.hw_id, "hw": hw.to_dict(), "trials": self.trials, "seed": self.seed,
            "strategy": STRATEGY, "runner": RUNNER_CONFIG, "ms_workload": self.workload,
            "ms_records": self.records,
            "run_ms": [ms if math.isfinite(ms) else None for ms in self.run_ms],
            "minutes": round(self.minutes, 3), "model_id": model_id, "kernel": kernel,
            "versions": versions, "created_at": time.time()}

    @classmethod
    def from_line(cls, line: Mapping[str, Any]) -> TuningRun:
        return cls(workload_id=line["workload_id"], hw_id=line["hw_id"],
                   trials=int(line["trials"]), seed=int(line["seed"]),
                   workload=line["ms_workload"], records=list(line["ms_records"]),
                   run_ms=[math.inf if ms is None else float(ms) for ms in line["run_ms"]],
                   minutes=float(line["minutes"]))

    def best_so_far(self) -> list[float]:
        """After each trial, the fastest time measured so far (ms): the tuning curve."""
        best, out = math.inf, []
        for ms in self.run_ms:
            best = min(best, ms)
            out.append(best)
        return out

    def _window(self, budget: int | None) -> int:
        """How many trials a search of ``budget`` trials measured (all without one): a
        whole number of this run's iterations, or all of a run that ran out of candidates
        before ``budget``; :meth:`covers` says which budgets a run holds."""
        if budget is None:
            return len(self.run_ms)
        if budget < 1 or not self.covers(budget):
            raise GnnperfError(
                f"a {self.trials}-trial tuning gives only budgets of whole search iterations "
                f"({TRIALS_PER_ITERATION} trials each), not {budget}")
        return min(budget, len(self.run_ms))

    def best_trial(self, budget: int | None = None) -> int | None:
        """Index of the fastest of the trials a ``budget``-trial search measured (all
        without one); None if every one of them failed."""
        window = self.run_ms[: self._window(budget)]
        finite = [i for i, ms in enumerate(window) if math.isfinite(ms)]
        return min(finite, key=window.__getitem__) if finite else None

    def covers(self, budget: int) -> bool:
        """Whether the run holds a ``budget``-trial search (:func:`run_holds`)."""
        return run_holds(self.trials, len(self.records), budget)

    def best_ms(self, budget: int | None = None) -> float:
        """The fastest time a ``budget``-trial search found (ms; inf if every trial failed)."""
        best = self.best_trial(budget)
        return math.inf if best is None else self.run_ms[best]

    def database(self, budget: int | None = None) -> Any:
        """A MetaSchedule ``MemoryDatabase`` holding the trials of a ``budget``-trial search:
        what ``MetaScheduleApplyDatabase`` (or :func:`gnnperf.lowering.schedules.apply_build`)
        reads for a ``tuned:budget`` build."""
        from tvm.s_tir.meta_schedule.database import MemoryDatabase

        db = MemoryDatabase()
        self.commit_to(db, budget)
        return db

    def commit_to(self, db: Any, budget: int | None = None) -> None:
        """Add the workload and the trials of a ``budget``-trial search to ``db``."""
        from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

        workload = db.commit_workload(Workload.from_json(self.workload).mod)
        for record in self.records[: self._window(budget)]:
            db.commit_tuning_record(TuningRecord.from_json(record, workload))


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
