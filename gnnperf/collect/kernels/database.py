"""The kernel shards read back: records, statistics, and a MetaSchedule database."""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from gnnperf.collect.kernels.tuning_run import TUNING_BUDGETS, TuningRun
from gnnperf.errors import DatasetError
from gnnperf.hardware.cpu_identity import signature_of_hw
from gnnperf.measure.reference import aa_floor
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import NOT_EXECUTED, KernelRecordLine, KernelRemeasureLine
from gnnperf.store.shards import iter_lines, latest_records
from gnnperf.store.tuning_summary import (
    TUNING_SHARD_PREFIX,
    TuningStats,
    read_tuning_summary,
    write_tuning_summary_file,
)


def _kernels_folder(root: str | os.PathLike[str] | DatasetFolder | None) -> Path:
    return DatasetFolder.resolve(root).kernels


def kernel_records(root: str | os.PathLike[str] | DatasetFolder | None = None,
                   hw_id: str | None = None) -> Iterator[KernelRecordLine]:
    """Every measured schedule (``kernel_record`` line), optionally of one hardware id."""
    folder = _kernels_folder(root)
    if not folder.exists():
        return
    for rec in iter_lines(folder, kinds=("kernel_record",)):
        if hw_id is None or rec["hw_id"] == hw_id:
            yield cast(KernelRecordLine, rec)


#: sampled schedules a workload needs in the kernel dataset to count as covered (issue 45)
COVERED_SCHEDULES = 8


def kernel_stats(root: str | os.PathLike[str] | DatasetFolder | None = None, *,
                 corpus: bool = False) -> dict[str, Any]:
    """The kernel dataset's size, cost and noise floor, as ``gnnperf dataset stats`` prints
    it, from one pass over the kernel shards.

    ``schedules_per_workload_median``: per workload, the distinct sampled schedules
    measured (on any hardware config; the unscheduled kernel not counted).
    ``kernel_noise_floor_by_cpu``: per CPU signature, the A/A floor (:func:`aa_floor`)
    of the ``kernel_remeasure`` lines of the folder's ``noise/``.
    With ``corpus``, also how many of the ``tf-*`` corpus's workloads
    (:func:`corpus_workloads`) have :data:`COVERED_SCHEDULES` sampled schedules or more
    (``corpus_workloads_covered``), and how many had that many seeds drawn on one
    hardware id and every distinct program timed (``corpus_workloads_sampled``: an
    elementwise kernel's design space often holds a single program, so it can never be
    covered); it reads the folder's graphs too: seconds more on the shipped dataset.
    """
    folder = DatasetFolder.resolve(root)
    again = {o["key"]: o for o in iter_lines(folder.noise, kinds=("kernel_remeasure",))} \
        if folder.noise.exists() else {}
    measurements = 0
    sampled: dict[str, set[str]] = defaultdict(set)
    drawn: Counter[str] = Counter()  # per workload, the most seeds one hardware id drew
    workloads: set[str] = set()
    cpus: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    stages: Counter[str] = Counter()
    noise: dict[str, list[tuple[KernelRecordLine, KernelRemeasureLine]]] = defaultdict(list)
    # cost: sampling and compiling once per workload, timing once per hardware config
    timed = cost_s = 0.0
    costed: set[str] = set()
    kinds = ("kernel_record", "kernel_failure", "kernel_done")
    for o in iter_lines(folder.kernels, kinds=kinds) if folder.kernels.exists() else ():
        if o["kind"] == "kernel_failure":
            stages[o["stage"]] += 1
        elif o["kind"] == "kernel_done":
            wid = o["key"].split("|", 1)[0]
            drawn[wid] = max(drawn[wid], o.get("schedules_drawn", 0))
            if "measure_s" in o and "sample_s" in o:
                timed += o["candidates"]
                cost_s += o["measure_s"] + (0.0 if wid in costed else
                                            o["sample_s"] + o["compile_s"])
                costed.add(wid)
        else:
            measurements += 1
            workloads.add(o["workload_id"])
            pairs.add((o["workload_id"], o["hw_id"]))
            if o["schedule"] != "unscheduled":
                sampled[o["workload_id"]].add(o["key"].rsplit("|", 1)[-1])
            cpu = signature_of_hw(o["hw"]).id
            cpus.add(cpu)
            if o["key"] in again:
                noise[cpu].append((cast(KernelRecordLine, o),
                                   cast(KernelRemeasureLine, again[o["key"]])))
    not_executed = stages.pop(NOT_EXECUTED, 0)
    counts = [len(sampled.get(w, ())) for w in workloads]
    stats: dict[str, Any] = {}
    if corpus:
        wanted = corpus_workloads(folder)
        covered = sum(len(sampled.get(w, ())) >= COVERED_SCHEDULES for w in wanted)
        # the design space of many workloads (elementwise ones) holds fewer programs than
        # that: drawn with as many seeds, every distinct program they gave timed
        drawn_enough = sum(drawn[w] >= COVERED_SCHEDULES for w in wanted)
        # issue 45: the real-architecture corpus's kernels in the kernel dataset
        stats = {"corpus_workloads": len(wanted), "corpus_workloads_covered": covered,
                 "corpus_workload_coverage": (round(100 * covered / len(wanted), 1)
                                              if wanted else None),
                 "corpus_workloads_sampled": drawn_enough,
                 "corpus_workload_sampled_share": (round(100 * drawn_enough / len(wanted), 1)
                                                   if wanted else None)}
    return {
        "kernel_measurements": measurements,
        "kernel_workloads": len(workloads),
        "kernel_workload_hw_pairs": len(pairs),
        "schedules_per_workload_median": statistics.median(counts) if counts else 0,
        "kernel_cpus": len(cpus),
        "kernel_cpu_ids": sorted(cpus),
        "kernel_failures": sum(stages.values()),
        "kernel_failures_by_stage": dict(stages),
        "kernel_workloads_not_executed": not_executed,
        "kernel_measurements_per_hour": round(timed / cost_s * 3600) if cost_s else None,
        "kernel_noise_floor_by_cpu": {cpu: aa_floor(p, "latency")
                                      for cpu, p in sorted(noise.items())},
        **stats,
    }


