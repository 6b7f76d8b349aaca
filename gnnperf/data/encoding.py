"""Records and kernel graphs as PyG ``Data``: node features (kernel ⊕ build ⊕ hardware),
dataflow edges, whole-model and per-kernel labels."""

from __future__ import annotations

import math

import torch
from torch_geometric.data import Data

from gnnperf.errors import DatasetError
from gnnperf.estimators.kernel.dataset import CandidateMemo, candidate_rows, kernel_input_vector
from gnnperf.features import KernelGraph, node_feature_vector
from gnnperf.features.graph import has_parallel_loop
from gnnperf.features.schema import HARDWARE, build_vector
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.store.lines import RecordLine
from gnnperf.store.records import SerialFigures, record_hardware, split_group
from gnnperf.store.shards import is_v2


def graph_to_data(graph: KernelGraph, hw: HardwareSpec, build: str | None = None,
                  memo: CandidateMemo | None = None) -> Data:
    """Node features (kernel ⊕ build ⊕ hardware), dataflow edges with log bytes; no labels.

    ``build`` defaults to the graph's own (operator graphs carry none and must pass it).
    """
    n = len(graph.nodes)
    if n == 0:
        raise DatasetError("a kernel graph without kernels cannot be encoded")
    # a kernel without a parallel loop runs on one core at any thread count: it reads the
    # one-thread view of the hardware, so serial kernels (every kernel of a ``default``
    # build) cost the same at 1 and N threads by construction
    serial_hw = hw.serial_view()
    node_hw = [hw if node.parallel else serial_hw for node in graph.nodes]
    build_columns = build_vector(build or graph.build)
    vectors = {id(h): build_columns + h.feature_vector() for h in (hw, serial_hw)}
    x = torch.tensor([node_feature_vector(node, n) + vectors[id(h)]
                      for node, h in zip(graph.nodes, node_hw, strict=True)],
                     dtype=torch.float32)
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
    x_kernel = torch.tensor([kernel_input_vector(node, node.schedule_trace, hw)
                             for node in graph.nodes], dtype=torch.float32)
    # a searched kernel's candidate schedules (best-of:S: the S it was picked from;
    # tuned:N: the design space the search starts from), each row naming its kernel (PyG
    # shifts an ``*_index`` attribute by the nodes before it when it batches graphs)
    candidates = [(node.index, row, cand) for node in graph.nodes if searched
                  for row, cand in zip(candidate_rows(node, hw, memo), node.candidates,
                                       strict=True)]
    x_candidates = torch.tensor([row for _, row, _ in candidates], dtype=torch.float32
                                ).reshape(len(candidates), x_kernel.shape[1])
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
                   serial: SerialFigures | None = None, memo: CandidateMemo | None = None
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
