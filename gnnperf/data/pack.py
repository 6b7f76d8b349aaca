"""A processed dataset in one small file, for a machine that trains without the shards.

The processed kernel-graph cache (``DIR/processed/data-*.pt``: 640 MB at 3,965 records)
is too big to send to a lent GPU box, yet most of it repeats: a model's kernels look the
same at every hardware setting but for the hardware columns, and a workload's candidate
schedules recur in every model that has it. A pack keeps each row of the big float tables
once (exact float32, no rounding) with an index back, compressed: 17.5 MB at 3,965
records. Unpacked into a dataset folder that holds the same records' shards (the kernel
shards need not come along), it becomes that folder's cache, so ``LatencyDataset``
(``gnnperf train``, ``tools/compare_configs.py``) loads it without processing anything.

Only the kernel-graph cache is packed: the unfused-ONNX ablation's graphs and the kernel
model's table (which ``gnnperf bench`` also reads) are not.
"""

from __future__ import annotations

import io
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data

from gnnperf.atomic import atomic_path, write_bytes
from gnnperf.data.dataset import LatencyDataset, encoded_keys, existing_folder, fingerprint
from gnnperf.errors import DatasetError, one_line

#: the float tables a pack stores once per distinct row
DEDUPLICATED = ("x", "x_kernel", "x_candidates")
_MAGIC = b"gnnperf-pack-1\n"


@dataclass
class PackSummary:
    path: Path
    records: int
    cache_mb: float
    pack_mb: float
    rows: dict[str, tuple[int, int]]  # table → (rows, distinct rows)

    def line(self) -> str:
        tables = ", ".join(f"{k} {n} → {u} rows" for k, (n, u) in self.rows.items())
        return (f"packed {self.records} records into {self.path} ({self.pack_mb:.1f} MB, "
                f"from a {self.cache_mb:.0f} MB cache; {tables})")


def pack(root: str | os.PathLike[str] | None, out: str | os.PathLike[str]) -> PackSummary:
    """Write the kernel-graph cache of the dataset folder ``root`` (processed first if it
    is not yet) to the file ``out``."""
    dataset = LatencyDataset(root)
    cache = Path(dataset.processed_paths[0])
    data, slices, _ = torch.load(cache, weights_only=False)
    rows: dict[str, tuple[int, int]] = {}
    for name in DEDUPLICATED:
        distinct, index = torch.unique(data[name], dim=0, return_inverse=True)
        rows[name] = (len(index), len(distinct))
        data[name] = {"rows": distinct, "index": index.to(torch.int32)}
    buffer = io.BytesIO()
    torch.save({"data": data, "slices": slices, "fingerprint": dataset.fingerprint}, buffer)
    out = Path(out)
    write_bytes(out, _MAGIC + zlib.compress(buffer.getvalue(), 6))
    return PackSummary(out, len(dataset), cache.stat().st_size / 1e6,
                       out.stat().st_size / 1e6, rows)


def read_pack(source: str | os.PathLike[str]) -> dict[str, Any]:
    """The pack's tables as ``InMemoryDataset`` stores them, and the fingerprint of the
    folder it was made from; a one-line error for anything else."""
    try:
        blob = Path(source).read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read the pack {source}: {one_line(exc)}") from None
    if not blob.startswith(_MAGIC):
        raise DatasetError(f"{source} is not a dataset pack (write one with "
                           "`gnnperf dataset pack`)")
    try:
        packed = torch.load(io.BytesIO(zlib.decompress(blob[len(_MAGIC):])),
                            weights_only=True)
    except Exception as exc:
        raise DatasetError(f"the pack {source} is damaged: {one_line(exc)}") from None
    data = packed["data"]
    for name in DEDUPLICATED:
        data[name] = data[name]["rows"][data[name]["index"].long()]
    return packed


def unpack(source: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> Path:
    """Make the pack ``source`` the kernel-graph cache of the dataset folder ``root``,
    whose shards must hold the very records it was made from; returns the cache's path."""
    folder = existing_folder(root)
    packed = read_pack(source)
    keys = list(packed["data"]["key"])
    here = encoded_keys(folder)
    if keys != here:
        missing = len(set(keys) - set(here))
        raise DatasetError(
            f"the pack holds {len(keys)} records, {folder.root}'s shards {len(here)} "
            f"({missing} of the pack's are not there): unpack it beside the shards it was "
            f"made from (dataset {packed['fingerprint']})")
    target = folder.processed / f"data-{fingerprint(folder)}.pt"
    with atomic_path(target) as tmp:
        torch.save((packed["data"], packed["slices"], Data), str(tmp))
    return target
