"""Schedule traces for kernel graphs stored before lowering kept them.

A ``sampled:k`` graph's schedules are a function of each kernel and ``k``
(:func:`gnnperf.lowering.schedules.sample_traced_schedule`), so lowering the record's model again
draws the same ones, now with their MetaSchedule traces. They are stored beside the graph
as ``graph_traces`` lines (shards are append-only; the graph and its id stay as they
were) and joined to the graph's nodes when the dataset is read. A graph lowered again is
checked against the stored one, kernel by kernel (name and structural hash of the
scheduled program); a mismatch (another TVM, another sampler) is recorded as a
``graph_traces_failure`` and the graph keeps no traces.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gnnperf.errors import one_line
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import RecordLine
from gnnperf.store.shards import ShardWriter, iter_lines, latest_records

if TYPE_CHECKING:  # the collector (TVM) is needed to add traces, not to read them
    from gnnperf.collect.models import CollectSummary

TRACE_KINDS = ("graph_traces", "graph_traces_failure")


def join_traces(graphs: dict[str, dict[str, Any]], lines: Iterable[dict[str, Any]]) -> None:
    """Set ``schedule_trace`` on the nodes of ``graphs`` (graph dicts by id) from
    ``graph_traces`` lines; lines of graphs not in ``graphs`` are ignored."""
    for line in lines:
        graph = graphs.get(line["graph_id"])
        if line["kind"] != "graph_traces" or graph is None:
            continue
        for node, trace in zip(graph["nodes"], line["traces"], strict=True):
            node["schedule_trace"] = trace


def _needs_traces(graph: dict[str, Any]) -> bool:
    return (BuildConfig.parse(graph["build"]).kind == "sampled"
            and not any(n.get("schedule_trace") for n in graph["nodes"]))


def _relowered_traces(record: RecordLine, graph: dict[str, Any]
                      ) -> tuple[list[Any] | None, str]:
    """(each node's trace, "") when lowering ``record``'s model again gives ``graph``'s
    kernels; (None, why) otherwise."""
    from gnnperf import zoo
    from gnnperf.features import extract_graph
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.pipeline import lower_onnx

    spec = zoo.ModelSpec.from_dict(record["model"])
    hw = HardwareSpec.from_dict(record["hw"])
    again = extract_graph(lower_onnx(zoo.export_onnx(spec), hw, graph["build"]),
                          ms_features=False)
    stored = [(n["name"], n["struct_hash"]) for n in graph["nodes"]]
    fresh = [(n.name, n.struct_hash) for n in again.nodes]
    if stored != fresh:
        differ = next((a, b) for a, b in zip(stored, fresh, strict=False) if a != b) \
            if len(stored) == len(fresh) else (len(stored), len(fresh))
        return None, f"lowered again, the kernels differ: {differ}"
    return [n.schedule_trace for n in again.nodes], ""


def add_graph_traces(root: str | os.PathLike[str] | DatasetFolder | None = None, *,
                     limit: int | None = None, progress: bool = True) -> CollectSummary:
    """Lower again the model of every ``sampled:*`` graph of ``root`` that has no traces
    and store its traces (resumable: graphs already done or failed are skipped)."""
    from tqdm import tqdm

    from gnnperf.collect.models import CollectSummary

    folder = DatasetFolder.resolve(root)
    start = time.time()
    graphs = {o["graph_id"]: o["graph"] for o in iter_lines(folder.shards, kinds=("graph",))}
    settled = {o["graph_id"] for o in iter_lines(folder.shards, kinds=TRACE_KINDS)}
    first_record: dict[str, RecordLine] = {}
    for rec in latest_records(folder.shards):
        first_record.setdefault(rec["graph_id"], rec)
    todo = [gid for gid, g in graphs.items()
            if gid in first_record and gid not in settled and _needs_traces(g)]
    summary = CollectSummary(skipped=len(settled))
    todo = todo[:limit] if limit is not None else todo
    host = socket.gethostname().split(".")[0] or "host"
    with ShardWriter(folder.shards, f"traces-{host}") as writer:
        for gid in tqdm(todo, desc="graph traces", unit="graph", disable=not progress):
            try:
                traces, why = _relowered_traces(first_record[gid], graphs[gid])
            except Exception as exc:  # TVM raises many error types from C++
                traces, why = None, f"{type(exc).__name__}: {one_line(exc)}"
            if traces is None:
                writer.append({"kind": "graph_traces_failure", "graph_id": gid, "reason": why})
                summary.failed += 1
                summary.failures["lower"] += 1
            else:
                writer.append({"kind": "graph_traces", "graph_id": gid, "traces": traces})
                summary.done += 1
    summary.seconds = time.time() - start
    return summary
