"""Records and kernel graphs as PyG ``Data``: node features (kernel ⊕ build ⊕ hardware),
dataflow edges, whole-model and per-kernel labels."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from gnnperf.errors import DatasetError
from gnnperf.estimators.kernel.dataset import (
    CandidateMemo,
    candidate_rows,
    hardware_key,
    kernel_input_vector,
)
from gnnperf.features import KernelGraph, KernelNode, node_feature_names, node_feature_vector
from gnnperf.features.graph import has_parallel_loop
from gnnperf.features.schema import HARDWARE, build_vector, kernel_feature_names
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.store.lines import RecordLine
from gnnperf.store.records import SerialFigures, record_hardware, split_group
from gnnperf.store.shards import is_v2


@dataclass
class EncodingMemo:
    """Tables already made in one encoding pass. The graphs of one pass can share one node
    list (``advise`` encodes a lowered graph at each build and thread count; the thread
    counts of one record share its graph), so its node features are made once, its
    kernel-model rows and candidate rows once per hardware, and a workload's candidate
    rows once per hardware across graphs. Each table is kept with the node list it was
    made from (keyed by its ``id``), so no id is reused while the memo lives.

    ``per_node=False`` keeps the workloads' candidate rows only: for a pass over a
    dataset, whose graphs are mostly distinct, per-graph tables would hold every row."""

    per_node: bool = True
    candidates: CandidateMemo = field(default_factory=dict)
    tables: dict[tuple[Any, ...], tuple[object, np.ndarray]] = field(default_factory=dict)

    def table(self, key: tuple[Any, ...], nodes: list[KernelNode],
              make: Callable[[], list[list[float]]], width: int) -> np.ndarray:
        """The float32 table ``make`` gives for ``nodes``, made once per ``key``."""
        if not self.per_node:
            return _float32(make(), width)
        full = (*key, id(nodes))
        if full not in self.tables:
            self.tables[full] = (nodes, _float32(make(), width))
        return self.tables[full][1]


def _float32(rows: list[list[float]], width: int) -> np.ndarray:
    """``rows`` as float32 (NumPy walks nested lists several times faster than
    ``torch.tensor``; both round each value to float32 alike)."""
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), width)


def graph_to_data(graph: KernelGraph, hw: HardwareSpec, build: str | None = None,
                  memo: EncodingMemo | None = None) -> Data:
    """Node features (kernel ⊕ build ⊕ hardware), dataflow edges with log bytes; no labels.

    ``build`` defaults to the graph's own (operator graphs carry none and must pass it).
    ``memo``: shared by the graphs of one encoding pass (:class:`EncodingMemo`).
    """
    nodes = graph.nodes
    n = len(nodes)
    if n == 0:
        raise DatasetError("a kernel graph without kernels cannot be encoded")
    memo = memo if memo is not None else EncodingMemo()
    features = memo.table(("nodes", n), nodes,
                          lambda: [node_feature_vector(node, n) for node in nodes],
                          len(node_feature_names()))
    # a kernel without a parallel loop runs on one core at any thread count: it reads the
    # one-thread view of the hardware, so serial kernels (every kernel of a ``default``
    # build) cost the same at 1 and N threads by construction
    parallel = np.array([node.parallel for node in nodes], dtype=bool)[:, None]
    tails = np.where(parallel, np.asarray(hw.feature_vector(), dtype=np.float32),
                     np.asarray(hw.serial_view().feature_vector(), dtype=np.float32))
    build_columns = np.asarray(build_vector(build or graph.build), dtype=np.float32)
    x = torch.from_numpy(np.concatenate(
        [features, np.broadcast_to(build_columns, (n, len(build_columns))), tails], axis=1))
    if graph.edges:
        edge_index = torch.tensor([[a for a, _, _ in graph.edges], [b for _, b, _ in graph.edges]],
                                  dtype=torch.long)
        edge_attr = torch.tensor([[math.log1p(c)] for _, _, c in graph.edges],
                                 dtype=torch.float32)
    else:
        edge_index = torch.zeros((2, 0), dtype=torch.long)
        edge_attr = torch.zeros((0, 1), dtype=torch.float32)
    searched = BuildConfig.parse(build or graph.build).searched
    # the kernel cost model's inputs: each kernel described as the kernel dataset describes
    # a measured schedule (tir kernels only; builtins are data movement it never saw)
    # (each row takes the serial view itself where its kernel or candidate is serial)
    hw_key = hardware_key(hw) if memo.per_node else ()
    width = len(kernel_feature_names())
    x_kernel = torch.from_numpy(memo.table(
        ("kernels", *hw_key), nodes,
        lambda: [kernel_input_vector(node, node.schedule_trace, hw) for node in nodes], width))
    # a searched kernel's candidate schedules (best-of:S: the S it was picked from;
    # tuned:N: the design space the search starts from), each row naming its kernel (PyG
    # shifts an ``*_index`` attribute by the nodes before it when it batches graphs)
    candidates = [(node.index, cand) for node in nodes if searched for cand in node.candidates]
    x_candidates = torch.from_numpy(memo.table(
        ("candidates", *hw_key), nodes,
        lambda: [row for node in nodes for row in candidate_rows(node, hw, memo.candidates)],
        width) if candidates else np.zeros((0, width), dtype=np.float32))
    return Data(x=x, edge_index=edge_index, edge_attr=edge_attr, num_nodes=n,
                x_kernel=x_kernel, x_candidates=x_candidates,
                candidates_node_index=torch.tensor([i for i, _ in candidates],
                                                   dtype=torch.long),
                kernel_model_mask=torch.tensor([node.kind == "tir" for node in graph.nodes]),
                kernel_tuned=torch.full((n,), searched, dtype=torch.bool),
                # which rows read the one-thread hardware: see :func:`with_hardware`
                node_serial=torch.tensor([not node.parallel for node in graph.nodes],
                                         dtype=torch.bool),
                candidates_serial=torch.tensor(
                    [not has_parallel_loop(cand["features"]["loops"])
                     for _, cand in candidates], dtype=torch.bool))


def with_hardware(data: Data, hw: HardwareSpec) -> Data:
    """``data`` (from :func:`graph_to_data`) as if encoded for ``hw``'s figures: every
    feature table ends with the hardware's columns (:meth:`HardwareSpec.feature_vector`,
    its one-thread view on the rows of serial kernels and schedules), and nothing else in
    an item reads the figures that change between two encodings of the same record (the
    one-thread medians of :func:`gnnperf.store.records.serial_figures`); ISA, threads and
    caches are the record's own. Rewriting those columns is the same as encoding again."""
    width = len(HARDWARE)
    full = torch.tensor(hw.feature_vector(), dtype=torch.float32)
    serial = torch.tensor(hw.serial_view().feature_vector(), dtype=torch.float32)
    for table, mask in (("x", "node_serial"), ("x_kernel", "node_serial"),
                        ("x_candidates", "candidates_serial")):
        rows = getattr(data, table)
        tails = torch.where(getattr(data, mask)[:, None], serial, full)
        setattr(data, table, torch.cat([rows[:, :-width], tails], dim=1))
    return data


