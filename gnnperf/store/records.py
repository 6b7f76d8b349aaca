"""Reading a stored record: the hardware it was measured on, as the estimators see it,
and the group that keeps it together across a split.

Kept in one place so that every reader (the GNN's dataset, the kernel model's table, the
splits) gives a record the same hardware and group.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from gnnperf.hardware.spec import HardwareSpec, host_of
from gnnperf.store.lines import RecordLine
from gnnperf.store.shards import is_v2

SerialFigures = dict[tuple[str, str], dict[str, Any]]


def serial_figures(records: Iterable[Mapping[str, Any]]) -> SerialFigures:
    """Per (CPU, ISA), the one-thread figures of that CPU's one-thread records (medians):
    what :meth:`HardwareSpec.serial_view` reads for a record taken at more threads, whose
    own spec measured only its own thread count."""
    peaks: dict[tuple[str, str], list[float]] = {}
    bws: dict[tuple[str, str], list[float]] = {}
    refs: dict[tuple[str, str], dict[str, list[float]]] = {}
    for rec in records:
        hw = rec["hw"]
        if int(hw["threads"]) != 1:
            continue
        key = (host_of(str(rec["hw_id"])), str(hw["isa"]))
        peaks.setdefault(key, []).append(float(hw["peak_gflops"]))
        bws.setdefault(key, []).append(float(hw["mem_bw_gbs"]))
        if is_v2(rec):
            for name, v in rec["reference"].items():
                refs.setdefault(key, {}).setdefault(name, []).append(float(v["median_ms"]))
    out: SerialFigures = {}
    for key in peaks:
        out[key] = {"peak_gflops": statistics.median(peaks[key]),
                    "mem_bw_gbs": statistics.median(bws[key])}
        if key in refs:
            out[key]["reference_ms"] = {k: statistics.median(v) for k, v in refs[key].items()}
    return out


def record_hardware(record: RecordLine | Mapping[str, Any], serial: SerialFigures | None = None
                    ) -> HardwareSpec:
    """The record's hardware as it was while the label was taken: under measurement v2,
    with the medians of the reference kernels timed beside the label; above one thread,
    with its CPU's one-thread figures from ``serial`` (:func:`serial_figures`)."""
    hw = HardwareSpec.from_dict(record["hw"])
    if is_v2(record):
        hw = replace(hw, reference_ms={k: float(v["median_ms"])
                                       for k, v in (record.get("reference") or {}).items()})
    one_thread = (serial or {}).get((host_of(str(record["hw_id"])), hw.isa))
    if hw.threads > 1 and one_thread is not None:
        hw = replace(hw, serial=one_thread)
    return hw


def split_group(record: Mapping[str, Any]) -> str:
    """What keeps records together across a split: the model's operator graph.

    The graph id ignores weights, so two seeds that draw the same shape (the ``hf-*``
    families have few shapes) share a group; the ONNX hash would tell them apart and
    let one architecture leak from training into test.
    """
    return str(record.get("onnx_graph_id") or record.get("onnx_sha256") or record["model_id"])