def corpus_workloads(folder: DatasetFolder) -> set[str]:
    """The workload ids of the ``tf-*`` corpus's measured models: the kernels of their
    ``default``-build graphs, which are stored as fusion left them (their structural hash
    is the workload id). Models measured only in scheduled builds (those over the
    ``default`` budget) are not counted: their graphs name scheduled kernels."""
    return set().union(*corpus_workloads_by_family(folder).values())


def corpus_workloads_by_family(folder: DatasetFolder) -> dict[str, set[str]]:
    """:func:`corpus_workloads`, per corpus family (architecture): what visiting its
    models can bring to the kernel dataset."""
    from gnnperf.zoo.corpus import PREFIX

    if not folder.shards.is_dir():
        return {}
    # (no operator-graph ids needed: ``structural`` given, those lines are skipped)
    families: dict[str, set[str]] = defaultdict(set)
    for r in latest_records(folder.shards, structural={}):
        if r["build"] == "default" and r["model"]["family"].startswith(PREFIX):
            families[r["graph_id"]].add(r["model"]["family"])
    out: dict[str, set[str]] = defaultdict(set)
    for line in iter_lines(folder.shards, kinds=("graph",)) if families else ():
        for family in families.get(line["graph_id"], ()):
            out[family].update(n["struct_hash"] for n in line["graph"]["nodes"]
                               if n["kind"] == "tir")
    return dict(out)


