"""Crash-safe dataset shards: gzip-compressed JSON lines with a checksum per line.

A shard is rewritten whole through a temp file and ``os.replace`` after every
appended line, so a kill at any moment leaves either the old or the new shard on
disk, never a torn one. A line that is not JSON or whose checksum does not match
(hand edits, disk errors) stops every reader of its kind (and every unfiltered one,
such as a collector extending the shard) with a :class:`DatasetError` naming the shard
and line: skipping it would silently train on less, and a collector extending that
shard would rewrite it without the line.

Four line kinds share a shard:

- ``graph``: a kernel graph, content-addressed by ``graph_id`` so that the thread
  counts of one (model, ISA, build) share one copy;
- ``onnx_graph``: the model's unfused operator graph (weights left out), content-addressed
  the same way, for the operator-graph ablation and for grouping splits;
- ``record``: one label, a (model, hardware, build) key, pointing at its kernel graph
  (``graph_id``) and operator graph (``onnx_graph_id``);
- ``failure``: a (model, hardware, build) key that could not be measured, and why.

A key measured again (``gnnperf collect --redo-noisy``) gets a second ``record``
line; :func:`latest_records` keeps the newest one.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import orjson

from gnnperf.atomic import write_bytes
from gnnperf.errors import DatasetError
from gnnperf.store.lines import RecordLine

SCHEMA_VERSION = 1
SHARD_GLOB = "*.jsonl.gz"


def _canonical(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def checksum(obj: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of a line's canonical JSON without its ``crc`` field."""
    body = {k: v for k, v in obj.items() if k != "crc"}
    return hashlib.sha256(_canonical(body).encode()).hexdigest()[:16]


def _text_hashes_to(line: str, crc: str) -> bool:
    """Whether the line's own text, less its ``"crc":"..."`` member, hashes to ``crc``.

    A writer hashes the canonical JSON of a line without ``crc`` and writes the canonical
    JSON with it, so the text less the member is the very string hashed: checking it
    needs no second serialisation, which was over half the time of reading a shard. A
    line written otherwise (hand-formatted, say) does not match and is checked the slow
    way."""
    member = f'"crc":"{crc}"'
    start = line.find(member)
    while start != -1:  # a nested value could hold the same text: try each occurrence
        end = start + len(member)
        if line[end:end + 1] == ",":
            body = line[:start] + line[end + 1:]
        elif line[start - 1:start] == ",":
            body = line[:start - 1] + line[end:]
        else:
            body = line[:start] + line[end:]
        if hashlib.sha256(body.encode()).hexdigest()[:16] == crc:
            return True
        start = line.find(member, start + 1)
    return False


def content_id(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:20]


def _without_empty_fields(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_empty_fields(v) for k, v in obj.items()
                if v is not None and v != "" and v != [] and v != {}}
    if isinstance(obj, list):
        return [_without_empty_fields(v) for v in obj]
    return obj


def structural_id(graph: Any) -> str:
    """Content id of a graph that ignores empty fields (``None``, ``""``, ``[]``, ``{}``).

    Why: an extractor that gains a field writes it empty on graphs that have nothing to
    say there, and a plain :func:`content_id` would then give one model two ids across
    collector versions (the shards hold both: ``schedule_trace: null``, ``missing: []``).
    A split that groups records by that id would put one model on both sides."""
    return content_id(_without_empty_fields(graph))


