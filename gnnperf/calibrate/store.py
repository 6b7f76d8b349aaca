"""Calibrations: fitted from measured/predicted pairs, stored per CPU and checkpoint in the
user's cache folder, read by the predictor."""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gnnperf.atomic import write_text
from gnnperf.digest import file_sha256
from gnnperf.errors import GnnperfError
from gnnperf.estimators.types import default_checkpoint
from gnnperf.hardware.spec import cache_dir
from gnnperf.lowering.build_config import BuildConfig

#: calibrating on fewer models than this leaves the spread unknown
MIN_MODELS = 2

#: the models calibration measures are at most this big (seconds each to compile and
#: measure on 2 cores, in every calibration build)
MAX_CALIBRATION_GFLOP = 0.2

#: what ``gnnperf calibrate`` measures by default: the two builds a new machine can make
#: without tuning (searched builds, ``best-of`` and ``tuned``, are corrected by ``sampled``'s
#: factor)
CALIBRATION_BUILDS = ("default", "sampled:0")


def cell_of(build: str, threads: int) -> str:
    """The calibration cell of a build at a thread count, e.g. ``sampled/2t``: a checkpoint's
    bias on a new CPU differs by build kind and threads (MetaSchedule's parallel schedules
    scale with both), so each gets its own factor. ``default`` builds have no parallel
    loop: they run as at one thread whatever the thread count, so one cell (``default/1t``)
    serves them all and a correction keeps their predictions thread-invariant. Searched
    builds (``best-of``, ``tuned``), which a new machine cannot measure untuned, share
    ``sampled``'s."""
    config = BuildConfig.parse(build)
    if config.kind == "default":
        return "default/1t"
    return f"{'sampled' if config.searched else config.kind}/{int(threads)}t"


@dataclass
class CalibrationPoint:
    model_id: str
    predicted_ms: float
    measured_ms: float
    measured_cv: float
    build: str = ""  # the build measured; "" in stores written before per-cell factors
    threads: int = 0

    @property
    def log_ratio(self) -> float:
        return math.log(self.measured_ms / self.predicted_ms)

    @property
    def cell(self) -> str:
        return cell_of(self.build, self.threads) if self.build else ""


@dataclass
class CellCorrection:
    """One cell's factor: the median log-ratio of its points and their spread."""

    log_factor: float
    log_spread: float
    models: int

    @classmethod
    def fit(cls, ratios: list[float]) -> CellCorrection:
        center = statistics.median(ratios)
        spread = math.sqrt(sum((r - center) ** 2 for r in ratios) / (len(ratios) - 1))
        return cls(center, spread, len(ratios))


@dataclass
class Calibration:
    """One CPU's correction of one checkpoint's predictions: a factor per cell (build kind
    and thread count) measured on at least :data:`MIN_MODELS` models, and the factor of all
    points together for any other cell."""

    cpu_id: str
    checkpoint_sha256: str
    hw_id: str  # the hardware id it was measured at (its ISA; threads are per point)
    build: str  # the builds measured, comma-separated
    log_factor: float  # median log(measured / predicted) over every point
    log_spread: float  # sample standard deviation of the log-ratios around it
    points: list[CalibrationPoint] = field(default_factory=list)
    created: str = ""
    seconds: float = 0.0
    cells: dict[str, CellCorrection] = field(default_factory=dict)

    @property
    def factor(self) -> float:
        return math.exp(self.log_factor)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        points = [CalibrationPoint(**p) for p in data.get("points", [])]
        cells = {k: CellCorrection(**c) for k, c in data.get("cells", {}).items()}
        return cls(**{**data, "points": points, "cells": cells})

    @classmethod
    def fit(cls, points: list[CalibrationPoint], *, cpu_id: str, checkpoint_sha256: str,
            hw_id: str, build: str, seconds: float = 0.0) -> Calibration:
        if len(points) < MIN_MODELS:
            raise GnnperfError(f"calibration needs at least {MIN_MODELS} measured models, "
                               f"got {len(points)}")
        pooled = CellCorrection.fit([p.log_ratio for p in points])
        by_cell: dict[str, list[float]] = {}
        for p in points:
            if p.cell:
                by_cell.setdefault(p.cell, []).append(p.log_ratio)
        cells = {c: CellCorrection.fit(r) for c, r in sorted(by_cell.items())
                 if len(r) >= MIN_MODELS}
        return cls(cpu_id, checkpoint_sha256, hw_id, build, pooled.log_factor,
                   pooled.log_spread, points,
                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), seconds, cells)

    def correction(self, build: str, threads: int) -> tuple[float, float]:
        """The (log factor, log spread) for a build at a thread count: its cell's, or all
        points' where that cell was not measured."""
        cell = self.cells.get(cell_of(build, threads))
        if cell is None:
            return self.log_factor, self.log_spread
        return cell.log_factor, cell.log_spread

    def line(self) -> str:
        per_cell = "".join(f", {c} x{math.exp(v.log_factor):.3f}" for c, v in self.cells.items())
        models = len({p.model_id for p in self.points})
        return (f"{self.cpu_id}: predictions x{self.factor:.3f} (spread {self.log_spread:.3f} "
                f"in log){per_cell} from {models} models measured at {self.hw_id}, "
                f"build {self.build}")


def _store_path() -> Path:
    return cache_dir() / "calibration.json"


def _read_store() -> dict[str, dict[str, Any]]:
    path = _store_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # unreadable: as if never calibrated (calibrate writes it afresh)
    return data if isinstance(data, dict) else {}


def _store_key(cpu_id: str, checkpoint_sha256: str) -> str:
    return f"{cpu_id}|{checkpoint_sha256}"


def checkpoint_sha256(checkpoint: str | os.PathLike[str] | None = None) -> str:
    return file_sha256(Path(checkpoint) if checkpoint else default_checkpoint())


def load_calibration(cpu_id: str, checkpoint_sha: str) -> Calibration | None:
    """This CPU's correction of this checkpoint, or None (0 shots)."""
    entry = _read_store().get(_store_key(cpu_id, checkpoint_sha))
    return Calibration.from_dict(entry) if entry else None


def save_calibration(calibration: Calibration) -> Path:
    store = _read_store()
    store[_store_key(calibration.cpu_id, calibration.checkpoint_sha256)] = \
        calibration.to_dict()
    path = _store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(store, indent=1, sort_keys=True))
    return path


def remove_calibration(cpu_id: str, checkpoint_sha: str) -> bool:
    """Forget this CPU's correction of this checkpoint; whether there was one."""
    store = _read_store()
    if store.pop(_store_key(cpu_id, checkpoint_sha), None) is None:
        return False
    write_text(_store_path(), json.dumps(store, indent=1, sort_keys=True))
    return True
