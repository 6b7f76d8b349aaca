"""What a kernel collector resumes from: one pass over the kernel shards gives the
(workload, hardware) pairs closed, the workloads and models stored, the models that do not
compile, and the schedule seeds each workload was drawn with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnperf.store.lines import NOT_EXECUTED
from gnnperf.store.shards import iter_lines

#: a model's stage that fails for good: the lowered model does not compile (in time), so
#: no input can be captured; kept apart from a workload's ``compile`` (its candidates)
UNCOMPILABLE = "model-compile"


def covers_tuned(line: dict[str, Any]) -> bool:
    """Whether a line closing a (workload, hardware) pair covers it for a ``best-of`` build:
    the pair was measured, or its kernel never runs (nothing to schedule)."""
    return line["kind"] == "kernel_done" or line["stage"] == NOT_EXECUTED


@dataclass
class CollectorProgress:
    """What a collector resumes from (:func:`read_progress`)."""

    #: ``workload|hw_id`` pairs finished (measured, failed or never executed)
    done: set[str] = field(default_factory=set)
    #: the pairs that count as covered for a ``best-of`` build (measured, or never executed)
    covered: set[str] = field(default_factory=set)
    #: the workloads written: MetaSchedule's JSON of each
    workloads: dict[str, Any] = field(default_factory=dict)
    #: the (model, ISA) pairs written, with the workload ids of each
    models: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    #: the (model, ISA) pairs whose lowered model did not compile, or not in time: the
    #: same lowering fails the same way, so a restart does not spend the timeout again
    uncompilable: set[tuple[str, str]] = field(default_factory=set)
    #: per workload, the most schedule seeds one hardware id drew and timed (every
    #: distinct program they gave)
    drawn: dict[str, int] = field(default_factory=dict)
    #: the workloads some model runs as a VM builtin, never as a kernel
    not_executed: set[str] = field(default_factory=set)


def read_progress(folder: Path) -> CollectorProgress:
    """What a collector resumes from, in one pass over ``folder``'s shards."""
    progress = CollectorProgress()
    done, covered = progress.done, progress.covered
    kinds = ("kernel_done", "kernel_failure", "kernel_workload", "kernel_model",
             "kernel_model_failure")
    for o in iter_lines(folder, kinds=kinds) if folder.exists() else ():
        if o["kind"] == "kernel_workload":
            progress.workloads[o["workload_id"]] = o["ms_workload"]
        elif o["kind"] == "kernel_model":
            progress.models[(o["model_id"], o["isa"])] = set(o["kernels"].values())
        elif o["kind"] == "kernel_model_failure":
            if o["stage"] == UNCOMPILABLE:
                progress.uncompilable.add((o["model_id"], o["isa"]))
        else:
            done.add(o["key"])
            if covers_tuned(o):
                covered.add(o["key"])
            wid = o["key"].split("|", 1)[0]
            if o["kind"] == "kernel_done":
                progress.drawn[wid] = max(progress.drawn.get(wid, 0), o.get("schedules_drawn", 0))
            elif o["stage"] == NOT_EXECUTED:
                progress.not_executed.add(wid)
    return progress