def record_to_data(record: RecordLine, graph: KernelGraph,
                   serial: SerialFigures | None = None, memo: EncodingMemo | None = None
                   ) -> Data:
    data = graph_to_data(graph, record_hardware(record, serial), record["build"], memo)
    n = data.num_nodes
    kernels = record.get("kernels_ms")
    if kernels is not None and len(kernels) == n:
        y_kernel = torch.tensor([math.log(max(k, 1e-6)) for k in kernels], dtype=torch.float32)
        mask = torch.ones(n, dtype=torch.bool)
    else:
        y_kernel = torch.zeros(n, dtype=torch.float32)
        mask = torch.zeros(n, dtype=torch.bool)
    data.y = torch.tensor([math.log(record["whole"]["median_ms"])], dtype=torch.float32)
    data.y_kernel = y_kernel
    data.kernel_mask = mask
    data.kernel_sum_ms = torch.tensor([record.get("kernel_sum_ms") or float("nan")],
                                      dtype=torch.float32)
    data.cv = torch.tensor([record["whole"].get("cv", 0.0)], dtype=torch.float32)
    data.threads = torch.tensor([int(record["hw"]["threads"])], dtype=torch.long)
    # pre-v2 labels (no machine state beside them) are never tested on, and weigh less
    data.v2 = torch.tensor([is_v2(record)], dtype=torch.bool)
    data.model_id = record["model_id"]
    data.group = split_group(record)
    data.family = record["model"]["family"]
    data.hw_id = record["hw_id"]
    data.build = record["build"]
    data.key = record["key"]
    return data