def workloads_drawn(root: str | os.PathLike[str] | DatasetFolder | None = None
                    ) -> Counter[str]:
    """Per workload, the most schedule seeds one hardware id drew (and timed every
    distinct program of): its ``kernel_done`` lines."""
    drawn: Counter[str] = Counter()
    folder = _kernels_folder(root)
    for o in iter_lines(folder, kinds=("kernel_done",)) if folder.exists() else ():
        wid = o["key"].split("|", 1)[0]
        drawn[wid] = max(drawn[wid], o.get("schedules_drawn", 0))
    return drawn


def _mean_run_s(rec: KernelRecordLine) -> float:
    """A kernel record's mean run time as MetaSchedule ranks it (its tuning record's
    ``run_secs``)."""
    return statistics.fmean(rec["ms_record"][1])


@dataclass
class _Sampled:
    """The sampled schedules of some hardware ids, read in one pass over the shards."""

    workloads: dict[str, Any]  # workload id -> MetaSchedule's JSON of the workload
    records: dict[str, list[KernelRecordLine]]  # hardware id -> its kernel records
    measured_ids: set[str]  # every hardware id with a kernel record, for error messages


def _read_sampled(root: str | os.PathLike[str] | DatasetFolder | None,
                  hw_ids: Collection[str], best_only: bool) -> _Sampled:
    """The sampled schedules of ``hw_ids``; with ``best_only`` only each workload's fastest
    (what a build applying the database reads: parsing ~30,000 traces took the collector
    minutes per hardware id at start).

    One pass serves every id: each pass parses and verifies every line of the shards
    (~100,000), which took a minute or more. The unscheduled kernel's timings are the
    baseline, not a tuning record: MetaSchedule's search never proposes it, so it is
    left out.
    """
    folder = _kernels_folder(root)
    workloads: dict[str, Any] = {}
    records: dict[str, list[KernelRecordLine]] = {h: [] for h in hw_ids}
    best: dict[str, dict[str, KernelRecordLine]] = {h: {} for h in hw_ids}
    measured: set[str] = set()
    kinds = ("kernel_workload", "kernel_record")
    for line in iter_lines(folder, kinds=kinds) if folder.exists() else ():
        if line["kind"] == "kernel_workload":
            workloads[line["workload_id"]] = line["ms_workload"]
            continue
        o = cast(KernelRecordLine, line)
        measured.add(o["hw_id"])
        if o["hw_id"] not in records or o["schedule"] == "unscheduled":
            continue
        if not best_only:
            records[o["hw_id"]].append(o)
            continue
        held = best[o["hw_id"]].get(o["workload_id"])
        if held is None or _mean_run_s(o) < _mean_run_s(held):
            best[o["hw_id"]][o["workload_id"]] = o
    if best_only:
        records = {h: list(by_workload.values()) for h, by_workload in best.items()}
    return _Sampled(workloads, records, measured)


def _fill(db: Any, sampled: _Sampled, hw_id: str) -> int:
    """Commit ``hw_id``'s sampled schedules (workloads and tuning records) to ``db``;
    returns the records committed."""
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    committed: dict[str, Any] = {}
    for rec in sampled.records[hw_id]:
        wid = rec["workload_id"]
        if wid not in committed:
            committed[wid] = db.commit_workload(
                Workload.from_json(sampled.workloads[wid]).mod)
        db.commit_tuning_record(TuningRecord.from_json(rec["ms_record"], committed[wid]))
    return len(sampled.records[hw_id])


def _nothing_measured(root: str | os.PathLike[str] | DatasetFolder | None, hw_id: str,
                      sampled: _Sampled) -> DatasetError:
    known = sorted(sampled.measured_ids)
    return DatasetError(f"no kernel records of hardware '{hw_id}' under "
                        f"{_kernels_folder(root)}"
                        + (f" (it has: {', '.join(known)})" if known else ""))


