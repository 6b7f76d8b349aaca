"""The kernel dataset as a table: one row per measured schedule, the kernel model's inputs.

Each ``kernel_record`` is MetaSchedule's own (workload + tuning record), so its program is
rebuilt by replaying the trace on the workload, and described exactly as a node of a
kernel graph is (:func:`gnnperf.features.node_feature_vector`, less what only a graph
knows: its position and neighbours' bytes), plus what the schedule decided
(:mod:`gnnperf.features.schedule`) and the hardware as it was while it was timed
(static figures and the reference kernels' times of measurement v2).

The collector stores each program's analyses with its record; they are used as they are
when a sample of them, replayed with today's code, still comes out the same (otherwise
every program is replayed, ~8 ms each). Rows are cached under the folder's
``processed/kernel_rows/``, shard by shard, keyed by each shard's contents and the feature
code, so a grown dataset only computes its new shards.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from tqdm import tqdm

from gnnperf.atomic import write_bytes
from gnnperf.digest import file_sha256
from gnnperf.errors import DatasetError
from gnnperf.features import (
    KernelNode,
    node_feature_names,
    node_feature_vector,
    ops_of,
    tensor_bytes,
)
from gnnperf.features.cache import code_version
from gnnperf.features.schedule import schedule_feature_vector
from gnnperf.features.schema import (
    kernel_feature_names,
    kernel_node_feature_names,
    schema_digest,
)
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import KernelRecordLine
from gnnperf.store.records import record_hardware
from gnnperf.store.shards import iter_lines, iter_shard, shard_paths

if TYPE_CHECKING:
    from gnnperf.features.analyses import KernelStatics

#: one stored record's analyses in this many is replayed to check the stored ones still hold
VERIFY_EVERY = 64

def kernel_input_vector(node: KernelNode, trace_json: Any, hw: HardwareSpec) -> list[float]:
    """One row of the table, for a kernel whether it was measured alone or sits in a graph;
    a serial kernel reads the one-thread view of the hardware (its time cannot depend on
    the thread count, :meth:`HardwareSpec.serial_view`)."""
    if not node.parallel:
        hw = hw.serial_view()
    names = node_feature_names()
    full = dict(zip(names, node_feature_vector(node, n_nodes=2), strict=True))
    sched = schedule_feature_vector(
        trace_json, simd_width=hw.simd_width, threads=hw.threads, l1d_kb=hw.l1d_kb,
        l2_kb=hw.l2_kb, parallel_extent=node.loops.get("parallel_extent", 1.0))
    return [full[n] for n in kernel_node_feature_names()] + sched + hw.feature_vector()


#: rows already made for a (workload, candidate list, hardware): see :func:`candidate_rows`
CandidateMemo = dict[tuple[Any, ...], tuple[list[Any], list[list[float]]]]


def hardware_key(hw: HardwareSpec) -> tuple[float, ...]:
    """Every figure of ``hw`` a kernel row reads, in both its views (a serial kernel or
    schedule reads the one-thread one): two specs with one key give the same rows."""
    return (*hw.feature_vector(), *hw.serial_view().feature_vector(), hw.simd_width,
            hw.threads, hw.l1d_kb, hw.l2_kb)


def candidate_rows(node: KernelNode, hw: HardwareSpec, memo: CandidateMemo | None = None
                   ) -> list[list[float]]:
    """The kernel model's rows of a ``tuned`` kernel's candidate schedules (the kernel's
    shapes with each candidate's own analyses and trace).

    A workload recurs (every layer of a transformer, every model of a family) with the
    same candidate list on the same hardware: ``memo``, kept across the graphs of one
    encoding pass, makes its rows once."""
    if memo is not None:
        # both views: each candidate reads the one its own schedule calls for
        key = (id(node.candidates), node.struct_hash, *hardware_key(hw))
        hit = memo.get(key)
        if hit is not None:
            return hit[1]
    rows = []
    for cand in node.candidates:
        f = cand["features"]
        scheduled = replace(node, flops=float(f["flops"]), loops=dict(f["loops"]),
                            ms_features=list(f["ms_features"]), missing=list(f["missing"]),
                            candidates=[])
        rows.append(kernel_input_vector(scheduled, cand["trace"], hw))
    if memo is not None:
        memo[key] = (node.candidates, rows)  # the list is kept, so its id stays its own
    return rows


@dataclass
class KernelTable:
    """Measured schedules as arrays; ``group`` ties the schedules of one workload on one
    hardware config together (what the ranking loss compares)."""

    x: np.ndarray  # (rows, features) float32
    log_ms: np.ndarray  # (rows,) natural log of the median time
    workload: np.ndarray  # (rows,) workload id
    hw_id: np.ndarray  # (rows,) hardware id
    unscheduled: np.ndarray  # (rows,) bool: the kernel as fusion left it
    feature_names: list[str]

    def __len__(self) -> int:
        return len(self.log_ms)

    @cached_property
    def group(self) -> np.ndarray:
        """``workload|hw_id`` per row (computed once: training reads it every batch)."""
        return np.char.add(np.char.add(self.workload.astype(str), "|"), self.hw_id.astype(str))

    def subset(self, rows: np.ndarray) -> KernelTable:
        return replace(self, x=self.x[rows], log_ms=self.log_ms[rows],
                       workload=self.workload[rows], hw_id=self.hw_id[rows],
                       unscheduled=self.unscheduled[rows])


def _scheduled(ms_record: list[Any], workload: Any) -> tuple[Any, Any]:
    """(scheduled PrimFunc, target) of a MetaSchedule record, by replaying its trace."""
    import tvm
    from tvm.s_tir.meta_schedule.database import TuningRecord

    record = TuningRecord.from_json(ms_record, workload)
    return record.as_measure_candidate().sch.mod["main"], tvm.target.Target(record.target)


def _ms_record(rec: KernelRecordLine) -> list[Any]:
    ms_record = rec["ms_record"]
    return json.loads(ms_record) if isinstance(ms_record, str) else ms_record


def _replayed_statics(rec: KernelRecordLine, workload: Any) -> KernelStatics:
    """The analyses of a record's program, rebuilt by replaying its trace (~8 ms)."""
    from gnnperf.features.analyses import kernel_statics  # TVM: only to build the table

    return kernel_statics(*_scheduled(_ms_record(rec), workload))


def _stored_statics(rec: KernelRecordLine) -> KernelStatics | None:
    """The analyses the collector stored with the record when it timed the program."""
    from gnnperf.features.analyses import KernelStatics

    f = rec.get("features")
    if f is None:
        return None
    return KernelStatics(float(f["flops"]), {k: float(v) for k, v in f["loops"].items()},
                         [float(v) for v in f["ms_features"]], rec["workload_id"],
                         list(f["missing"]))


def _same_statics(a: KernelStatics, b: KernelStatics) -> bool:
    return (math.isclose(a.flops, b.flops, rel_tol=1e-6) and dict(a.loops) == dict(b.loops)
            and list(a.missing) == list(b.missing) and len(a.ms_features) == len(b.ms_features)
            and np.allclose(a.ms_features, b.ms_features, rtol=1e-4, atol=1e-4))


def _row(rec: KernelRecordLine, statics: KernelStatics) -> list[float]:
    ms_record = _ms_record(rec)
    # MetaSchedule's record: [trace, run secs, target, args_info]; args_info holds
    # ["TENSOR", dtype, shape] per buffer, the output last
    args = [(list(a[2]), str(a[1])) for a in ms_record[3]]
    ins, outs = args[:-1], args[-1:]
    node = KernelNode(
        index=0, name=rec["kernel"], kind="tir", ops=ops_of(rec["kernel"]), pattern="",
        struct_hash=statics.struct_hash, in_shapes=[s for s, _ in ins],
        in_dtypes=[d for _, d in ins], out_shapes=[s for s, _ in outs],
        out_dtypes=[d for _, d in outs], flops=statics.flops,
        bytes_read=sum(tensor_bytes(*a) for a in ins),
        bytes_written=sum(tensor_bytes(*a) for a in outs), param_bytes=0, input_bytes=0,
        loops=dict(statics.loops), ms_features=list(statics.ms_features),
        missing=list(statics.missing))
    return kernel_input_vector(node, ms_record[0] if rec["schedule"] != "unscheduled" else None,
                               record_hardware(rec))


def _code_fingerprint() -> str:
    """What a cached row depends on besides its record: the feature code, this module (how
    a row is made), the hardware description and the columns."""
    h = hashlib.sha256(f"{code_version()}|{schema_digest()}".encode())
    for module in (Path(__file__), Path(__file__).parents[2] / "hardware" / "spec.py"):
        h.update(module.read_bytes())
    return h.hexdigest()[:16]


_ARRAYS = ("x", "log_ms", "workload", "hw_id", "unscheduled")


def _check_sample(shard: list[KernelRecordLine]) -> set[str]:
    """The keys of a shard's records whose stored analyses are replayed to decide whether
    the shard's are still trusted: its first record and 1 in :data:`VERIFY_EVERY` by key
    (:func:`_checks_analyses`). Both are properties of the shard, not of which of its
    records a reader asked for, and :func:`_read_shards` always parses them."""
    if not shard:
        return set()
    return {shard[0]["key"]} | {r["key"] for r in shard if _checks_analyses(r["key"])}


def _records_statics(records: list[KernelRecordLine], workloads: dict[str, Any],
                     parsed: dict[str, Any], check: set[str],
                     keep: Callable[[KernelRecordLine], bool] | None = None
                     ) -> list[tuple[KernelRecordLine, KernelStatics]]:
    """Each record of one shard (every one's workload known; those ``keep`` accepts only,
    if given) with its analyses: the ones the collector stored when the shard's sample
    (``check``, :func:`_check_sample`), replayed with the code of today, comes out the
    same, else replayed (~8 ms each); so a record gets the same analyses however many
    others are asked for."""
    from tvm.s_tir.meta_schedule.database import Workload

    def replayed(rec: KernelRecordLine) -> KernelStatics:
        wid = rec["workload_id"]
        if wid not in parsed:
            parsed[wid] = Workload.from_json(workloads[wid])
        return _replayed_statics(rec, parsed[wid])

    stored = [_stored_statics(rec) for rec in records]
    checked = [i for i, st in enumerate(stored) if st is not None and records[i]["key"] in check]
    trusted = all(_same_statics(replayed(records[i]), stored[i])  # type: ignore[arg-type]
                  for i in checked)
    return [(rec, st if st is not None and trusted else replayed(rec))
            for rec, st in zip(records, stored, strict=True) if keep is None or keep(rec)]


def _shard_rows(records: list[KernelRecordLine], workloads: dict[str, Any],
                parsed: dict[str, Any]) -> dict[str, np.ndarray]:
    """The table's arrays for the records of one shard (those whose workload is known: a
    record's workload line may have been lost with a killed writer)."""
    kept = [rec for rec in records if rec["workload_id"] in workloads]
    rows = [_row(rec, st)
            for rec, st in _records_statics(kept, workloads, parsed, _check_sample(records))]
    return {
        "x": np.asarray(rows, dtype=np.float32).reshape(len(rows), len(kernel_feature_names())),
        "log_ms": np.log(np.asarray([r["latency"]["median_ms"] for r in kept],
                                    dtype=np.float64)),
        "workload": np.asarray([r["workload_id"] for r in kept], dtype=str),
        "hw_id": np.asarray([r["hw_id"] for r in kept], dtype=str),
        "unscheduled": np.asarray([r["schedule"] == "unscheduled" for r in kept], dtype=bool),
    }


_WORKLOAD_ID = re.compile(r'"workload_id":"([^"]+)"')
_HW_ID = re.compile(r'"hw_id":"([^"]+)"')
_KEY = re.compile(r'"key":"([^"]+)"')


def _checks_analyses(key: str) -> bool:
    """Whether the kernel record ``key`` is in the sample (1 in :data:`VERIFY_EVERY`)
    whose stored analyses are replayed to decide if its shard's are still trusted."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % VERIFY_EVERY == 0


def _read_shards(folder: DatasetFolder, progress: bool = True,
                 needed: AbstractSet[tuple[str, str]] | None = None
                 ) -> tuple[dict[str, Any], dict[Path, list[KernelRecordLine]]]:
    """(MetaSchedule workload JSON by workload id, each kernel shard's records); with
    ``needed``, only the records of those (workload id, hardware id) pairs are parsed
    (most of a cold load is parsing records no tuned record reads), with every workload
    and every record of the analyses check sample (:func:`_checks_analyses`)."""
    workloads: dict[str, Any] = {}
    by_shard: dict[Path, list[KernelRecordLine]] = {}
    keep = None
    first = [True]  # the shard's first kernel record is yet to come
    if needed is not None:
        wanted = {w for w, _ in needed}

        def keep(line: str) -> bool:
            if '"kind":"kernel_record"' not in line:
                return True  # workloads, and small lines of other kinds
            if first[0]:
                first[0] = False
                return True
            key = _KEY.search(line)
            if key is not None and _checks_analyses(key.group(1)):
                return True
            workload = _WORKLOAD_ID.search(line)
            if workload is None or workload.group(1) not in wanted:
                return workload is None
            hw = _HW_ID.search(line)
            return hw is None or (workload.group(1), hw.group(1)) in needed

    paths = shard_paths(folder.kernels)
    for path in tqdm(paths, desc="reading kernel shards", unit="shard",
                     disable=None if progress else True,
                     mininterval=1.0):
        by_shard[path] = []
        first[0] = True
        for o in iter_shard(path, keep):
            if o.get("kind") == "kernel_workload":
                workloads[o["workload_id"]] = o["ms_workload"]
            elif o.get("kind") == "kernel_record":
                by_shard[path].append(cast(KernelRecordLine, o))
    return workloads, by_shard


def _build(folder: DatasetFolder, progress: bool) -> KernelTable:
    """Rows shard by shard, each shard's rows cached under ``processed/kernel_rows/`` by its
    contents and the feature code: a grown dataset only computes its new shards' rows, and
    one whose rows are all cached is not parsed at all (parsing is most of a cold load)."""
    cache_dir = folder.processed / "kernel_rows" / _code_fingerprint()
    cached: dict[Path, Path] = {
        path: cache_dir / f"{path.name}-{file_sha256(path)[:16]}.npz"
        for path in shard_paths(folder.kernels)}
    workloads: dict[str, Any] = {}
    by_shard: dict[Path, list[KernelRecordLine]] = {}
    if not all(c.exists() for c in cached.values()):
        # a record's workload may be in any shard
        workloads, by_shard = _read_shards(folder, progress)
    todo = sum(len(recs) for path, recs in by_shard.items() if not cached[path].exists())
    parts: list[dict[str, np.ndarray]] = []
    parsed: dict[str, Any] = {}
    with tqdm(total=todo, desc="kernel features", disable=not progress or not todo,
              unit="schedule") as bar:
        for path, target in cached.items():
            if target.exists():
                with np.load(target, allow_pickle=False) as z:
                    parts.append({k: z[k] for k in _ARRAYS})
                continue
            recs = by_shard[path]
            part = _shard_rows(recs, workloads, parsed)
            bar.update(len(recs))
            parts.append(part)
            if len(part["log_ms"]) == len(recs):  # every workload known: final for this shard
                for stale in cache_dir.glob(f"{path.name}-*.npz"):
                    stale.unlink()  # the rows of this shard before it grew
                buf = io.BytesIO()
                np.savez_compressed(buf, **part)
                write_bytes(target, buf.getvalue())
    for stale in [*cache_dir.parent.glob("*"), *folder.processed.glob("kernel_table-*.npz")]:
        if stale != cache_dir:  # rows of other feature code, and the one-file tables of old
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    if not parts or not sum(len(p["log_ms"]) for p in parts):
        raise DatasetError(f"no kernel records in {folder.kernels}; "
                           "collect some with `gnnperf collect-kernels`")
    return KernelTable(**{k: np.concatenate([p[k] for p in parts]) for k in _ARRAYS},
                       feature_names=kernel_feature_names())


def load_kernel_table(root: str | os.PathLike[str] | DatasetFolder | None = None, *,
                      progress: bool = True) -> KernelTable:
    """The kernel dataset of ``root`` as a :class:`KernelTable` (rows cached per shard)."""
    folder = DatasetFolder.resolve(root)
    if not folder.kernels.is_dir() or not shard_paths(folder.kernels):
        raise DatasetError(f"no kernel dataset in {folder.root} (looked in {folder.kernels}); "
                           "collect one with `gnnperf collect-kernels`")
    return _build(folder, progress)


def tuned_candidates(root: str | os.PathLike[str] | DatasetFolder | None = None, *,
                     needed: AbstractSet[tuple[str, str]] | None = None
                     ) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (workload id, hardware id), the sampled schedules the kernel dataset measured,
    as a ``tuned`` kernel's :attr:`~gnnperf.features.KernelNode.candidates`: what a tuned
    record's kernels were picked from (the analyses as the table reads them).

    ``needed`` limits it to those pairs: the tuned records of a dataset use a fraction of
    the schedules, and only the ones used are replayed where their stored analyses are
    not trusted.
    """
    folder = DatasetFolder.resolve(root)
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    if not folder.kernels.is_dir():
        return out
    workloads, by_shard = _read_shards(folder, needed=needed)
    parsed: dict[str, Any] = {}

    def used(rec: KernelRecordLine) -> bool:
        return needed is None or (rec["workload_id"], rec["hw_id"]) in needed

    for records in by_shard.values():
        sampled = [r for r in records
                   if r["schedule"] != "unscheduled" and r["workload_id"] in workloads]
        for rec, statics in _records_statics(sampled, workloads, parsed,
                                             _check_sample(records), used):
            out.setdefault((rec["workload_id"], rec["hw_id"]), []).append(
                {"features": statics.candidate_features(), "trace": _ms_record(rec)[0]})
    return out


def workloads_of_models(root: str | os.PathLike[str] | DatasetFolder | None = None
                        ) -> dict[str, set[str]]:
    """Each zoo model's workload ids in the kernel dataset (every ISA it was lowered for):
    what a kernel model must not have learned when that model is tested on."""
    folder = DatasetFolder.resolve(root)
    out: dict[str, set[str]] = {}
    if folder.kernels.is_dir():
        for o in iter_lines(folder.kernels, kinds=("kernel_model",)):
            out.setdefault(o["model_id"], set()).update(o["kernels"].values())
    return out


def group_split(groups: Iterable[str], fractions: tuple[float, float], seed: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row indices of train / validation / test, whole groups at a time (``fractions``:
    validation's and test's share of the groups)."""
    groups = np.asarray(list(groups))
    unique = np.unique(groups)
    order = np.random.default_rng(seed).permutation(len(unique))
    n_val = max(1, round(fractions[0] * len(unique)))
    n_test = max(1, round(fractions[1] * len(unique)))
    val_g = set(unique[order[:n_val]])
    test_g = set(unique[order[n_val:n_val + n_test]])
    where = np.arange(len(groups))
    in_val = np.isin(groups, list(val_g))
    in_test = np.isin(groups, list(test_g))
    return where[~in_val & ~in_test], where[in_val], where[in_test]
