"""Records and kernel graphs as PyG ``Data``: node features (kernel ⊕ build ⊕ hardware),
dataflow edges, whole-model and per-kernel labels."""

from __future__ import annotations

import math
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
from gnnperf.features import KernelGraph, KernelNode, node_feature_vector
from gnnperf.features.graph import has_parallel_loop
from gnnperf.features.schema import HARDWARE, build_vector
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.store.lines import RecordLine
from gnnperf.store.records import SerialFigures, record_hardware, split_group
from gnnperf.store.shards import is_v2


@dataclass
class EncodingMemo:
    """Rows already made in one encoding pass. The graphs of one pass share node objects
    (a lowered graph at each thread count and build ``advise`` asks for; the thread counts
    of one record's graph), so a node's features are made once, its kernel-model row once
    per hardware, and a workload's candidate rows once per hardware. The memo holds each
    node it keys by ``id``, so no id is reused while it lives.

    ``per_node=False`` keeps the candidate rows only: for a pass over a dataset, whose
    graphs are mostly distinct, per-node rows would hold every row of every graph."""

    per_node: bool = True
    candidates: CandidateMemo = field(default_factory=dict)
    nodes: dict[tuple[int, int], tuple[KernelNode, list[float]]] = field(default_factory=dict)
    kernels: dict[tuple[Any, ...], tuple[KernelNode, list[float]]] = field(
        default_factory=dict)

    def node_row(self, node: KernelNode, n_nodes: int) -> list[float]:
        if not self.per_node:
            return node_feature_vector(node, n_nodes)
        key = (id(node), n_nodes)
        if key not in self.nodes:
            self.nodes[key] = (node, node_feature_vector(node, n_nodes))
        return self.nodes[key][1]

    def kernel_row(self, node: KernelNode, hw: HardwareSpec, hw_key: tuple[Any, ...]
                   ) -> list[float]:
        if not self.per_node:
            return kernel_input_vector(node, node.schedule_trace, hw)
        key = (id(node), *hw_key)
        if key not in self.kernels:
            self.kernels[key] = (node, kernel_input_vector(node, node.schedule_trace, hw))
        return self.kernels[key][1]


def _floats(rows: list[list[float]], width: int) -> torch.Tensor:
    """``rows`` as a float32 tensor (through NumPy: ``torch.tensor`` walks nested lists
    several times slower, and both round each value to float32 alike)."""
    return torch.from_numpy(np.asarray(rows, dtype=np.float32).reshape(len(rows), width))


def graph_to_data(graph: KernelGraph, hw: HardwareSpec, build: str | None = None,
                  memo: EncodingMemo | None = None) -> Data:
    """Node features (kernel ⊕ build ⊕ hardware), dataflow edges with log bytes; no labels.

    ``build`` defaults to the graph's own (operator graphs carry none and must pass it).
    ``memo``: shared by the graphs of one encoding pass (:class:`EncodingMemo`).
    """
    n = len(graph.nodes)
    if n == 0:
        raise DatasetError("a kernel graph without kernels cannot be encoded")
    memo = memo if memo is not None else EncodingMemo()
    # a kernel without a parallel loop runs on one core at any thread count: it reads the
    # one-thread view of the hardware, so serial kernels (every kernel of a ``default``
    # build) cost the same at 1 and N threads by construction
    serial_hw = hw.serial_view()
    node_hw = [hw if node.parallel else serial_hw for node in graph.nodes]
    build_columns = build_vector(build or graph.build)
    vectors = {id(h): build_columns + h.feature_vector() for h in (hw, serial_hw)}
    rows = [memo.node_row(node, n) + vectors[id(h)]
            for node, h in zip(graph.nodes, node_hw, strict=True)]
    x = _floats(rows, len(rows[0]))
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
    kernel_rows = [memo.kernel_row(node, hw, hw_key) for node in graph.nodes]
    x_kernel = _floats(kernel_rows, len(kernel_rows[0]))
    # a searched kernel's candidate schedules (best-of:S: the S it was picked from;
    # tuned:N: the design space the search starts from), each row naming its kernel (PyG
    # shifts an ``*_index`` attribute by the nodes before it when it batches graphs)
    candidates = [(node.index, row, cand) for node in graph.nodes if searched
                  for row, cand in zip(candidate_rows(node, hw, memo.candidates),
                                       node.candidates, strict=True)]
    x_candidates = _floats([row for _, row, _ in candidates], x_kernel.shape[1])
    return Data(x=x, edge_index=edge_index, edge_attr=edge_attr, num_nodes=n,
                x_kernel=x_kernel, x_candidates=x_candidates,
                candidates_node_index=torch.tensor([i for i, _, _ in candidates],
                                                   dtype=torch.long),
                kernel_model_mask=torch.tensor([node.kind == "tir" for node in graph.nodes]),
                kernel_tuned=torch.full((n,), searched, dtype=torch.bool),
                # which rows read the one-thread hardware: see :func:`with_hardware`
                node_serial=torch.tensor([not node.parallel for node in graph.nodes],
                                         dtype=torch.bool),
                candidates_serial=torch.tensor(
                    [not has_parallel_loop(cand["features"]["loops"])
                     for _, _, cand in candidates], dtype=torch.bool))


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