def tuned_databases(root: str | os.PathLike[str] | DatasetFolder | None,
                    hw_ids: Collection[str], *, require: bool = True) -> dict[str, Any]:
    """Per hardware id, an in-memory MetaSchedule database of its fastest measured schedule
    per workload: what the ``best-of`` build applies (MetaSchedule ranks a workload's records
    by mean run time, so the others would never be read; :func:`export_database` keeps
    all). The shards are read once for all the ids.

    An id with nothing measured raises :class:`DatasetError`, or with ``require=False``
    gets an empty database (a collector starting on a new machine).
    """
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    hw_ids = list(hw_ids)
    if not hw_ids:
        return {}
    sampled = _read_sampled(root, set(hw_ids), best_only=True)
    databases: dict[str, Any] = {}
    for hw_id in hw_ids:
        databases[hw_id] = MemoryDatabase()
        if not _fill(databases[hw_id], sampled, hw_id) and require:
            raise _nothing_measured(root, hw_id, sampled)
    return databases


def tuned_database(root: str | os.PathLike[str] | DatasetFolder | None, hw_id: str) -> Any:
    """:func:`tuned_databases` of one hardware id."""
    return tuned_databases(root, [hw_id])[hw_id]


def export_database(root: str | os.PathLike[str] | DatasetFolder | None, hw_id: str,
                    out: str | os.PathLike[str]) -> Path:
    """Write the sampled schedules of ``hw_id`` as a MetaSchedule ``JSONDatabase``
    (``database_workload.json``, ``database_tuning_record.json`` in ``out``).

    ``relax.transform.MetaScheduleApplyDatabase`` then schedules a model's kernels with
    the fastest measured schedule of each. The folder is written beside ``out`` and
    renamed into place, so a failed export leaves no half database.
    """
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        sampled = _read_sampled(root, {hw_id}, best_only=False)
        if not _fill(JSONDatabase(str(tmp / "database_workload.json"),
                                  str(tmp / "database_tuning_record.json"),
                                  allow_missing=True), sampled, hw_id):
            raise _nothing_measured(root, hw_id, sampled)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def stored_tuning(folder: Path) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The ``kernel_tuning`` lines of a kernel folder, the one with the most trials per
    (workload, hardware) key, and the keys of failed tunings (``KEY|TRIALS``). Only the
    :data:`TUNING_SHARD_PREFIX` shards are read: the tuning collector writes these lines
    there alone, and the kernel shards beside them are 15 times larger."""
    runs: dict[str, dict[str, Any]] = {}
    failed: set[str] = set()
    kinds = ("kernel_tuning", "kernel_tuning_failure")
    lines = iter_lines(folder, kinds=kinds, prefix=TUNING_SHARD_PREFIX) if folder.exists() else ()
    for o in lines:
        if o["kind"] == "kernel_tuning_failure":
            failed.add(f"{o['key']}|{o['trials']}")
        elif o["key"] not in runs or o["trials"] > runs[o["key"]]["trials"]:
            runs[o["key"]] = o
    return runs, failed


def tuning_runs(root: str | os.PathLike[str] | DatasetFolder | None,
                hw_id: str | None = None) -> list[TuningRun]:
    """The stored tuning runs (of ``hw_id``, or of every hardware id): per key the one with
    the most trials."""
    runs, _ = stored_tuning(_kernels_folder(root))
    return [TuningRun.from_line(o) for o in runs.values() if hw_id is None or o["hw_id"] == hw_id]


def runs_at(runs: Iterable[TuningRun], budget: int) -> dict[str, TuningRun]:
    """Per workload, the run that holds its ``budget``-trial search: one of that budget, else
    a longer one whose first ``budget`` trials are it."""
    chosen: dict[str, TuningRun] = {}
    for run in runs:
        if run.covers(budget) and (run.workload_id not in chosen or run.trials == budget):
            chosen[run.workload_id] = run
    return chosen


def tuning_database(root: str | os.PathLike[str] | DatasetFolder | None, hw_id: str,
                    budget: int) -> tuple[Any, set[str]]:
    """An in-memory MetaSchedule database of every workload tuned on ``hw_id`` with a
    ``budget``-trial search (a run of that budget, else the first ``budget`` trials of a
    longer one), what a ``tuned:budget`` build applies, and the ids of the workloads it
    holds. A workload tuned only at fewer trials is left out (its kernel would get a
    shorter search's schedule)."""
    chosen = runs_at(tuning_runs(root, hw_id), budget)
    return compose_database(chosen.values(), budget), set(chosen)


def compose_database(runs: Iterable[TuningRun], budget: int) -> Any:
    """An in-memory MetaSchedule database of the ``budget``-trial searches of ``runs`` (one
    per workload: :func:`runs_at`)."""
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    db = MemoryDatabase()
    for run in runs:
        run.commit_to(db, budget)
    return db


def tuning_stats(root: str | os.PathLike[str] | DatasetFolder | None = None
                 ) -> TuningStats:
    """:func:`tuning_stats_of` the stored runs, from the folder's summary
    (:mod:`gnnperf.store.tuning_summary`) while it matches the tuning shards, else from the
    shards (about 15 s for 1,000 runs: each line holds its search's trace), writing the
    summary for the next reader."""
    stored = read_tuning_summary(_kernels_folder(root))
    return stored if stored is not None else refresh_tuning_summary(root)


def refresh_tuning_summary(root: str | os.PathLike[str] | DatasetFolder | None = None
                           ) -> TuningStats:
    """Compute the folder's tuning stats from its shards and store them as its summary,
    without reading the (stale or absent) summary first: the caller already did."""
    folder = _kernels_folder(root)
    if not folder.exists():
        return {}
    return write_tuning_summary(folder, tuning_runs(root))


def write_tuning_summary(folder: Path, runs: Iterable[TuningRun]) -> TuningStats:
    """Store :func:`tuning_stats_of` ``runs`` (every stored run of ``folder``) as its
    :data:`~gnnperf.store.tuning_summary.TUNING_SUMMARY`; returns the stats."""
    stats = tuning_stats_of(runs)
    write_tuning_summary_file(folder, stats)
    return stats


def tuning_stats_of(runs: Iterable[TuningRun]) -> dict[str, dict[str, Any]]:
    """Per hardware id, what the tuning runs cost and bought, for each of
    :data:`TUNING_BUDGETS` some run holds: the workloads tuned at it, the median minutes a
    workload took (a longer run's share for its first trials), and the median ratio of its
    best time to the next smaller budget's on the same runs (below 1: the larger budget
    bought speed)."""
    per_hw: dict[str, list[TuningRun]] = defaultdict(list)
    for run in runs:
        per_hw[run.hw_id].append(run)
    out: dict[str, dict[str, Any]] = {}
    for hw_id, held_here in sorted(per_hw.items()):
        by_budget: dict[str, Any] = {}
        shorter: dict[str, TuningRun] = {}
        previous = 0
        for budget in TUNING_BUDGETS:
            held = runs_at(held_here, budget)
            if not held:
                continue
            entry: dict[str, Any] = {
                "workloads": len(held),
                "minutes_per_workload": statistics.median(
                    r.minutes * min(1.0, budget / r.trials) for r in held.values())}
            # over the workloads the larger budget searched further (not a search that ran
            # out of candidates before the smaller one, which holds both alike)
            ratios = [r.best_ms(budget) / shorter[w].best_ms(previous)
                      for w, r in held.items()
                      if w in shorter and len(r.run_ms) > previous
                      and math.isfinite(shorter[w].best_ms(previous))]
            if ratios:
                entry[f"best_over_{previous}"] = statistics.median(ratios)
            by_budget[str(budget)] = entry
            shorter, previous = held, budget
        out[hw_id] = {"workloads": len({r.workload_id for r in held_here}), "by_budget": by_budget}
    return out


def kernel_noise_floor_by_cpu(root: str | os.PathLike[str] | DatasetFolder | None
                              ) -> dict[str, dict[str, Any]]:
    """Per CPU signature: the A/A floor of kernel timings (see :func:`kernel_stats`)."""
    return kernel_stats(root)["kernel_noise_floor_by_cpu"]
