"""Each finished split run as one JSON file, so a benchmark resumes where it stopped.

A run's file holds its test models (labels, builds, CPUs, families) and every method's
predictions with their intervals, not figures: the report is recomputed from them, so a
new figure never needs a re-run. Files live under ``runs/<dataset>-<config>/``: a grown
dataset or changed settings start a new folder instead of mixing results.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.atomic import write_text
from gnnperf.bench.splits import SplitRun


@dataclass
class MethodResult:
    pred_ms: np.ndarray
    low_ms: np.ndarray
    high_ms: np.ndarray
    #: how it trained: rounds run and kept, minutes, whether the safety cap ended it
    training: dict[str, Any] = field(default_factory=dict)
    #: per test record, its prediction at its group's one machine state (NaN where none:
    #: :func:`gnnperf.bench.methods.one_state_twins`); None for methods not asked, and in
    #: runs stored before it was recorded
    twin_ms: np.ndarray | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pred_ms": _floats(self.pred_ms), "low_ms": _floats(self.low_ms),
                "high_ms": _floats(self.high_ms), "training": self.training,
                **({"twin_ms": _floats(self.twin_ms)} if self.twin_ms is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MethodResult:
        arrays = (np.array(data[k], dtype=float) for k in ("pred_ms", "low_ms", "high_ms"))
        twin = np.array(data["twin_ms"], dtype=float) if "twin_ms" in data else None
        return cls(*arrays, training=data.get("training", {}), twin_ms=twin)


@dataclass
class SplitResult:
    run: SplitRun
    #: per test record: key, true_ms, build kind, cpu, family, model_id, gflop (enough for
    #: the report to pick a held-out CPU's calibration models itself)
    test: dict[str, list[Any]]
    methods: dict[str, MethodResult]
    notes: list[str] = field(default_factory=list)
    minutes: float = 0.0
    #: who made it: the ``gnnperf bench`` call, the CPU it trained on, when it finished
    #: (UTC); empty in runs stored before it was recorded
    provenance: dict[str, str] = field(default_factory=dict)
    #: the run's kernel model scored on the workloads it was kept from (a held-out
    #: architecture's): per-schedule figures and within-workload ranking; None elsewhere
    kernel_model_unseen: dict[str, Any] | None = None

    @property
    def true_ms(self) -> np.ndarray:
        return np.array(self.test["true_ms"], dtype=float)

    def to_dict(self) -> dict[str, Any]:
        return {"run": asdict(self.run), "test": self.test,
                "methods": {m: r.to_dict() for m, r in self.methods.items()},
                "notes": self.notes,
                "minutes": round(self.minutes, 3),
                **({"provenance": self.provenance} if self.provenance else {}),
                **({"kernel_model_unseen": self.kernel_model_unseen}
                   if self.kernel_model_unseen is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SplitResult:
        return cls(SplitRun(**data["run"]), data["test"],
                   {m: MethodResult.from_dict(r) for m, r in data["methods"].items()},
                   data.get("notes", []), data.get("minutes", 0.0),
                   data.get("provenance", {}), data.get("kernel_model_unseen"))


def _floats(values: np.ndarray) -> list[float | None]:
    """JSON numbers (NaN, a method that could not predict a model, as null)."""
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(values, dtype=float)]


class ResultStore:
    """The finished runs of one dataset and one configuration."""

    def __init__(self, out: Path, dataset: str, config: str) -> None:
        self.folder = out / "runs" / f"{dataset}-{config}"

    def path(self, run: SplitRun) -> Path:
        return self.folder / f"{run.name}.json"

    def has(self, run: SplitRun) -> bool:
        return self.path(run).exists()

    def load(self, run: SplitRun) -> SplitResult:
        return SplitResult.from_dict(json.loads(self.path(run).read_text()))

    def save(self, result: SplitResult) -> Path:
        path = self.path(result.run)
        write_text(path, json.dumps(result.to_dict()) + "\n")
        return path
