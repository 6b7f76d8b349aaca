"""The kernel dataset as a table: one row per measured schedule, the kernel model's inputs.

Each ``kernel_record`` is MetaSchedule's own (workload + tuning record), so its program is
rebuilt by replaying the trace on the workload, and described exactly as a node of a
kernel graph is (:func:`gnnperf.features.node_feature_vector`, less what only a graph
knows: its position and neighbours' bytes), plus what the schedule decided
(:mod:`gnnperf.features.schedule`) and the hardware as it was while it was timed
(static figures and the reference kernels' times of measurement v2).

Rows are cached under the folder's ``processed/``, keyed by the kernel shards' contents and
the feature code, shard by shard, so a schedule's row is computed once (about
12 ms a schedule once its kernel's analyses are in the feature cache, 30 ms before).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import write_bytes
from ..dataset_folder import DatasetFolder
from ..errors import DatasetError
from ..feature_cache import code_version
from ..features import (
    KernelNode,
    node_feature_names,
    node_feature_vector,
    ops_of,
    tensor_bytes,
)
from ..features.schedule import SCHEDULE_FEATURE_NAMES, schedule_feature_vector
from ..hardware import FEATURE_NAMES as HW_FEATURE_NAMES
from ..hardware import HardwareSpec
from ..shards import iter_lines, iter_shard, shard_paths

#: node features that describe a kernel's place in a graph, not the kernel itself
GRAPH_ONLY = ("log_param_bytes", "log_input_bytes", "is_first", "is_last")


def kernel_node_feature_names() -> list[str]:
    """The node features a kernel has on its own (no pattern: workloads do not keep it)."""
    return [n for n in node_feature_names()
            if n not in GRAPH_ONLY and not n.startswith("pattern_")]


def kernel_feature_names() -> list[str]:
    """Columns of :attr:`KernelTable.x`: kernel, then schedule, then hardware features."""
    return [*kernel_node_feature_names(), *SCHEDULE_FEATURE_NAMES,
            *(f"hw_{n}" for n in HW_FEATURE_NAMES)]


def kernel_input_vector(node: KernelNode, trace_json: Any, hw: HardwareSpec) -> list[float]:
    """One row of the table, for a kernel whether it was measured alone or sits in a graph."""
    names = node_feature_names()
    full = dict(zip(names, node_feature_vector(node, n_nodes=2), strict=True))
    sched = schedule_feature_vector(
        trace_json, simd_width=hw.simd_width, threads=hw.threads, l1d_kb=hw.l1d_kb,
        l2_kb=hw.l2_kb, parallel_extent=node.loops.get("parallel_extent", 1.0))
    return [full[n] for n in kernel_node_feature_names()] + sched + hw.feature_vector()


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

    @property
    def group(self) -> np.ndarray:
        return np.char.add(np.char.add(self.workload.astype(str), "|"), self.hw_id.astype(str))

    def subset(self, rows: np.ndarray) -> KernelTable:
        return replace(self, x=self.x[rows], log_ms=self.log_ms[rows],
                       workload=self.workload[rows], hw_id=self.hw_id[rows],
                       unscheduled=self.unscheduled[rows])


def _record_hardware(rec: dict[str, Any]) -> HardwareSpec:
    hw = HardwareSpec.from_dict(rec["hw"])
    if rec.get("reference"):
        hw = replace(hw, reference_ms={k: float(v["median_ms"])
                                       for k, v in rec["reference"].items()})
    return hw


def _scheduled(ms_record: list[Any], workload: Any) -> tuple[Any, Any]:
    """(scheduled PrimFunc, target) of a MetaSchedule record, by replaying its trace."""
    import tvm
    from tvm.s_tir.meta_schedule.database import TuningRecord

    record = TuningRecord.from_json(ms_record, workload)
    return record.as_measure_candidate().sch.mod["main"], tvm.target.Target(record.target)


def _row(rec: dict[str, Any], workload: Any) -> list[float]:
    from ..features.analyses import kernel_statics  # TVM: only to build the table

    ms_record = rec["ms_record"]
    if isinstance(ms_record, str):
        ms_record = json.loads(ms_record)
    func, target = _scheduled(ms_record, workload)
    statics = kernel_statics(func, target)
    # MetaSchedule's record: [trace (JSON, read as replayed), run secs, target, args_info]
    # MetaSchedule's args_info: ["TENSOR", dtype, shape] per buffer, the output last
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
                               _record_hardware(rec))


def _code_fingerprint() -> str:
    """What a cached row depends on besides its record: the feature code, this module (how
    a row is made), the hardware description and the columns."""
    h = hashlib.sha256(f"{code_version()}|{','.join(kernel_feature_names())}".encode())
    for module in (Path(__file__), Path(__file__).parent.parent / "hardware.py"):
        h.update(module.read_bytes())
    return h.hexdigest()[:16]


_ARRAYS = ("x", "log_ms", "workload", "hw_id", "unscheduled")


def _shard_rows(records: list[dict[str, Any]], workloads: dict[str, Any],
                parsed: dict[str, Any], bar: Any) -> dict[str, np.ndarray]:
    """The table's arrays for the records of one shard (those whose workload is known)."""
    from tvm.s_tir.meta_schedule.database import Workload

    rows: list[list[float]] = []
    kept: list[dict[str, Any]] = []
    for rec in records:
        bar.update(1)
        wid = rec["workload_id"]
        if wid not in workloads:
            continue  # a record whose workload line was lost with a killed writer
        if wid not in parsed:
            parsed[wid] = Workload.from_json(workloads[wid])
        rows.append(_row(rec, parsed[wid]))
        kept.append(rec)
    return {
        "x": np.asarray(rows, dtype=np.float32).reshape(len(rows), len(kernel_feature_names())),
        "log_ms": np.log(np.asarray([r["latency"]["median_ms"] for r in kept],
                                    dtype=np.float64)),
        "workload": np.asarray([r["workload_id"] for r in kept], dtype=str),
        "hw_id": np.asarray([r["hw_id"] for r in kept], dtype=str),
        "unscheduled": np.asarray([r["schedule"] == "unscheduled" for r in kept], dtype=bool),
    }