def _parse(line: str) -> Any:
    """One JSON line (None if it is not JSON); orjson, or json for what orjson refuses
    (integers beyond 64 bits)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return None


def iter_shard(path: Path, keep: Callable[[str], bool] | None = None
               ) -> Iterator[dict[str, Any]]:
    """Verified lines of one shard, in order; with ``keep``, only the lines whose raw text
    it accepts (a cheap test on the text spares parsing lines nobody reads)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError) as exc:
        raise DatasetError(f"shard {path} is unreadable: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip() or (keep is not None and not keep(line)):
            continue
        obj = _parse(line)
        if isinstance(obj, dict) and isinstance(obj.get("crc"), str) \
                and _text_hashes_to(line, obj["crc"]):
            yield obj
            continue
        if not isinstance(obj, dict) or obj.get("crc") != checksum(obj):
            what = "is not JSON" if obj is None else "fails its checksum"
            raise DatasetError(f"shard {path} line {number} {what} (a hand edit or a disk "
                               "error): restore the shard from version control or delete "
                               "that line")
        yield obj


def shard_paths(root: str | os.PathLike[str], prefix: str = "") -> list[Path]:
    """The shards directly under ``root`` whose names start with ``prefix``."""
    root = Path(root)
    if not root.exists():
        raise DatasetError(f"dataset folder {root} does not exist")
    # one level only: in a flat dataset folder the shards sit beside noise/ and processed/
    return sorted(p for p in root.glob(prefix + SHARD_GLOB) if not p.name.startswith("."))


_LOOSE_KIND = re.compile(r'"kind"(?:\s+:|:\s+")')


def kind_filter(kinds: Collection[str]) -> Callable[[str], bool]:
    """A test on a line's raw text that passes every line of ``kinds``, and few others.

    Why: most of a shard's text is its few big ``graph`` lines, and a reader of records
    need not parse them (reading the records of 5k labels took 11 s parsing everything).
    A writer's compact JSON names its kind as ``"kind":"record"``; a line that spells a
    kind otherwise (``"kind" : "record"``, a hand edit) is passed on to be parsed (and
    refused if its checksum fails), so none is lost."""
    compact = tuple(f'"kind":"{kind}"' for kind in kinds)
    return lambda line: (any(c in line for c in compact) or '"kind":"' not in line
                         or _LOOSE_KIND.search(line) is not None)


def iter_lines(root: str | os.PathLike[str], kinds: Collection[str] | None = None,
               *, prefix: str = "") -> Iterator[dict[str, Any]]:
    """Verified lines of every shard under ``root`` (sorted by path), of ``kinds`` only;
    with ``prefix``, of the shards whose names start with it only (a writer that keeps a
    kind of line in shards of its own spares its readers the rest of the folder)."""
    keep = kind_filter(kinds) if kinds is not None else None
    for path in shard_paths(root, prefix):
        for obj in iter_shard(path, keep):
            if kinds is None or obj.get("kind") in kinds:
                yield obj


def is_probed(line: Mapping[str, Any]) -> bool:
    """A record or re-measurement taken under the host speed probe (it stores ``slowdown``)."""
    return line.get("slowdown") is not None


def is_v2(line: Mapping[str, Any]) -> bool:
    """A record or re-measurement taken under measurement v2: the reference kernels were
    timed beside it, so the machine's state is known. Older records are kept but never
    tested on, and weigh less in training."""
    return bool(line.get("reference"))


def latest_records(root: str | os.PathLike[str],
                   structural: dict[str, str] | None = None) -> list[RecordLine]:
    """The newest ``record`` of each key, in the order keys were first recorded.

    Each record's ``onnx_graph_id`` is given as the :func:`structural_id` of the operator
    graph it names, so records collected under older graph-id definitions agree with new
    ones (the stored lines are left as they were written). ``structural`` maps stored
    operator-graph ids to those, for a caller that has already hashed every graph."""
    first_seen: dict[str, int] = {}
    newest: dict[str, RecordLine] = {}
    kinds = ("record",) if structural is not None else ("record", "onnx_graph")
    structural = dict(structural or {})
    for obj in iter_lines(root, kinds=kinds):
        if obj["kind"] == "onnx_graph":
            structural[obj["graph_id"]] = structural_id(obj["graph"])
            continue
        key = obj["key"]
        first_seen.setdefault(key, len(first_seen))
        if key not in newest or obj.get("created_at", 0) >= newest[key].get("created_at", 0):
            newest[key] = cast(RecordLine, obj)
    for rec in newest.values():
        if rec.get("onnx_graph_id") in structural:
            rec["onnx_graph_id"] = structural[rec["onnx_graph_id"]]
    return sorted(newest.values(), key=lambda r: first_seen[r["key"]])


class ShardWriter:
    """Appends lines to numbered shards under ``folder``, rotating at ``max_lines``."""

    def __init__(self, folder: str | os.PathLike[str], prefix: str, max_lines: int = 400) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        # one writer per prefix: a second one would rewrite the shard without our lines
        self._lock = open(self.folder / f".{prefix}.lock", "w")  # held open: the lock
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise DatasetError(f"another process is writing {self.folder}/{prefix}-*; "
                               "use another --out folder or wait for it") from None
        # temp files of a writer killed mid-rewrite: with the lock held, nobody else owns them
        for stale in self.folder.glob(f".{prefix}-*.tmp"):
            stale.unlink(missing_ok=True)
        self.max_lines = max_lines
        existing = sorted(self.folder.glob(f"{prefix}-[0-9][0-9][0-9][0-9].jsonl.gz"))
        self._lines: list[str] = []
        self._index = 1
        if existing:
            last = existing[-1]
            self._index = int(last.name[len(prefix) + 1:].split(".")[0])
            try:
                lines = [_canonical(obj) for obj in iter_shard(last)]
            except DatasetError:
                self.close()
                raise
            if len(lines) < max_lines:
                self._lines = lines  # keep filling the last shard
            else:
                self._index += 1

    def close(self) -> None:
        """Release the writer lock (the shards are already complete on disk)."""
        if not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        return self.folder / f"{self.prefix}-{self._index:04d}.jsonl.gz"

    def append(self, obj: Mapping[str, Any]) -> None:
        obj = dict(obj, schema=SCHEMA_VERSION)
        obj["crc"] = checksum(obj)
        if len(self._lines) >= self.max_lines:
            self._index += 1
            self._lines = []
        self._lines.append(_canonical(obj))
        self._flush()

    def _flush(self) -> None:
        text = "\n".join(self._lines) + "\n"
        write_bytes(self.path, gzip.compress(text.encode(), mtime=0))
