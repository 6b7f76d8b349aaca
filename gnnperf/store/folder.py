"""One convention for dataset folders, shared by every command that reads or writes one.

A dataset folder ``DIR`` holds the measured records in ``DIR/shards/``, re-measurements
for the noise floor in ``DIR/noise/``, the kernel dataset (many schedules per kernel) in
``DIR/kernels/``, encoded records in ``DIR/packs/`` and PyG caches in ``DIR/processed/``. Every
command (``collect --out``, ``dataset stats|remeasure --root``, ``train --root``,
``bench --root``, :class:`gnnperf.data.LatencyDataset`) takes ``DIR`` and resolves it
here, so what one writes the others read. Two other spellings are accepted, because
earlier versions wrote them:

- ``DIR/shards`` itself (``collect --out datasets/shards`` was the documented call):
  a folder named ``shards`` with no ``shards/`` inside is the shards folder of its parent;
- a flat folder with shard files directly inside (what ``collect --out DIR`` wrote
  before this convention): its shards are read and extended where they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gnnperf.store.shards import shard_paths

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "datasets"


def default_root() -> Path:
    """The shipped dataset folder (``GNNPERF_DATASETS`` overrides it)."""
    return Path(os.environ.get("GNNPERF_DATASETS", DEFAULT_ROOT))


def _holds_shards(folder: Path) -> bool:
    return folder.is_dir() and bool(shard_paths(folder))


@dataclass(frozen=True)
class DatasetFolder:
    """Where the parts of one dataset live."""

    root: Path
    shards: Path

    @property
    def noise(self) -> Path:
        return self.root / "noise"

    @property
    def kernels(self) -> Path:
        """The kernel dataset: workloads and their measured schedules."""
        return self.root / "kernels"

    @property
    def processed(self) -> Path:
        """PyG caches, made here from the shards (not shipped)."""
        return self.root / "processed"

    @property
    def packs(self) -> Path:
        """Encoded records, shipped so a fresh clone need not process them all
        (:mod:`gnnperf.data.pack`)."""
        return self.root / "packs"

    @classmethod
    def resolve(cls, path: str | os.PathLike[str] | DatasetFolder | None = None
                ) -> DatasetFolder:
        """The dataset at ``path`` (default: the shipped one), in any accepted spelling.

        A folder that does not exist yet gets the standard layout (``path/shards``).
        """
        if isinstance(path, DatasetFolder):
            return path
        root = Path(path) if path is not None else default_root()
        if (root / "shards").is_dir():
            return cls(root, root / "shards")
        if root.name == "shards":
            return cls(root.parent, root)
        if _holds_shards(root):
            return cls(root, root)
        return cls(root, root / "shards")

    def has_shards(self) -> bool:
        """Whether any record shard exists yet (a fresh folder has none)."""
        return _holds_shards(self.shards)
