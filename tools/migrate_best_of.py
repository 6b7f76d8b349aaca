"""One-off migration (2026-11-28, issue 47): the build called ``tuned`` is ``best-of:16``.

``tuned`` now names what a TVM user's tuning gives (``tuned:N``, MetaSchedule's
evolutionary search at N trials per kernel); the build the project called ``tuned``, the
fastest of 16 sampled schedules per kernel, is ``best-of:16``. This rewrites what stored
the old name:

- record, failure and remeasure lines (``build``, ``key``; a record's ``tuned`` field,
  which describes its rule, becomes ``best_of``);
- kernel-graph lines of those builds (``graph.build``), under their new content id, and
  every line that names the old id (records, graph traces);
- the shipped checkpoint's build list and per-kind GFLOP ranges.

Lines are rewritten in place, shard by shard (a shard is written beside itself and renamed
over it), with their checksums recomputed; a shard without the old name is left byte for
byte. Running it twice changes nothing the second time.

    python tools/migrate_best_of.py [--root datasets] [--checkpoint checkpoints/gnnperf.pt]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

from gnnperf.atomic import write_bytes
from gnnperf.store.shards import _canonical, checksum, content_id, shard_paths

OLD, NEW = "tuned", "best-of:16"


def _new_key(key: str) -> str:
    head, sep, build = key.rpartition("|")
    return f"{head}{sep}{NEW}" if sep and build == OLD else key


def migrate_line(obj: dict[str, Any], graph_ids: dict[str, str]) -> dict[str, Any]:
    """The line under the new name (the same object when nothing names the old build)."""
    out = dict(obj)
    if out.get("build") == OLD:
        out["build"] = NEW
    if isinstance(out.get("key"), str):
        out["key"] = _new_key(out["key"])
    if out.get("kind") == "record" and "tuned" in out:
        out["best_of"] = out.pop("tuned")
    if out.get("kind") == "graph" and out["graph"].get("build") == OLD:
        out["graph"] = {**out["graph"], "build": NEW}
        new_id = content_id(out["graph"])
        graph_ids[out["graph_id"]] = new_id
        out["graph_id"] = new_id
    elif out.get("graph_id") in graph_ids:
        out["graph_id"] = graph_ids[out["graph_id"]]
    if out == obj:
        return obj
    if "crc" in out:
        out["crc"] = checksum(out)
    return out


def _read(path: Path) -> list[dict[str, Any]]:
    text = gzip.decompress(path.read_bytes()).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    """As :class:`~gnnperf.store.shards.ShardWriter` writes a shard: canonical JSON lines,
    gzip without a time stamp, written beside the file and renamed over it."""
    text = "\n".join(_canonical(o) for o in lines) + "\n"
    write_bytes(path, gzip.compress(text.encode(), mtime=0))


def migrate_folder(folder: Path, graph_ids: dict[str, str]) -> int:
    """Rewrite the shards of ``folder`` that name the old build; returns lines changed.
    Graph lines come first (their new ids are what records then name), so every shard is
    read twice: graphs, then the rest."""
    paths = shard_paths(folder) if folder.is_dir() else []
    changed = 0
    contents = {p: _read(p) for p in paths}
    for lines in contents.values():  # graphs first: the ids records name
        for o in lines:
            if o.get("kind") == "graph":
                migrate_line(o, graph_ids)
    for path, lines in contents.items():
        new = [migrate_line(o, graph_ids) for o in lines]
        n = sum(a is not b for a, b in zip(lines, new, strict=True))
        if n:
            _write(path, new)
            changed += n
    return changed


def migrate_checkpoint(path: Path) -> bool:
    import torch

    ck = torch.load(path, weights_only=False, map_location="cpu")
    builds = [NEW if b == OLD else b for b in ck.get("builds", [])]
    ranges = {("best-of" if k == OLD else k): v for k, v in ck.get("gflop_ranges", {}).items()}
    if builds == ck.get("builds", []) and ranges == ck.get("gflop_ranges", {}):
        return False
    ck["builds"], ck["gflop_ranges"] = builds, ranges
    tmp = path.with_name(f".{path.name}.migrating")
    torch.save(ck, tmp)
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path("datasets"))
    p.add_argument("--checkpoint", type=Path, default=Path("checkpoints/gnnperf.pt"))
    args = p.parse_args(argv)
    graph_ids: dict[str, str] = {}
    for folder in (args.root / "shards", args.root / "noise"):
        print(f"{folder}: {migrate_folder(folder, graph_ids)} lines rewritten")
    print(f"{len(graph_ids)} graphs renamed")
    if args.checkpoint.exists():
        done = migrate_checkpoint(args.checkpoint)
        print(f"{args.checkpoint}: {'migrated' if done else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
