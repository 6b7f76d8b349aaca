"""Encoded records shipped beside the shards, so a fresh clone trains without processing.

Encoding every record's kernel graph (``DIR/processed/data-*.pt``: 930 MB at 4,973
records) took a fresh clone's ``python train.py`` over ten minutes before its first
epoch. Packs (``DIR/packs/*.pack``) hold the encoded items small: a model's kernels look
the same at every hardware setting but for the hardware columns, and a workload's
candidate schedules recur in every model that has it, so each row of the big float tables
is kept once (exact float32) with an index back, compressed (~4 kB per record).

A pack never goes stale as a whole. Each item carries the digest of what it was encoded
from (:func:`gnnperf.data.dataset.item_digest`: its record line, its graph's traces, for a
``best-of`` record the kernel shards), and processing takes an item from the packs only
where that digest still holds, re-encoding the rest. The hardware columns, which also
read the one-thread medians of *all* records of a CPU, are rewritten on the way in
(:func:`gnnperf.data.encoding.with_hardware`). Packs are added like shards: ``gnnperf
dataset pack`` writes a new file with the items no pack holds (the files before it stay
byte for byte, so version control stores only the new one), and rewrites them all only
when the encoding code changed (:func:`encoding_version`). The packs travel with the
repository, so a lent GPU box trains on them too.
"""

from __future__ import annotations

import hashlib
import io
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch_geometric.data import Data
from torch_geometric.data.collate import collate
from torch_geometric.data.separate import separate

from gnnperf.atomic import write_bytes
from gnnperf.errors import DatasetError, one_line
from gnnperf.features.cache import code_version
from gnnperf.features.schema import schema_digest

if TYPE_CHECKING:
    from gnnperf.data.dataset import LatencyDataset

#: the float tables a pack stores once per distinct row
DEDUPLICATED = ("x", "x_kernel", "x_candidates")
_MAGIC = b"gnnperf-pack-2\n"  # then the encoding version and a newline, then the tables
PACK_GLOB = "pack-[0-9][0-9][0-9][0-9].pack"
_PACKAGE = Path(__file__).resolve().parents[1]
#: what turns a stored record and graph into an item, beside the feature code, the TVM
#: version (:func:`gnnperf.features.cache.code_version`) and the feature schema
_ENCODING_SOURCES = ("data/dataset.py", "data/encoding.py", "estimators/kernel/dataset.py",
                     "hardware/spec.py", "lowering/build_config.py", "store/records.py",
                     "store/shards.py", "collect/graph_traces.py")


def encoding_version() -> str:
    """Hash of the code that encodes items: items encoded by other code are never taken
    from a pack (nor from a processed cache)."""
    h = hashlib.sha256(f"{code_version()}|{schema_digest()}".encode())
    for name in _ENCODING_SOURCES:
        h.update((_PACKAGE / name).read_bytes())
    return h.hexdigest()[:16]


def pack_paths(folder: Path) -> list[Path]:
    return sorted(folder.glob(PACK_GLOB)) if folder.is_dir() else []


def _read(path: Path, version: str) -> dict[str, Any] | None:
    """One pack's tables, as written; None for a pack of other encoding code. A file that
    is not a readable pack is named in a warning and treated as stale (the next ``gnnperf
    dataset pack`` replaces it): it must not stop training, nor the packing that mends it."""
    try:
        blob = path.read_bytes()
        if not blob.startswith(_MAGIC):
            raise ValueError("not a dataset pack")
        header_end = blob.index(b"\n", len(_MAGIC))
        if blob[len(_MAGIC):header_end].decode() != version:
            return None
        return torch.load(io.BytesIO(zlib.decompress(blob[header_end + 1:])),
                          weights_only=True)
    except Exception as exc:
        warnings.warn(f"{path} is not a readable dataset pack ({one_line(exc)}): its "
                      "records are encoded instead; `gnnperf dataset pack` replaces it",
                      stacklevel=2)
        return None


