"""Encoded records shipped beside the shards, so a fresh clone trains without processing.

Encoding every record's kernel graph (``DIR/processed/data-*.pt``: 930 MB at 4,973
records) took a fresh clone's ``python train.py`` over ten minutes before its first
epoch. Packs (``DIR/packs/*.pack``) hold the encoded items small: a model's kernels look
the same at every hardware setting but for the hardware columns, and a workload's
candidate schedules recur in every model that has it, so each row of the big float tables
is kept once (exact float32) with an index back, compressed (~4 kB per record).

A pack never goes stale as a whole. Each item carries the digest of what it was encoded
from (:func:`gnnperf.data.dataset.item_digest`: its record line, its graph's traces, for a
``tuned`` record the kernel shards), and processing takes an item from the packs only
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
from gnnperf.features.schema import schema_digest

if TYPE_CHECKING:
    from gnnperf.data.dataset import LatencyDataset

#: the float tables a pack stores once per distinct row
DEDUPLICATED = ("x", "x_kernel", "x_candidates")
_MAGIC = b"gnnperf-pack-2\n"
PACK_GLOB = "pack-[0-9][0-9][0-9][0-9].pack"
_PACKAGE = Path(__file__).resolve().parents[1]
#: what turns a stored record and graph into an item (beside the feature schema)
_ENCODING_SOURCES = (
    *sorted(f"features/{p.name}" for p in (_PACKAGE / "features").glob("*.py")),
    "data/dataset.py", "data/encoding.py",
    "estimators/kernel/dataset.py", "hardware/spec.py", "store/records.py",
    "store/shards.py", "collect/graph_traces.py",
)


def encoding_version() -> str:
    """Hash of the code that encodes items and of the feature schema: items encoded by
    other code are never taken from a pack."""
    h = hashlib.sha256(schema_digest().encode())
    for name in _ENCODING_SOURCES:
        h.update((_PACKAGE / name).read_bytes())
    return h.hexdigest()[:16]


def pack_paths(folder: Path) -> list[Path]:
    return sorted(folder.glob(PACK_GLOB)) if folder.is_dir() else []


def _read(path: Path) -> dict[str, Any]:
    """One pack file's contents, tables expanded; a one-line error for anything else."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read the pack {path}: {one_line(exc)}") from None
    if not blob.startswith(_MAGIC):
        raise DatasetError(f"{path} is not a dataset pack (write one with "
                           "`gnnperf dataset pack`)")
    try:
        packed = torch.load(io.BytesIO(zlib.decompress(blob[len(_MAGIC):])),
                            weights_only=True)
    except Exception as exc:
        raise DatasetError(f"the pack {path} is damaged: {one_line(exc)}") from None
    data = packed["data"]
    for name in DEDUPLICATED:
        data[name] = data[name]["rows"][data[name]["index"].long()]
    packed["data"] = Data.from_dict(data)
    return packed


class PackedItems:
    """The items of a folder's packs encoded by this code, by (record key, digest)."""

    def __init__(self, folder: Path) -> None:
        self._packs: list[dict[str, Any]] = []
        self._where: dict[tuple[str, str], tuple[int, int]] = {}
        #: packs of other encoding code: never read, replaced by the next ``pack``
        self.stale: list[Path] = []
        version = encoding_version()
        for path in pack_paths(folder):
            packed = _read(path)
            if packed["version"] != version:
                self.stale.append(path)
                continue
            self._packs.append(packed)
            data = packed["data"]
            for i, key_digest in enumerate(zip(data.key, data.digest, strict=True)):
                self._where[key_digest] = (len(self._packs) - 1, i)

    def __contains__(self, key_digest: tuple[str, str]) -> bool:
        return key_digest in self._where

    def __len__(self) -> int:
        return len(self._where)

    def get(self, key: str, digest: str) -> Data:
        """A copy of the item of record ``key`` encoded from what ``digest`` names."""
        pack, index = self._where[(key, digest)]
        packed = self._packs[pack]
        return separate(cls=Data, batch=packed["data"], idx=index,
                        slice_dict=packed["slices"], decrement=False)


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
    torch.save({"version": encoding_version(), "data": stored, "slices": dict(slices)},
               buffer)
    write_bytes(path, _MAGIC + zlib.compress(buffer.getvalue(), 6))
    return rows


def pack(dataset: LatencyDataset) -> PackSummary:
    """Add the items of ``dataset`` (a kernel-graph dataset) that its folder's packs do not
    hold to a new pack there; with other encoding code, replace every pack by one."""
    if dataset.graph_kind != "kernel":
        raise DatasetError("only kernel-graph datasets are packed")
    folder = dataset.folder.packs
    held = PackedItems(folder)
    items = [item for item in dataset if (item.key, item.digest) not in held]
    if not items:
        return PackSummary(None, 0, len(held), 0.0, {})
    numbers = [int(p.stem.split("-")[1]) for p in pack_paths(folder)]
    path = folder / f"pack-{max(numbers, default=0) + 1:04d}.pack"
    rows = _write(items, path)
    for stale in held.stale:  # only once the new pack is written
        stale.unlink()
    return PackSummary(path, len(items), len(held), path.stat().st_size / 1e6, rows)
