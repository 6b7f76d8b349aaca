"""Adaptive sampling of the operator sweep: measure more configurations of the operators
the estimator gets most wrong (nn-Meter's adaptive data sampler, by operator).

A sweep model is one operator, so the error of a whole-model prediction on a measured
sweep record is the error on that operator's kernel. :func:`plan_sweep` reads what the
dataset holds, scores each operator by the predictor's median error on its records, and
returns how many seeds of each to measure in all: the seeds already measured plus a share
of the new budget in proportion to the error (:func:`~gnnperf.zoo.operators.allocate_sweep`).
"""

from __future__ import annotations

import os
import statistics
import warnings
from collections import defaultdict
from typing import Any

from gnnperf import zoo
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.records import record_hardware, serial_figures
from gnnperf.store.shards import is_v2, iter_lines, latest_records
from gnnperf.zoo.operators import allocate_sweep


def sweep_errors(root: str | os.PathLike[str], predictor: Any) -> dict[str, float]:
    """Median absolute relative error of ``predictor`` on each operator's newest v2 records
    in dataset folder ``root`` (operators without records are absent)."""
    from gnnperf.features.graph import KernelGraph

    shards = DatasetFolder.resolve(root).shards
    latest = latest_records(shards)
    records = [r for r in latest if is_v2(r) and r["model"]["family"] in zoo.SWEEP]
    if not records:
        return {}
    wanted = {r["graph_id"] for r in records}
    graphs = {o["graph_id"]: KernelGraph.from_dict(o["graph"])
              for o in iter_lines(shards, kinds=("graph",)) if o["graph_id"] in wanted}
    serial = serial_figures(latest)
    items = [(r, graphs[r["graph_id"]]) for r in records if r["graph_id"] in graphs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single operators lie outside the training models
        predictions = predictor.predict_graphs(
            [(g, record_hardware(r, serial)) for r, g in items], calibrated=False)
    errors: dict[str, list[float]] = defaultdict(list)
    for (rec, _), pred in zip(items, predictions, strict=True):
        measured = float(rec["whole"]["median_ms"])
        errors[rec["model"]["family"]].append(abs(pred.latency_ms - measured) / measured)
    return {op: statistics.median(e) for op, e in errors.items()}


def measured_seeds(root: str | os.PathLike[str]) -> dict[str, int]:
    """Per operator, one past the highest seed the dataset holds a record or failure of."""
    shards = DatasetFolder.resolve(root).shards
    out: dict[str, int] = {}
    for obj in iter_lines(shards, kinds=("record", "failure")):
        model = obj.get("model") or {}
        if model.get("family") in zoo.SWEEP:
            out[model["family"]] = max(out.get(model["family"], 0), int(model["seed"]) + 1)
    return out


def plan_sweep(root: str | os.PathLike[str], add: int, predictor: Any, floor: int = 1
               ) -> tuple[dict[str, int], dict[str, float]]:
    """Seeds of each operator to have measured after ``add`` more configurations
    (what ``gnnperf collect --plan`` takes), and the errors that shared them out."""
    errors = sweep_errors(root, predictor)
    done = measured_seeds(root)
    extra = allocate_sweep(errors, add, floor)
    return {op: done.get(op, 0) + n for op, n in extra.items()}, errors
