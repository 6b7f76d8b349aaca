"""The stored summary of a kernel folder's tuning runs (``kernels/tuning_summary.json``):
what the searches cost and bought per hardware id, stamped with the tuning shards it was
taken from. Readers that only need these figures (``gnnperf advise``) read this file
alone: no search trace is parsed and TVM is never imported. Computing it from the runs
is the kernel dataset's job (:func:`gnnperf.collect.kernels.database.tuning_stats`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from gnnperf.atomic import write_text
from gnnperf.store.shards import shard_paths

#: the name start of the kernel-folder shards that hold ``kernel_tuning`` lines, and only
#: of those (see :class:`gnnperf.collect.kernels.tuning_collector.TuningCollector`)
TUNING_SHARD_PREFIX = "tuning-"
#: beside them: the runs' statistics and the shard sizes they were taken at
TUNING_SUMMARY = "tuning_summary.json"

TuningStats = dict[str, dict[str, Any]]


def tuning_shard_stamp(folder: Path) -> list[list[Any]]:
    """The tuning shards' names and sizes: a writer rewrites a shard whole on each line,
    so any new run changes one."""
    return [[p.name, p.stat().st_size] for p in shard_paths(folder, TUNING_SHARD_PREFIX)]


def read_tuning_summary(folder: Path) -> TuningStats | None:
    """The stored statistics while they match ``folder``'s tuning shards; None when the
    summary is missing, unreadable or older than a shard."""
    try:
        summary = json.loads((folder / TUNING_SUMMARY).read_text())
        if summary.get("shards") == tuning_shard_stamp(folder):
            return cast(TuningStats, summary["stats"])
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        pass
    return None


def write_tuning_summary_file(folder: Path, stats: TuningStats) -> None:
    """Store ``stats`` (of every run in ``folder``) stamped with the shards as they are now.
    A folder that cannot be written keeps no summary (its readers recompute)."""
    body = {"shards": tuning_shard_stamp(folder), "stats": stats}
    try:
        write_text(folder / TUNING_SUMMARY, json.dumps(body, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass
