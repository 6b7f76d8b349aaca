"""A dataset folder's counts, latency range, failures and whole-model noise floors."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, cast

from gnnperf.data.dataset import existing_folder
from gnnperf.hardware.cpu_identity import signature_of_hw
from gnnperf.hardware.spec import host_of
from gnnperf.measure.reference import aa_floor
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import FailureLine, RecordLine, RemeasureLine
from gnnperf.store.records import split_group
from gnnperf.store.shards import is_probed, iter_lines, latest_records, shard_paths


def noise_pairs(root: str | os.PathLike[str] | DatasetFolder | None
                ) -> list[Pair]:
    """(record, its re-measurement) for every re-measurement in the folder's ``noise/``.

    The record is the one that was repeated (matched by its creation time), not a
    newer record of the same key.
    """
    folder = DatasetFolder.resolve(root)
    noise_dir = folder.noise
    if not noise_dir.is_dir():
        return []
    records = {(r["key"], r.get("created_at")): r
               for r in iter_lines(folder.shards, kinds=("record",))}
    return [(cast(RecordLine, records[pair]), cast(RemeasureLine, obj))
            for obj in iter_lines(noise_dir, kinds=("remeasure",))
            if (pair := (obj["key"], obj.get("first_created_at"))) in records]


#: a record and its re-measurement
Pair = tuple[RecordLine, RemeasureLine]


def _probed(pair: Pair) -> bool:
    """Whether both sides of a pair were taken under the host speed probe."""
    return is_probed(pair[0]) and is_probed(pair[1])


def unprobed_pairs(pairs: list[Pair]) -> list[Pair]:
    """The pairs of which a side was taken before the host speed probe existed."""
    return [pair for pair in pairs if not _probed(pair)]


def protocol_pairs(pairs: list[Pair]) -> list[Pair]:
    """The pairs of the current protocol: both sides taken under the host speed probe, or,
    where none are, all of them (those also hold host slowdowns the probe now rejects)."""
    return [pair for pair in pairs if _probed(pair)] or pairs


def _noise_floor(pairs: list[Pair]) -> float | None:
    """MAPE (%) between first and second measurement of each record; None without pairs."""
    return aa_floor(pairs, "whole")["mape"]


def group_pairs(pairs: Iterable[Pair], key: Callable[[RecordLine], str]
                ) -> dict[str, list[Pair]]:
    """The pairs grouped by ``key`` of their first record."""
    groups: dict[str, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(key(pair[0]), []).append(pair)
    return groups


def _noise_floor_per(pairs: list[Pair], key: Callable[[RecordLine], str]
                     ) -> dict[str, float]:
    """:func:`_noise_floor` of each group of pairs, grouped by ``key`` of the first record."""
    return {k: mape for k, v in sorted(group_pairs(pairs, key).items())
            if (mape := _noise_floor(v)) is not None}


def _cpu_id(record: RecordLine) -> str:
    return signature_of_hw(record["hw"]).id


def distinct_by_build(records: list[RecordLine]) -> tuple[dict[str, int], dict[str, int]]:
    """Per build, the operator graphs measured and the distinct (graph, hardware id) pairs.

    Why: two seeds of a real architecture that draw the same (batch, size) are one graph
    (:func:`~gnnperf.store.records.split_group`) under two model ids; their records repeat
    a measurement rather than add a model, so a count of what the dataset covers takes each once."""
    graphs: dict[str, set[str]] = {}
    pairs: dict[str, set[tuple[str, str]]] = {}
    for r in records:
        group = split_group(r)
        graphs.setdefault(r["build"], set()).add(group)
        pairs.setdefault(r["build"], set()).add((group, r["hw_id"]))
    return ({b: len(v) for b, v in sorted(graphs.items())},
            {b: len(v) for b, v in sorted(pairs.items())})


#: the failure stages that say TVM (or the export before it) could not take an architecture
IMPORT_STAGES = ("import", "lower", "compile")


def corpus_stats(records: list[RecordLine], failures: list[FailureLine]) -> dict[str, Any]:
    """The real-architecture corpus's share of the folder (issue 45's label targets): its
    whole-model records, the graphs and architectures they cover, and the architectures
    that could not be exported, imported, lowered or compiled, each with the reason its
    first such failure gave. An architecture counts as imported when any of its sizes was
    measured; one that failed only later (measuring) or was only skipped by the
    ``default`` budget counts as neither."""
    from gnnperf.zoo.corpus import CATALOG, PREFIX

    mine = [r for r in records if r["model"]["family"].startswith(PREFIX)]
    measured = {r["model"]["family"] for r in mine}
    failed: dict[str, tuple[str, str]] = {}
    for f in failures:
        family = f["model"]["family"]
        if (family.startswith(PREFIX) and f["stage"] in IMPORT_STAGES
                and family not in measured):
            failed.setdefault(family, (f["stage"], f["reason"]))
    tried = len(measured) + len(failed)
    return {
        "corpus_records": len(mine),
        "corpus_records_by_build": dict(sorted(Counter(r["build"] for r in mine).items())),
        "corpus_graphs": len({split_group(r) for r in mine}),
        "corpus_architectures": len(measured),
        "corpus_model_types": len({CATALOG[f].model_type for f in measured if f in CATALOG}),
        "corpus_catalog": len(CATALOG),
        "corpus_failed_architectures": {k: f"{stage}: {why}"
                                        for k, (stage, why) in sorted(failed.items())},
        "corpus_failures_by_stage": dict(sorted(Counter(
            stage for stage, _ in failed.values()).items())),
        "corpus_import_success_rate": round(100 * len(measured) / tried, 1) if tried else None,
    }


def dataset_stats(root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Counts, latency range, failures and noise floor of a dataset folder."""
    folder = existing_folder(root)
    shards = folder.shards
    records = latest_records(shards)
    signatures = [signature_of_hw(r["hw"]) for r in records]
    failures = cast(list[FailureLine], list(iter_lines(shards, kinds=("failure",))))
    lat = [r["whole"]["median_ms"] for r in records]
    per_family = Counter(r["model"]["family"] for r in records)
    per_hw = Counter(r["hw_id"] for r in records)
    per_build = Counter(r["build"] for r in records)
    models_per_build = {b: len({r["model_id"] for r in records if r["build"] == b})
                        for b in per_build}
    graphs_per_build, distinct_per_build = distinct_by_build(records)
    pairs = noise_pairs(folder)
    unprobed = unprobed_pairs(pairs)
    # The floor of the current protocol; pairs taken before the speed probe are reported
    # apart (:func:`protocol_pairs`).
    noise_pairs_used = protocol_pairs(pairs)
    probed = len(unprobed) < len(pairs)
    cpus = sorted({r["hw"]["cpu_model"] for r in records})
    sizes = [p.stat().st_size for p in shard_paths(shards)]
    noise_sizes = ([p.stat().st_size for p in shard_paths(folder.noise)]
                   if folder.noise.is_dir() else [])
    return {
        "records": len(records),
        "models": len({r["model_id"] for r in records}),
        "families": len(per_family),
        "hw_configs": len(per_hw),
        "builds": len(per_build),
        "records_with_kernel_labels": sum(r.get("kernels_ms") is not None for r in records),
        "failures": len(failures),
        "failures_by_stage": dict(Counter(f["stage"] for f in failures)),
        "noise_floor_mape": _noise_floor(noise_pairs_used),
        "noise_floor_records": len(noise_pairs_used),
        "noise_floor_by_build_threads": _noise_floor_per(
            noise_pairs_used, lambda r: f"{r['build']}/{r['hw']['threads']}t"),
        # each machine apart too: a noisier host must not hide behind a quieter one's pairs
        # keyed by CPU signature id: one model name ("AMD EPYC") covers two CPUs here
        "noise_floor_by_cpu": {cpu: aa_floor(group, "whole") for cpu, group in sorted(
            group_pairs(noise_pairs_used, _cpu_id).items())},
        "noise_floor_by_host": _noise_floor_per(noise_pairs_used,
                                                lambda r: host_of(r["hw_id"])),
        "noise_floor_protocol": "speed-probe" if probed else "load-guard",
        "noise_floor_unprobed_mape": _noise_floor(unprobed),
        "noise_floor_unprobed_records": len(unprobed),
        "records_probed": sum(is_probed(r) for r in records),
        # measured under the v2 protocol: reference kernels timed beside the label
        "records_with_reference": sum(r.get("reference") is not None for r in records),
        "latency_ms_min": float(min(lat)) if lat else None,
        "latency_ms_max": float(max(lat)) if lat else None,
        "per_family": dict(sorted(per_family.items())),
        "per_hw": dict(sorted(per_hw.items())),
        # the names the kernel-dataset issue checks its `best-of` (then `tuned`) target by
        "records_by_build": dict(sorted(per_build.items())),
        "models_by_build": dict(sorted(models_per_build.items())),
        # the same without repeats: a model id whose graph another seed already drew
        "graphs_by_build": graphs_per_build,
        "distinct_records_by_build": distinct_per_build,
        "cpu_models": cpus,
        "per_cpu": dict(sorted(Counter(sig.id for sig in signatures).items())),
        "cpu_signatures": {sig.id: sig.to_dict() for sig in sorted(set(signatures),
                                                                    key=lambda g: g.id)},
        "shard_bytes": sum(sizes),
        "shards": len(sizes),
        "noise_shard_bytes": sum(noise_sizes),
        "noise_shards": len(noise_sizes),
        **corpus_stats(records, failures),
    }
