"""The dataset folder's records as a PyTorch Geometric ``InMemoryDataset``, cached per
content fingerprint."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import InMemoryDataset
from tqdm import tqdm

from gnnperf.atomic import atomic_path
from gnnperf.collect.graph_traces import join_traces
from gnnperf.data.encoding import record_to_data
from gnnperf.errors import DatasetError, one_line
from gnnperf.estimators.kernel.dataset import CandidateMemo, tuned_candidates
from gnnperf.features import KernelGraph
from gnnperf.features.schema import feature_names
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.records import serial_figures
from gnnperf.store.shards import (
    SCHEMA_VERSION,
    iter_lines,
    latest_records,
    shard_paths,
    structural_id,
)

#: Bump when the fields of the encoded ``Data`` items change (invalidates processed caches).
_DATA_LAYOUT = 9  # 9: serial kernels read the one-thread hardware view

GRAPH_KINDS = ("kernel", "onnx")


def _records_and_graphs(shards_dir: Path, kind: str = "kernel"
                        ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records, and the graphs each one is encoded from, keyed by graph id (operator graphs
    also by the model id of the record that first wrote them, for older records)."""
    graphs: dict[str, Any] = {}
    traces: list[dict[str, Any]] = []
    structural: dict[str, str] | None = None if kind == "kernel" else {}
    kinds = ("graph", "graph_traces") if kind == "kernel" else ("onnx_graph",)
    lines = iter_lines(shards_dir, kinds=kinds)
    # bars on a terminal only (disable=None): elsewhere an error stays the one line it is
    for obj in tqdm(lines, desc="reading graphs", unit=" graphs", mininterval=1.0,
                    disable=None):
        if obj["kind"] == "graph_traces":
            traces.append(obj)
            continue
        graphs[obj["graph_id"]] = obj["graph"]
        if structural is not None:  # under the id :func:`latest_records` gives records
            # (each graph hashed once, here), and under the model id for records from
            # before ``onnx_graph_id``
            structural[obj["graph_id"]] = structural_id(obj["graph"])
            graphs.setdefault(structural[obj["graph_id"]], obj["graph"])
            graphs.setdefault(obj["model_id"], obj["graph"])
    join_traces(graphs, traces)
    return latest_records(shards_dir, structural), graphs


def _encodable(records: list[dict[str, Any]], graphs: dict[str, Any], kind: str
               ) -> list[tuple[dict[str, Any], str]]:
    """The records a dataset of graph ``kind`` encodes, in order, with their graph ids:
    a kernel graph must be stored (an operator graph is made again where it is not)."""
    out = []
    for rec in records:
        gid = rec["graph_id"] if kind == "kernel" else rec.get("onnx_graph_id") or rec["model_id"]
        if kind != "kernel" or gid in graphs:
            out.append((rec, gid))
    return out


def encoded_keys(root: str | os.PathLike[str] | DatasetFolder | None = None) -> list[str]:
    """The record keys of a folder's kernel-graph dataset, in its order, read from the
    shards alone (nothing processed): what a cache must hold to be that folder's."""
    records, graphs = _records_and_graphs(DatasetFolder.resolve(root).shards)
    return [rec["key"] for rec, _ in _encodable(records, graphs, "kernel")]


def _regenerate_onnx_graph(record: dict[str, Any]) -> dict[str, Any]:
    """Operator graph of a record collected before operator graphs were stored."""
    from gnnperf import zoo
    from gnnperf.features import extract_onnx_graph
    from gnnperf.frontend import load_onnx

    spec = zoo.ModelSpec.from_dict(record["model"])
    return extract_onnx_graph(load_onnx(zoo.export_onnx(spec))).to_dict()


