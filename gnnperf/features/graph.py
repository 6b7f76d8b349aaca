"""The kernel graph's data types: :class:`KernelNode`, :class:`KernelGraph`, and tensor sizes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8,
                "int32": 4, "int8": 1, "uint8": 1, "bool": 1, "int16": 2}


def dtype_bytes(dtype: str) -> int:
    if dtype in _DTYPE_BYTES:
        return _DTYPE_BYTES[dtype]
    bits = re.findall(r"\d+", dtype)
    return max(1, int(bits[-1]) // 8) if bits else 4


def tensor_bytes(shape: Iterable[int], dtype: str) -> int:
    return int(np.prod(list(shape), dtype=np.int64)) * dtype_bytes(dtype)


def has_parallel_loop(loops: Mapping[str, float]) -> bool:
    """Whether analyses ``loops`` (:data:`gnnperf.features.schema.LOOP_KEYS`) hold a
    parallel loop: a kernel's, or one of a ``best-of`` kernel's candidate schedules'."""
    return float(loops.get("parallel_extent", 1.0)) > 1.0


@dataclass
class KernelNode:
    """One executed kernel call and what it does."""

    index: int
    name: str
    kind: str  # "tir" or "builtin"
    ops: list[str]
    pattern: str
    struct_hash: str
    in_shapes: list[list[int]]
    in_dtypes: list[str]
    out_shapes: list[list[int]]
    out_dtypes: list[str]
    flops: float
    bytes_read: int
    bytes_written: int
    param_bytes: int
    input_bytes: int
    loops: dict[str, float] = field(default_factory=dict)
    ms_features: list[float] = field(default_factory=list)
    #: analyses (of :data:`ANALYSES`) that could not run on this kernel
    missing: list[str] = field(default_factory=list)
    #: why the build left this kernel unscheduled (empty: the build's schedule applied)
    schedule_fallback: str = ""
    #: MetaSchedule's trace of the schedule (``Trace.as_json()``) where MetaSchedule drew it
    #: (``sampled:*``); None for other builds, builtins, and graphs from before traces were
    #: kept. What the kernel cost model reads as the schedule's decisions.
    schedule_trace: list[Any] | None = None
    #: ``best-of`` builds only: the S schedules the search picks this kernel's from (sampled, not
    #: measured), each ``{"features": {flops, loops, ms_features, missing}, "trace": ...}``
    #: as a kernel record stores them. Dataset shards' graphs have none (``extract_graph``
    #: never fills them); a cached prediction graph stores them once per kernel name.
    candidates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def parallel(self) -> bool:
        """Whether the kernel has a parallel loop: only then can more threads speed it up
        (a serial kernel runs on one core whatever the thread pool holds)."""
        return has_parallel_loop(self.loops)

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved: where the kernel sits on the roofline."""
        return self.flops / max(1, self.bytes_read + self.bytes_written)


@dataclass
class KernelGraph:
    """The executed kernel DAG of one model, for one target and build configuration."""

    nodes: list[KernelNode]
    edges: list[tuple[int, int, int]]  # (src, dst, tensor bytes)
    target: dict[str, Any]
    build: str
    inputs: dict[str, tuple[tuple[int, ...], str]]

    # -- views ------------------------------------------------------------------------------
    @property
    def total_flops(self) -> float:
        return float(sum(n.flops for n in self.nodes))

    @property
    def total_bytes(self) -> int:
        return int(sum(n.bytes_read + n.bytes_written for n in self.nodes))

    def summary(self) -> dict[str, Any]:
        return {
            "kernels": len(self.nodes),
            "tir_kernels": sum(n.kind == "tir" for n in self.nodes),
            "kernels_missing_analyses": sum(bool(n.missing) for n in self.nodes),
            "kernels_unscheduled_by_build": sum(bool(n.schedule_fallback) for n in self.nodes),
            "distinct_kernels": len({n.name for n in self.nodes}),
            "edges": len(self.edges),
            "gflops": self.total_flops / 1e9,
            "mbytes": self.total_bytes / 1e6,
            "build": self.build,
            "target": self.target,
        }

    def with_candidates(self, candidates: Callable[[KernelNode], list[dict[str, Any]]]
                        ) -> KernelGraph:
        """A copy whose TIR kernels carry ``candidates(node)`` (a ``best-of`` build's)."""
        return replace(self, nodes=[replace(n, candidates=candidates(n)) if n.kind == "tir"
                                    else n for n in self.nodes])

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data. Candidates (a searched build's) are stored once per kernel name
        under ``candidates``: the calls of one function share them (a BERT's 184 kernels
        are 14 functions, and its best-of graph was 13 copies of the same candidates)."""
        shared: dict[str, list[dict[str, Any]]] = {}
        nodes = []
        for n in self.nodes:
            # a shallow copy per node: its values are already plain JSON data, and
            # ``asdict``'s deep copy of ~200 features a node was a tenth of a lowering
            node = {k: v for k, v in vars(n).items() if k != "candidates"}
            if n.candidates:
                first = shared.setdefault(n.name, n.candidates)
                if first is not n.candidates and first != n.candidates:
                    node["candidates"] = n.candidates  # a call whose list differs keeps its own
            nodes.append(node)
        for node, n in zip(nodes, self.nodes, strict=True):
            if not n.candidates and n.name in shared:
                node["candidates"] = []  # a call without any must not read its name's
        out = {
            "nodes": nodes,
            "edges": [list(e) for e in self.edges],
            "target": self.target,
            "build": self.build,
            "inputs": {k: [list(s), d] for k, (s, d) in self.inputs.items()},
        }
        if shared:  # graphs of unsearched builds serialise as before
            out["candidates"] = shared
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelGraph:
        """The graph :meth:`to_dict` wrote (or one written before candidates were shared,
        each node holding its own); nodes of one name share one candidate list."""
        shared = data.get("candidates", {})
        return cls(
            nodes=[KernelNode(**{"candidates": shared.get(n["name"], []), **n})
                   for n in data["nodes"]],
            edges=[(int(a), int(b), int(c)) for a, b, c in data["edges"]],
            target=dict(data["target"]),
            build=str(data["build"]),
            inputs={k: (tuple(s), d) for k, (s, d) in data["inputs"].items()},
        )


def ops_of(name: str) -> list[str]:
    """Primitive ops fused into a kernel, from TVM's naming (``fused_conv2d1_add_relu``)."""
    parts = name.removeprefix("fused_").split("_")
    ops: list[str] = []
    merged: list[str] = []
    # TVM joins op names with '_' and op names may themselves contain '_' (layer_norm,
    # strided_slice): keep known compound names together.
    compound = {("layer", "norm"), ("strided", "slice"), ("group", "norm"),
                ("batch", "norm"), ("max", "pool2d"), ("avg", "pool2d"),
                ("adaptive", "avg"), ("rms", "norm"), ("instance", "norm"),
                ("expand", "dims"), ("broadcast", "to"), ("permute", "dims")}
    i = 0
    while i < len(parts):
        if i + 1 < len(parts) and (parts[i], re.sub(r"\d+$", "", parts[i + 1])) in compound:
            merged.append(parts[i] + "_" + parts[i + 1])
            i += 2
        else:
            merged.append(parts[i])
            i += 1
    for part in merged:
        op = re.sub(r"\d+$", "", part)
        if op:
            ops.append(op)
    return ops
