"""Drop kernel records whose schedule does not replay on their stored workload.

Until session 12 the kernel collector drew a workload's schedules on the kernel of the
model at hand, while the dataset keeps one MetaSchedule workload per workload id, written
from the first model that had it. Two kernels of one structure may name their blocks
differently, and a trace names the blocks it transforms, so such a record's trace fails
to replay on the stored workload (``GetSBlock``): the kernel table, the ``tuned``
database and the A/A re-measurement all replay it. The collector now draws on the stored
workload; this script removes the records already written the old way, with the
``kernel_done`` line of their (workload, hardware) pair, so that the next collector run
measures the pair again. Every other line of a shard is kept byte for byte (its checksum
still holds); a shard is rewritten through a temporary file and a rename.

    python scripts/repair_workload_names.py [--root datasets] [--dry-run]
"""

from __future__ import annotations

import argparse
import gzip
import json
from typing import Any

from gnnperf.atomic import write_bytes
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.shards import iter_lines, iter_shard, shard_paths


def replays(record: dict[str, Any], workload: Any) -> bool:
    from tvm.s_tir.meta_schedule.database import TuningRecord

    ms_record = record["ms_record"]
    ms_record = json.loads(ms_record) if isinstance(ms_record, str) else ms_record
    try:
        TuningRecord.from_json(ms_record, workload).as_measure_candidate()
    except Exception:  # TVM raises its own error types from C++
        return False
    return True


def broken_pairs(folder: DatasetFolder) -> set[str]:
    """``workload|hw_id`` of every pair with a record that does not replay; only records
    written by another model than the workload's first need checking."""
    from tvm.s_tir.meta_schedule.database import Workload

    stored = {o["workload_id"]: o for o in iter_lines(folder.kernels,
                                                        kinds=("kernel_workload",))}
    parsed: dict[str, Any] = {}
    broken: set[str] = set()
    for rec in iter_lines(folder.kernels, kinds=("kernel_record",)):
        wid = rec["workload_id"]
        pair = f"{wid}|{rec['hw_id']}"
        first = stored[wid].get("first_model")
        if pair in broken or (first is not None and rec["model_id"] == first):
            continue
        if wid not in parsed:
            parsed[wid] = Workload.from_json(stored[wid]["ms_workload"])
        if not replays(rec, parsed[wid]):
            broken.add(pair)
    return broken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="datasets")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    folder = DatasetFolder.resolve(args.root)
    broken = broken_pairs(folder)
    print(f"{len(broken)} (workload, hardware) pairs with records that do not replay:")
    for pair in sorted(broken):
        print(f"  {pair}")
    for path in shard_paths(folder.kernels):
        objs = list(iter_shard(path))
        keep = [o for o in objs if not (
            (o.get("kind") == "kernel_record" and f"{o['workload_id']}|{o['hw_id']}" in broken)
            or (o.get("kind") == "kernel_done" and o["key"] in broken))]
        if len(keep) == len(objs):
            continue
        print(f"{path.name}: {len(objs) - len(keep)} lines dropped")
        if args.dry_run:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            lines = [line for line in fh.read().splitlines() if line.strip()]
        assert len(lines) == len(objs)
        kept_lines = [line for line, o in zip(lines, objs, strict=True) if o in keep]
        write_bytes(path, gzip.compress(("\n".join(kept_lines) + "\n").encode(), mtime=0))


if __name__ == "__main__":
    main()
