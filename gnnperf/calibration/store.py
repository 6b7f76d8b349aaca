"""Calibrations: fitted from measured/predicted pairs, stored per CPU and checkpoint in the
user's cache folder, read by the predictor."""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..atomic import write_text
from ..errors import GnnperfError
from ..hardware import _cache_dir
from ..prediction_types import default_checkpoint

#: calibrating on fewer models than this leaves the spread unknown
MIN_MODELS = 2


@dataclass
class CalibrationPoint:
    model_id: str
    predicted_ms: float
    measured_ms: float
    measured_cv: float

    @property
    def log_ratio(self) -> float:
        return math.log(self.measured_ms / self.predicted_ms)


@dataclass
class Calibration:
    """One CPU's correction of one checkpoint's predictions."""

    cpu_id: str
    checkpoint_sha256: str
    hw_id: str  # the hardware id it was measured at
    build: str
    log_factor: float  # median log(measured / predicted)
    log_spread: float  # sample standard deviation of the log-ratios around it
    points: list[CalibrationPoint] = field(default_factory=list)
    created: str = ""
    seconds: float = 0.0

    @property
    def factor(self) -> float:
        return math.exp(self.log_factor)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        points = [CalibrationPoint(**p) for p in data.get("points", [])]
        return cls(**{**data, "points": points})

    @classmethod
    def fit(cls, points: list[CalibrationPoint], *, cpu_id: str, checkpoint_sha256: str,
            hw_id: str, build: str, seconds: float = 0.0) -> Calibration:
        if len(points) < MIN_MODELS:
            raise GnnperfError(f"calibration needs at least {MIN_MODELS} measured models, "
                               f"got {len(points)}")
        ratios = [p.log_ratio for p in points]
        center = statistics.median(ratios)
        spread = math.sqrt(sum((r - center) ** 2 for r in ratios) / (len(ratios) - 1))
        return cls(cpu_id, checkpoint_sha256, hw_id, build, center, spread, points,
                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), seconds)

    def line(self) -> str:
        return (f"{self.cpu_id}: predictions x{self.factor:.3f} (spread {self.log_spread:.3f} "
                f"in log) from {len(self.points)} models measured at {self.hw_id}, "
                f"build {self.build}")


def _store_path() -> Path:
    return _cache_dir() / "calibration.json"


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


@lru_cache(maxsize=8)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def checkpoint_sha256(checkpoint: str | os.PathLike[str] | None = None) -> str:
    path = Path(checkpoint) if checkpoint else default_checkpoint()
    stat = path.stat()
    return _file_sha256(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


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
