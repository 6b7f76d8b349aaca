"""A stored tuning run and the budgets it holds, without TVM.

What a ``tuned:N`` search is (:mod:`.tuning` runs one): MetaSchedule's evolutionary search,
64 trials per iteration. One run also holds the budgets that are whole search iterations of
it (``tuned:64`` is the first iteration of a 256-trial run); a budget inside an iteration is
not. Reading runs back, choosing a budget's records and summarising what tuning cost need
only this module, so the command line and ``advise`` do not pay TVM's import for them;
TVM loads only when a run's records go into a MetaSchedule database.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gnnperf.errors import GnnperfError
from gnnperf.hardware.spec import HardwareSpec

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
