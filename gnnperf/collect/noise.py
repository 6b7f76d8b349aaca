"""The whole-model noise floor: records of this CPU measured again, later, from scratch (A/A).

The floor is the disagreement between two independent measurements of the same (model,
hardware, build) taken at different times. The ONNX is regenerated from the recorded
spec and must hash the same as the first time; the build is made again the way the
record's was: a ``sampled:k`` build draws the same schedules, a ``best-of`` build reads
the same fastest schedule per workload from its hardware id's measured schedules (the
kernel dataset), and a ``tuned:N`` build the same one from its hardware id's tuning runs,
without which either would time the unscheduled kernels instead.
Re-measurements go to the folder's ``noise/`` as ``remeasure`` lines.

This sits after both collectors (whole-model records and the kernel dataset whose
databases the searched builds apply), so neither imports the other through it.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from tqdm import tqdm

from gnnperf.collect.kernels import tuned_databases, tuning_database
from gnnperf.collect.models import Collector, CollectSummary, done_keys
from gnnperf.errors import DatasetError, HardwareError
from gnnperf.hardware.cpu_identity import signature_of_hw
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.measure import MeasureSettings
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import RecordLine
from gnnperf.store.shards import is_probed, is_v2, latest_records


def choose_records(records: list[RecordLine], count: int, *, seed: int = 0,
                   min_age_s: float = 0.0, already: set[str] | None = None
                   ) -> list[RecordLine]:
    """``count`` random records to measure again: at least ``min_age_s`` old, not yet
    re-measured, and of the newest protocol there is (measurement v2, else the speed
    probe, else any), so that the floor is the one of the labels tested on today."""
    now = time.time()
    old = [r for r in records if now - float(r.get("created_at", 0.0)) >= min_age_s
           and r["key"] not in (already or set())]
    pool = [r for r in old if is_v2(r)] or [r for r in old if is_probed(r)] or old
    rng = np.random.default_rng(seed)
    return [pool[i] for i in rng.permutation(len(pool))[:count]]


def remeasure(
    root: str | os.PathLike[str],
    count: int,
    *,
    seed: int = 0,
    settings: MeasureSettings | None = None,
    progress: bool = True,
    min_age_s: float = 0.0,
) -> CollectSummary:
    """Re-measure ``count`` existing records (whole model) into the folder's ``noise/``.

    Only records at least ``min_age_s`` old are chosen: two measurements minutes apart
    share the host's state and understate the floor (the A/A protocol wants ≥ 30 min).
    Records of the current protocol are chosen when there are any
    (:func:`choose_records`).
    """
    folder = DatasetFolder.resolve(root)
    if not folder.has_shards():
        raise DatasetError(f"no dataset shards in {folder.root} to re-measure")
    cpu = HardwareSpec.local(measure=False).cpu_signature
    all_records = latest_records(folder.shards)
    # a second measurement on another CPU would measure the machines' difference, not noise;
    # "AMD EPYC" alone names two CPUs here, so the signature decides
    records = [r for r in all_records if signature_of_hw(r["hw"]).matches(cpu)]
    if all_records and not records:
        raise HardwareError(f"no records in {folder.shards} were measured on this machine's "
                            f"CPU ({cpu.id}, '{cpu.model_name}'); re-measure them where they "
                            "were collected")
    chosen = choose_records(records, count, seed=seed, min_age_s=min_age_s,
                            already=done_keys(folder.noise))
    groups: dict[tuple[str, str, str, str], list[RecordLine]] = {}
    for rec in chosen:
        # a searched build's schedules are those of one hardware id (each thread count has
        # its own)
        hw_id = rec["hw_id"] if BuildConfig.parse(rec["build"]).searched else ""
        groups.setdefault((rec["model_id"], rec["hw"]["isa"], rec["build"], hw_id),
                          []).append(rec)
    # one pass over the kernel shards for every best-of hardware id drawn; a tuned:N build
    # reads the tuning runs of its hardware id at its budget
    best_of = tuned_databases(folder, sorted({hw_id for (_, _, build, hw_id) in groups
                                              if BuildConfig.parse(build).kind == "best-of"}))
    databases: dict[tuple[str, str], Any] = {}
    for _, _, build, hw_id in groups:
        config = BuildConfig.parse(build)
        if config.kind == "best-of":
            databases[(build, hw_id)] = best_of[hw_id]
        elif config.kind == "tuned" and (build, hw_id) not in databases:
            databases[(build, hw_id)] = tuning_database(folder, hw_id, config.trials)[0]
    collector = Collector(folder.noise, [], [], settings=settings, shard_prefix="noise")
    summary = CollectSummary()
    start = time.time()
    try:
        with tqdm(total=len(chosen), unit="rec", disable=not progress) as bar:
            for (_, isa, build, hw_id), recs in groups.items():
                collector.remeasure_group(recs, isa, BuildConfig.parse(build), summary,
                                          database=databases.get((build, hw_id)))
                bar.update(len(recs))
    finally:
        collector.close()
        summary.seconds = time.time() - start
    return summary
