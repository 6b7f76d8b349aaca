"""A disk cache of what lowering and feature extraction compute, shared by calls and processes.

Almost all of a prediction's time is TVM's: import, legalize, fuse, schedule sampling,
TIR analyses and PerStoreFeature. The same work repeats across calls: a NAS space shares
most kernels between candidates, and one model asked for several hardware configs is
lowered once per ISA. Three tables:

- ``kernel``: a kernel's static analyses, keyed by the scheduled PrimFunc's structural
  hash and the target;
- ``schedule``: a kernel's sampled schedule (its MetaSchedule trace), keyed by the
  unscheduled workload's structural hash, the seed and the target;
- ``graph``: a model's whole kernel graph, keyed by the ONNX content, input shapes,
  build and target (thread counts share it: the code does not depend on them).

It is one SQLite file in the user's cache folder, in WAL mode, so processes read and
write it at once. It is bounded: beyond ``max_entries`` the least recently used entries go.
And it is versioned: every key includes a hash of the code that computes the values (the
import, build, lowering and feature modules) and TVM's version, so changing either
invalidates it. Set ``GNNPERF_FEATURE_CACHE=0`` to switch it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from gnnperf import __version__
from gnnperf.hardware.spec import cache_dir

_PACKAGE = Path(__file__).resolve().parents[1]
#: Modules whose code decides what is cached; editing one invalidates every entry.
SOURCES = (
    # every module of the frontend and features packages, so a new one is hashed too
    *sorted(f"frontend/{p.name}" for p in (_PACKAGE / "frontend").glob("*.py")),
    "lowering/schedules.py",
    "lowering/pipeline.py",
    "lowering/constant_folding.py",
    *sorted(f"features/{p.name}" for p in (_PACKAGE / "features").glob("*.py")),
)
DEFAULT_MAX_ENTRIES = 200_000


def _tvm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("apache-tvm")
    except PackageNotFoundError:  # a TVM built from source, not installed from PyPI
        import tvm

        return str(tvm.__version__)


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the code that computes cached values, and of the TVM it runs on (its version
    read from the installed distribution: a cache lookup must not import TVM, ~2 s)."""
    h = hashlib.sha256(f"{__version__}|{_tvm_version()}".encode())
    for name in SOURCES:
        h.update((_PACKAGE / name).read_bytes())
    return h.hexdigest()[:16]


def _loads(text: str) -> Any:
    """JSON as :func:`json.dumps` wrote it: orjson (twice as fast on a cached graph), or
    the standard parser for the values orjson refuses (``Infinity``, ``NaN``)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class FeatureCache:
    """Values (JSON) by (table, key), least recently used dropped beyond ``max_entries``."""

    def __init__(self, path: str | os.PathLike[str], max_entries: int = DEFAULT_MAX_ENTRIES
                 ) -> None:
        self.path = Path(path)
        self.max_entries = max_entries
        self._pid = -1
        self._conn: sqlite3.Connection | None = None
        self._puts = 0

    def _db(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():  # a forked child opens its own
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS entries (tab TEXT, key TEXT, value TEXT, "
                         "used REAL, PRIMARY KEY (tab, key))")
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def get(self, table: str, key: str) -> Any | None:
        db = self._db()
        row = db.execute("SELECT value FROM entries WHERE tab=? AND key=?",
                         (table, f"{code_version()}|{key}")).fetchone()
        if row is None:
            return None
        db.execute("UPDATE entries SET used=? WHERE tab=? AND key=?",
                   (time.time(), table, f"{code_version()}|{key}"))
        return _loads(row[0])

    def put(self, table: str, key: str, value: Any) -> None:
        db = self._db()
        db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)",
                   (table, f"{code_version()}|{key}", json.dumps(value), time.time()))
        self._puts += 1
        if self._puts % 500 == 1:
            self.prune()

    def prune(self) -> None:
        """Drop entries of older code versions, then the least recently used beyond the bound."""
        db = self._db()
        db.execute("DELETE FROM entries WHERE key NOT LIKE ?", (f"{code_version()}|%",))
        (count,) = db.execute("SELECT COUNT(*) FROM entries").fetchone()
        if count > self.max_entries:
            db.execute("DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries "
                       "ORDER BY used LIMIT ?)", (count - self.max_entries,))

    def clear(self, table: str | None = None) -> None:
        """Forget one table's entries (all tables when None)."""
        if table is None:
            self._db().execute("DELETE FROM entries")
        else:
            self._db().execute("DELETE FROM entries WHERE tab=?", (table,))

    def __len__(self) -> int:
        (count,) = self._db().execute("SELECT COUNT(*) FROM entries").fetchone()
        return int(count)


_CACHES: dict[str, FeatureCache] = {}


def default_cache() -> FeatureCache | None:
    """The user's cache (``GNNPERF_CACHE_DIR`` or ``~/.cache/gnnperf``); None when
    ``GNNPERF_FEATURE_CACHE=0``."""
    if os.environ.get("GNNPERF_FEATURE_CACHE", "1") == "0":
        return None
    path = str(cache_dir() / "features.sqlite")
    if path not in _CACHES:
        _CACHES[path] = FeatureCache(path)
    return _CACHES[path]


def target_key(target: Any) -> str:
    """A stable text for a TVM target (or its dict)."""
    if hasattr(target, "export"):
        target = target.export()
    return json.dumps(target, sort_keys=True, default=str)