def _build(folder: DatasetFolder, progress: bool) -> KernelTable:
    """Rows shard by shard, each shard's rows cached under ``processed/kernel_rows/`` by its
    contents and the feature code: a grown dataset only computes its new shards' rows."""
    from tqdm import tqdm

    workloads: dict[str, Any] = {}
    by_shard: dict[Path, list[dict[str, Any]]] = {}
    for path in shard_paths(folder.kernels):
        by_shard[path] = []
        for o in iter_shard(path):
            if o.get("kind") == "kernel_workload":
                workloads[o["workload_id"]] = o["ms_workload"]
            elif o.get("kind") == "kernel_record":
                by_shard[path].append(o)
    cache_dir = folder.processed / "kernel_rows" / _code_fingerprint()
    cached: dict[Path, Path] = {
        path: cache_dir / f"{path.name}-{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}.npz"
        for path in by_shard}
    todo = sum(len(recs) for path, recs in by_shard.items() if not cached[path].exists())
    parts: list[dict[str, np.ndarray]] = []
    parsed: dict[str, Any] = {}
    with tqdm(total=todo, desc="kernel features", disable=not progress or not todo,
              unit="schedule") as bar:
        for path, recs in by_shard.items():
            if cached[path].exists():
                with np.load(cached[path], allow_pickle=False) as z:
                    parts.append({k: z[k] for k in _ARRAYS})
                continue
            part = _shard_rows(recs, workloads, parsed, bar)
            parts.append(part)
            if len(part["log_ms"]) == len(recs):  # every workload known: final for this shard
                for stale in cache_dir.glob(f"{path.name}-*.npz"):
                    stale.unlink()  # the rows of this shard before it grew
                buf = io.BytesIO()
                np.savez_compressed(buf, **part)
                write_bytes(cached[path], buf.getvalue())
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
