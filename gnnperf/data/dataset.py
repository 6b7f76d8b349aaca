"""The dataset folder's records as a PyTorch Geometric ``InMemoryDataset``, cached per
content fingerprint."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data, InMemoryDataset
from tqdm import tqdm

from gnnperf.atomic import atomic_path
from gnnperf.collect.graph_traces import join_traces
from gnnperf.data.encoding import EncodingMemo, record_to_data, with_hardware
from gnnperf.data.pack import PackedItems, encoding_version
from gnnperf.digest import file_sha256
from gnnperf.errors import DatasetError, one_line
from gnnperf.estimators.kernel.dataset import tuned_candidates
from gnnperf.features import KernelGraph
from gnnperf.features.schema import feature_names
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import RecordLine
from gnnperf.store.records import record_hardware, serial_figures
from gnnperf.store.shards import (
    SCHEMA_VERSION,
    iter_lines,
    iter_shard,
    kind_filter,
    latest_records,
    shard_paths,
    structural_id,
)

#: Bump when the fields of the encoded ``Data`` items change (invalidates processed caches).
_DATA_LAYOUT = 10  # 10: serial masks and each item's digest (packs)

GRAPH_KINDS = ("kernel", "onnx")


def _kernel_graphs(shards_dir: Path, ids: AbstractSet[str] | None = None
                   ) -> tuple[dict[str, Any], set[str]]:
    """Kernel graphs by graph id, with the schedule traces added to them since (of ``ids``
    only, if given: the text of other graph lines, most of a shard, is never parsed), and
    the ids of every stored graph."""
    kinds = kind_filter(("graph", "graph_traces"))
    stored: set[str] = set()

    def keep(line: str) -> bool:
        if not kinds(line):
            return False
        if ids is None or '"kind":"graph"' not in line:
            return True  # traces, and lines written otherwise
        # a writer's line ends with its own graph_id, after the graph
        at = line.rfind('"graph_id":"') + len('"graph_id":"')
        gid = line[at:line.find('"', at)]
        stored.add(gid)
        return gid in ids

    graphs: dict[str, Any] = {}
    traces: list[dict[str, Any]] = []
    lines = (obj for path in shard_paths(shards_dir) for obj in iter_shard(path, keep))
    # bars on a terminal only (disable=None): elsewhere an error stays the one line it is
    for obj in tqdm(lines, desc="reading graphs", unit=" graphs", mininterval=1.0,
                    disable=None):
        if obj["kind"] == "graph_traces":
            traces.append(obj)
        elif obj["kind"] == "graph":
            stored.add(obj["graph_id"])
            if ids is None or obj["graph_id"] in ids:
                graphs[obj["graph_id"]] = obj["graph"]
    join_traces(graphs, traces)
    return graphs, stored


def _onnx_records_and_graphs(shards_dir: Path) -> tuple[list[RecordLine], dict[str, Any]]:
    """The records of encodable builds, and the operator graphs they are encoded from,
    keyed by graph id (also by the model id of the record that first wrote them, for older
    records)."""
    graphs: dict[str, Any] = {}
    structural: dict[str, str] = {}
    for obj in iter_lines(shards_dir, kinds=("onnx_graph",)):
        # under the id :func:`latest_records` gives records (each graph hashed once,
        # here), and under the model id for records from before ``onnx_graph_id``
        graphs[obj["graph_id"]] = obj["graph"]
        structural[obj["graph_id"]] = structural_id(obj["graph"])
        graphs.setdefault(structural[obj["graph_id"]], obj["graph"])
        graphs.setdefault(obj["model_id"], obj["graph"])
    records = list(latest_records(shards_dir, structural))
    return records, graphs


def _shards_digest(paths: list[Path], folder: str) -> hashlib._Hash:
    # named as in the standard layout, so a flat folder hashes like its standard twin
    h = hashlib.sha256()
    for path in paths:
        h.update(f"{folder}/{path.name}".encode())
        h.update(bytes.fromhex(file_sha256(path)))
    return h


def item_digest(record: RecordLine, traces: str, kernels: str) -> str:
    """What an encoded record depends on besides the encoding code and the hardware
    figures of its CPU's other records: its record line, its kernel graph (content-
    addressed) with the traces added to it since, its operator graph's structural id (its
    split group), and for a ``best-of`` record the kernel shards its candidates come from."""
    text = (f"{record.get('crc')}|{record['graph_id']}|{record.get('onnx_graph_id')}|"
            f"{traces}|{kernels}")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _regenerate_onnx_graph(record: RecordLine) -> dict[str, Any]:
    """Operator graph of a record collected before operator graphs were stored."""
    from gnnperf import zoo
    from gnnperf.features import extract_onnx_graph
    from gnnperf.frontend import load_onnx

    spec = zoo.ModelSpec.from_dict(record["model"])
    return extract_onnx_graph(load_onnx(zoo.export_onnx(spec))).to_dict()


def fingerprint(root: str | os.PathLike[str] | DatasetFolder | None = None) -> str:
    """Content hash of the record and kernel shards of a dataset folder and of the feature
    layout (kernel shards: a ``best-of`` record's kernels read their candidates there).

    Re-measurements for the noise floor (``noise/``) do not change what is trained on,
    so they leave the fingerprint (and processed caches, checkpoints' match) alone.
    """
    folder = DatasetFolder.resolve(root)
    h = hashlib.sha256(
        f"schema{SCHEMA_VERSION}|layout{_DATA_LAYOUT}|{','.join(feature_names())}".encode())
    h.update(_shards_digest(shard_paths(folder.shards), "shards").digest())
    if folder.kernels.is_dir():  # a best-of record's kernels read their candidates there
        h.update(_shards_digest(shard_paths(folder.kernels), "kernels").digest())
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
        # the encoding code too: items encoded by other code are never read back (nor
        # packed from); the fingerprint, which checkpoints match on, is the data's alone
        suffix = "" if self.graph_kind == "kernel" else f"-{self.graph_kind}"
        return [f"data-{self._fingerprint}-{encoding_version()[:8]}{suffix}.pt"]

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def download(self) -> None:
        raise DatasetError(f"no dataset shards under {self.raw_dir}")

    def record_ids(self) -> list[Data]:
        """Each item's ids and flags (model, family, hardware id, group, v2, build), in
        order, without its graphs: what splits and bookkeeping read, at no cost of
        materialising thousands of graphs."""
        store = self._data
        return [Data(model_id=store.model_id[i], family=store.family[i],
                     hw_id=store.hw_id[i], group=store.group[i], v2=bool(store.v2[i]),
                     build=store.build[i])
                for i in self.indices()]

    def process(self) -> None:
        items = (self._encode_kernel_graphs() if self.graph_kind == "kernel"
                 else self._encode_onnx_graphs())
        if not items:
            raise DatasetError(f"no records in {self.raw_dir}")
        target = Path(self.processed_paths[0])
        with atomic_path(target) as tmp:
            self.save(items, str(tmp))
        self._prune_stale_caches(target)

    def _encode_kernel_graphs(self) -> list[Data]:
        """Every record with a stored kernel graph, encoded: taken from the folder's packs
        where its :func:`item_digest` still holds (hardware columns rewritten), else
        encoded from its graph (only those graphs are read)."""
        shards = Path(self.raw_dir)
        records = list(latest_records(shards))
        traces: dict[str, str] = {}
        for line in iter_lines(shards, kinds=("graph_traces",)):
            traces[line["graph_id"]] = traces.get(line["graph_id"], "") + line["crc"]
        # searched builds' kernels read the schedules the kernel dataset measured for their
        # workload: a best-of build picked from them, a tuned:N search starts from them
        tuned = [BuildConfig.parse(rec["build"]).searched for rec in records]
        kernels = (_shards_digest(shard_paths(self.folder.kernels), "kernels").hexdigest()
                   if any(tuned) and self.folder.kernels.is_dir() else "")
        digests = [item_digest(rec, traces.get(rec["graph_id"], ""), kernels if t else "")
                   for rec, t in zip(records, tuned, strict=True)]
        packed = PackedItems(self.folder.packs)
        reused = [(rec["key"], d) in packed for rec, d in zip(records, digests, strict=True)]
        graphs, stored = _kernel_graphs(
            shards, {rec["graph_id"] for rec, r in zip(records, reused, strict=True) if not r})
        # a record is encoded only with its kernel graph stored, packed or not
        reused = [r and rec["graph_id"] in stored
                  for rec, r in zip(records, reused, strict=True)]
        todo = [i for i, r in enumerate(reused)
                if not r and records[i]["graph_id"] in graphs]
        encodable = sorted([i for i, r in enumerate(reused) if r] + todo)
        decoded = {gid: KernelGraph.from_dict(graphs[gid])
                   for gid in {records[i]["graph_id"] for i in todo}}
        # each kernel of a best-of record reads the schedules the kernel dataset measured
        # for its workload on the record's hardware (the ones its build picked from)
        needed = {(n.struct_hash, records[i]["hw_id"])
                  for i in todo if tuned[i] for n in decoded[records[i]["graph_id"]].nodes}
        candidates = tuned_candidates(self.folder, needed=needed) if needed else {}
        serial = serial_figures(records[i] for i in encodable)
        memo = EncodingMemo(per_node=False)  # candidate rows only: few graphs share nodes
        items = []
        for i in tqdm(encodable, desc="encoding kernel graphs", disable=None,
                      unit="record", mininterval=1.0):
            rec = records[i]
            if reused[i]:
                data = with_hardware(packed.get(rec["key"], digests[i]),
                                     record_hardware(rec, serial))
            else:
                graph = decoded[rec["graph_id"]]
                if tuned[i]:
                    graph = graph.with_candidates(
                        lambda n, hw_id=rec["hw_id"]: candidates.get((n.struct_hash, hw_id),
                                                                      []))
                data = record_to_data(rec, graph, serial, memo)
                data.digest = digests[i]
            items.append(data)
        return items

    def _encode_onnx_graphs(self) -> list[Data]:
        """Every record's unfused operator graph (made again where none is stored)."""
        records, graphs = _onnx_records_and_graphs(Path(self.raw_dir))
        cache: dict[str, KernelGraph] = {}
        encoded: list[tuple[RecordLine, KernelGraph]] = []
        for rec in records:
            gid = rec.get("onnx_graph_id") or rec["model_id"]
            if gid not in graphs:
                graphs[gid] = _regenerate_onnx_graph(rec)
            if gid not in cache:
                cache[gid] = KernelGraph.from_dict(graphs[gid])
            encoded.append((rec, cache[gid]))
        serial = serial_figures(rec for rec, _ in encoded)
        items = []
        for rec, graph in tqdm(encoded, desc="encoding onnx graphs", disable=None,
                               unit="record", mininterval=1.0):
            data = record_to_data(rec, graph, serial)
            data.kernel_mask = torch.zeros_like(data.kernel_mask)
            items.append(data)
        return items

    def _prune_stale_caches(self, keep: Path) -> None:
        """Caches of older shard contents or encoding code (same graph kind) are never
        read again."""
        suffix = "" if self.graph_kind == "kernel" else f"-{self.graph_kind}"
        pattern = re.compile(r"data-[0-9a-f]{16}(-[0-9a-f]{8})?" + re.escape(f"{suffix}.pt"))
        for path in keep.parent.glob("data-*.pt"):
            if path != keep and pattern.fullmatch(path.name):
                path.unlink(missing_ok=True)
