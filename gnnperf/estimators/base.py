"""The one interface every latency estimator has, modelled on MetaSchedule's ``CostModel``
(``update``/``predict``/``save``/``load``): fit on training graphs, predict whole-model
latency with a 90% interval, save, load.

Why one interface: the benchmark scores every method the same way (same graphs, same
split, intervals sized on the same validation records), and a new estimator is one class,
not new wiring in the benchmark.
"""

from __future__ import annotations

import math
import pickle
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from gnnperf.atomic import write_bytes
from gnnperf.data import calibration_mask
from gnnperf.errors import CheckpointError
from gnnperf.metrics import conformal_quantile

#: Nominal coverage of every estimator's interval.
INTERVAL_COVERAGE = 0.9


@dataclass
class Estimates:
    """Whole-model latency (ms) per graph, with the bounds of its nominal-coverage interval."""

    ms: np.ndarray
    low_ms: np.ndarray
    high_ms: np.ndarray
    #: what fitting did (rounds kept, epochs, minutes), for reports
    training: dict[str, Any] = field(default_factory=dict)


def true_ms(graphs: Sequence[Data]) -> np.ndarray:
    """The measured whole-model latency (ms) of each graph (labels are log ms)."""
    return np.array([math.exp(float(g.y)) for g in graphs])


class LatencyEstimator(ABC):
    """Fit on training graphs (``val`` for early stopping and the interval), then predict.

    Graphs are :mod:`gnnperf.data` items: the kernel graph with its features and labels.
    """

    #: the name the benchmark reports the method under
    name: ClassVar[str]

    @abstractmethod
    def fit(self, train: Sequence[Data], val: Sequence[Data]) -> LatencyEstimator:
        """Learn from ``train``; ``val`` chooses when to stop and sizes the interval."""

    @abstractmethod
    def predict(self, graphs: Sequence[Data]) -> Estimates:
        """Latency and interval per graph."""

    def save(self, path: str | Path) -> Path:
        """Write the fitted estimator (a temp file renamed into place)."""
        write_bytes(path, pickle.dumps(self))
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> LatencyEstimator:
        """Read what :meth:`save` wrote; refuses a file of another estimator."""
        try:
            obj = pickle.loads(Path(path).read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError) as exc:
            raise CheckpointError(f"cannot read estimator {path}: {exc}") from None
        if not isinstance(obj, cls):
            raise CheckpointError(f"{path} holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj


class ConformalEstimator(LatencyEstimator):
    """A point estimator whose interval is split-conformal: the prediction times exp(±q),
    q the finite-sample 90% quantile of |log(pred / true)| over the validation records of
    the kind tested on (:func:`gnnperf.data.calibration_mask`)."""

    def __init__(self) -> None:
        self.log_q = math.nan
        self.training: dict[str, Any] = {}

    @abstractmethod
    def fit_point(self, train: Sequence[Data], val: Sequence[Data]) -> None:
        """Learn the point estimate."""

    @abstractmethod
    def predict_point(self, graphs: Sequence[Data]) -> np.ndarray:
        """The point estimate (ms) per graph."""

    def fit(self, train: Sequence[Data], val: Sequence[Data]) -> ConformalEstimator:
        self.fit_point(train, val)
        calib = calibration_mask(val)
        chosen = [g for g, keep in zip(val, calib, strict=True) if keep]
        pred = self.predict_point(chosen)
        self.log_q = conformal_quantile(np.abs(np.log(pred / true_ms(chosen))),
                                        INTERVAL_COVERAGE)
        return self

    def predict(self, graphs: Sequence[Data]) -> Estimates:
        ms = self.predict_point(graphs)
        if math.isnan(self.log_q):
            nan = np.full_like(ms, np.nan)
            return Estimates(ms, nan, nan.copy(), dict(self.training))
        return Estimates(ms, ms * math.exp(-self.log_q), ms * math.exp(self.log_q),
                         dict(self.training))
