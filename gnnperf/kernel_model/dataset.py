"""The kernel dataset as a table: one row per measured schedule, the kernel model's inputs.

Each ``kernel_record`` is MetaSchedule's own (workload + tuning record), so its program is
rebuilt by replaying the trace on the workload, and described exactly as a node of a
kernel graph is (:func:`gnnperf.features.node_feature_vector`, less what only a graph
knows: its position and neighbours' bytes), plus what the schedule decided
(:mod:`gnnperf.features.schedule`) and the hardware as it was while it was timed
(static figures and the reference kernels' times of measurement v2).

Rows are cached under the folder's ``processed/``, keyed by the kernel shards' contents and
the feature code, so a table is built once (about 30 ms a schedule).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
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
from ..shards import iter_lines, shard_paths

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


def _scheduled(rec: dict[str, Any], workload: Any) -> tuple[Any, Any, Any]:
    """(scheduled PrimFunc, trace JSON, target) of a record, by replaying its trace."""
    import tvm
    from tvm.s_tir.meta_schedule.database import TuningRecord

    record = TuningRecord.from_json(rec["ms_record"], workload)
    sch = record.as_measure_candidate().sch
    return sch.mod["main"], record.trace.as_json(), tvm.target.Target(record.target)


def _row(rec: dict[str, Any], workload: Any) -> list[float]:
    from ..features.analyses import kernel_statics  # TVM: only to build the table

    func, trace_json, target = _scheduled(rec, workload)
    statics = kernel_statics(func, target)
    ms_record = rec["ms_record"]
    if isinstance(ms_record, str):
        ms_record = json.loads(ms_record)
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
    return kernel_input_vector(node, trace_json if rec["schedule"] != "unscheduled" else None,
                               _record_hardware(rec))


def _fingerprint(folder: DatasetFolder) -> str:
    h = hashlib.sha256(f"{code_version()}|{','.join(kernel_feature_names())}".encode())
    for path in shard_paths(folder.kernels):
        h.update(path.name.encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def _build(folder: DatasetFolder, progress: bool) -> KernelTable:
    from tqdm import tqdm
    from tvm.s_tir.meta_schedule.database import Workload

    workloads: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    for o in iter_lines(folder.kernels, kinds=("kernel_workload", "kernel_record")):
        if o["kind"] == "kernel_workload":
            workloads[o["workload_id"]] = o["ms_workload"]
        else:
            records.append(o)
    rows: list[list[float]] = []
    kept: list[dict[str, Any]] = []
    parsed: dict[str, Any] = {}
    for rec in tqdm(records, desc="kernel features", disable=not progress, unit="schedule"):
        wid = rec["workload_id"]
        if wid not in workloads:
            continue  # a record whose workload line was lost with a killed writer
        if wid not in parsed:
            parsed[wid] = Workload.from_json(workloads[wid])
        rows.append(_row(rec, parsed[wid]))
        kept.append(rec)
    if not kept:
        raise DatasetError(f"no kernel records in {folder.kernels}; "
                           "collect some with `gnnperf collect-kernels`")
    return KernelTable(
        x=np.asarray(rows, dtype=np.float32),
        log_ms=np.log(np.asarray([r["latency"]["median_ms"] for r in kept], dtype=np.float64)),
        workload=np.asarray([r["workload_id"] for r in kept]),
        hw_id=np.asarray([r["hw_id"] for r in kept]),
        unscheduled=np.asarray([r["schedule"] == "unscheduled" for r in kept]),
        feature_names=kernel_feature_names(),
    )


def load_kernel_table(root: str | os.PathLike[str] | DatasetFolder | None = None, *,
                      progress: bool = True) -> KernelTable:
    """The kernel dataset of ``root`` as a :class:`KernelTable`, from the cache if current."""
    folder = DatasetFolder.resolve(root)
    if not folder.kernels.is_dir() or not shard_paths(folder.kernels):
        raise DatasetError(f"no kernel dataset in {folder.root} (looked in {folder.kernels}); "
                           "collect one with `gnnperf collect-kernels`")
    cache = folder.processed / f"kernel_table-{_fingerprint(folder)}.npz"
    if cache.exists():
        with np.load(cache, allow_pickle=False) as z:
            return KernelTable(x=z["x"], log_ms=z["log_ms"], workload=z["workload"],
                               hw_id=z["hw_id"], unscheduled=z["unscheduled"],
                               feature_names=list(z["feature_names"]))
    table = _build(folder, progress)
    buf = io.BytesIO()
    np.savez_compressed(buf, x=table.x, log_ms=table.log_ms, workload=table.workload,
                        hw_id=table.hw_id, unscheduled=table.unscheduled,
                        feature_names=np.asarray(table.feature_names))
    write_bytes(cache, buf.getvalue())
    return table


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