def fingerprint(root: str | os.PathLike[str] | DatasetFolder | None = None) -> str:
    """Content hash of the record and kernel shards of a dataset folder and of the feature
    layout (kernel shards: a ``tuned`` record's kernels read their candidates there).

    Re-measurements for the noise floor (``noise/``) do not change what is trained on,
    so they leave the fingerprint (and processed caches, checkpoints' match) alone.
    """
    folder = DatasetFolder.resolve(root)
    h = hashlib.sha256(
        f"schema{SCHEMA_VERSION}|layout{_DATA_LAYOUT}|{','.join(feature_names())}".encode())
    for path in shard_paths(folder.shards):
        # named as in the standard layout, so a flat folder hashes like its standard twin
        h.update(f"shards/{path.name}".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    if folder.kernels.is_dir():  # a tuned record's kernels read their candidates there
        for path in shard_paths(folder.kernels):
            h.update(f"kernels/{path.name}".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]

def existing_folder(root: str | os.PathLike[str] | DatasetFolder | None) -> DatasetFolder:
    """A dataset folder that holds shards, or a one-line :class:`DatasetError`."""
    folder = DatasetFolder.resolve(root)
    if not folder.root.exists():
        raise DatasetError(f"dataset folder {folder.root} does not exist")
    if not folder.has_shards():
        raise DatasetError(f"no dataset shards in {folder.root} (looked in {folder.shards}); "
                           "write some with `gnnperf collect --out DIR`")
    return folder

class LatencyDataset(InMemoryDataset):
    """PyG dataset over the shards of a dataset folder (default: the shipped datasets/).

    ``root`` is any spelling :meth:`DatasetFolder.resolve` accepts.

    ``graph="kernel"`` (default) encodes the TVM-lowered kernel graph of each record;
    ``graph="onnx"`` the unfused ONNX operator graph of the same records, in the same
    order and with the same labels (no per-kernel labels), for the ablation.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, transform: Any = None,
                 force_reload: bool = False, graph: str = "kernel") -> None:
        folder = existing_folder(root)
        if graph not in GRAPH_KINDS:
            raise DatasetError(f"unknown graph kind '{graph}'; use one of {GRAPH_KINDS}")
        self.graph_kind = graph
        self.folder = folder
        self._fingerprint = fingerprint(folder)
        # PyG's "Processing..." would be a second line beside an error's one
        super().__init__(str(folder.root), transform, force_reload=force_reload, log=False)
        try:
            self.load(self.processed_paths[0])
        except Exception:  # an unreadable cache (another torch, a disk error): rebuild it
            Path(self.processed_paths[0]).unlink(missing_ok=True)
            self.process()
            try:
                self.load(self.processed_paths[0])
            except Exception as exc:
                raise DatasetError(f"cannot read the processed dataset cache "
                                   f"{self.processed_paths[0]}: {one_line(exc)}") from None

    @property
    def raw_dir(self) -> str:
        return str(self.folder.shards)

    @property
    def processed_dir(self) -> str:
        return str(self.folder.processed)

    @property
    def raw_file_names(self) -> list[str]:
        return [str(p.relative_to(self.raw_dir)) for p in shard_paths(self.raw_dir)]

    @property
    def processed_file_names(self) -> list[str]:
        suffix = "" if self.graph_kind == "kernel" else f"-{self.graph_kind}"
        return [f"data-{self._fingerprint}{suffix}.pt"]

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def download(self) -> None:
        raise DatasetError(f"no dataset shards under {self.raw_dir}")

    def process(self) -> None:
        records, graphs = _records_and_graphs(Path(self.raw_dir), self.graph_kind)
        cache: dict[str, KernelGraph] = {}
        encoded: list[tuple[dict[str, Any], KernelGraph, bool]] = []
        for rec, gid in _encodable(records, graphs, self.graph_kind):
            if gid not in graphs:
                graphs[gid] = _regenerate_onnx_graph(rec)
            if gid not in cache:
                cache[gid] = KernelGraph.from_dict(graphs[gid])
            is_tuned = (self.graph_kind == "kernel"
                        and BuildConfig.parse(rec["build"]).kind == "tuned")
            encoded.append((rec, cache[gid], is_tuned))
        # each kernel of a tuned record reads the schedules the kernel dataset measured for
        # its workload on the record's hardware (the ones its tuned build picked from)
        needed = {(n.struct_hash, rec["hw_id"])
                  for rec, graph, is_tuned in encoded if is_tuned for n in graph.nodes}
        candidates = tuned_candidates(self.folder, needed=needed) if needed else {}
        serial = serial_figures(rec for rec, _, _ in encoded)
        memo: CandidateMemo = {}
        items = []
        for rec, graph, is_tuned in tqdm(encoded, desc=f"encoding {self.graph_kind} graphs",
                                         disable=None,
                                         unit="record", mininterval=1.0):
            if is_tuned:
                graph = graph.with_candidates(
                    lambda n, hw_id=rec["hw_id"]: candidates.get((n.struct_hash, hw_id), []))
            data = record_to_data(rec, graph, serial, memo)
            if self.graph_kind != "kernel":
                data.kernel_mask = torch.zeros_like(data.kernel_mask)
            items.append(data)
        if not items:
            raise DatasetError(f"no records in {self.raw_dir}")
        target = Path(self.processed_paths[0])
        with atomic_path(target) as tmp:
            self.save(items, str(tmp))
        self._prune_stale_caches(target)

    def _prune_stale_caches(self, keep: Path) -> None:
        """Caches of older shard contents (same graph kind) are never read again."""
        pattern = re.compile(r"data-[0-9a-f]{16}" + re.escape(keep.name[len("data-") + 16:]))
        for path in keep.parent.glob("data-*.pt"):
            if path != keep and pattern.fullmatch(path.name):
                path.unlink(missing_ok=True)