class PackedItems:
    """The items of a folder's packs encoded by this code, by (record key, digest). The
    deduplicated tables stay deduplicated until an item is taken."""

    def __init__(self, folder: Path) -> None:
        self._packs: list[tuple[Data, dict[str, Any], dict[str, Any]]] = []
        self._where: dict[tuple[str, str], tuple[int, int]] = {}
        #: packs of other encoding code or unreadable: replaced by the next ``pack``
        self.stale: list[Path] = []
        version = encoding_version()
        for path in pack_paths(folder):
            packed = _read(path, version)
            if packed is None:
                self.stale.append(path)
                continue
            data = packed["data"]
            tables = {name: data.pop(name) for name in DEDUPLICATED}
            rest = Data.from_dict(data)
            self._packs.append((rest, packed["slices"], tables))
            for i, key_digest in enumerate(zip(rest.key, rest.digest, strict=True)):
                self._where[key_digest] = (len(self._packs) - 1, i)

    def __contains__(self, key_digest: tuple[str, str]) -> bool:
        return key_digest in self._where

    def __len__(self) -> int:
        return len(self._where)

    def get(self, key: str, digest: str) -> Data:
        """The item of record ``key`` encoded from what ``digest`` names (its own tensors)."""
        pack, index = self._where[(key, digest)]
        rest, slices, tables = self._packs[pack]
        item = separate(cls=Data, batch=rest, idx=index, slice_dict=slices, decrement=False)
        for name, table in tables.items():
            start, end = int(slices[name][index]), int(slices[name][index + 1])
            item[name] = table["rows"][table["index"][start:end].long()]
        return item


@dataclass
class PackSummary:
    path: Path | None  # None: every item was packed already
    records: int  # items in the new pack
    packed_before: int  # items already in the folder's packs, kept
    pack_mb: float
    rows: dict[str, tuple[int, int]]  # table → (rows, distinct rows) of the new pack

    def line(self) -> str:
        if self.path is None:
            return f"all {self.packed_before} records are packed already"
        tables = ", ".join(f"{k} {n} → {u} rows" for k, (n, u) in self.rows.items())
        return (f"packed {self.records} records into {self.path} ({self.pack_mb:.1f} MB; "
                f"{self.packed_before} were packed already; {tables})")


def _write(items: list[Data], path: Path) -> dict[str, tuple[int, int]]:
    data, slices, _ = collate(Data, items, increment=False, add_batch=False)
    stored = data.to_dict()
    rows: dict[str, tuple[int, int]] = {}
    for name in DEDUPLICATED:
        distinct, index = torch.unique(stored[name], dim=0, return_inverse=True)
        rows[name] = (len(index), len(distinct))
        stored[name] = {"rows": distinct, "index": index.to(torch.int32)}
    buffer = io.BytesIO()
    torch.save({"data": stored, "slices": dict(slices)}, buffer)
    write_bytes(path, _MAGIC + encoding_version().encode() + b"\n"
                + zlib.compress(buffer.getvalue(), 6))
    return rows


def pack(dataset: LatencyDataset) -> PackSummary:
    """Add the items of ``dataset`` (a kernel-graph dataset, whose processed cache is
    keyed by this encoding code too) that its folder's packs do not hold to a new pack
    there; packs of other encoding code, or unreadable, are replaced by it."""
    if dataset.graph_kind != "kernel":
        raise DatasetError("only kernel-graph datasets are packed")
    folder = dataset.folder.packs
    held = PackedItems(folder)
    items = [item for item in dataset if (item.key, item.digest) not in held]
    summary = PackSummary(None, 0, len(held), 0.0, {})
    if items:
        numbers = [int(p.stem.split("-")[1]) for p in pack_paths(folder)]
        path = folder / f"pack-{max(numbers, default=0) + 1:04d}.pack"
        summary = PackSummary(path, len(items), len(held), 0.0, _write(items, path))
        summary.pack_mb = path.stat().st_size / 1e6
    for stale in held.stale:  # only once what they held is in a pack again
        stale.unlink()
    return summary
