"""What a prediction returns, and which checkpoint makes it: plain data.

Importable without PyTorch, so that :mod:`gnnperf.prediction.api` can start lowering a model
before the network's libraries have loaded.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: the shipped checkpoint: the repository's checkpoints/ (through the gnnperf/checkpoints
#: link), or its copy installed as package data by a non-editable install
SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints"
DEFAULT_CHECKPOINT = SHIPPED / "gnnperf.pt"


def default_checkpoint() -> Path:
    return Path(os.environ.get("GNNPERF_CHECKPOINT", DEFAULT_CHECKPOINT))


class OutOfDistributionWarning(UserWarning):
    """The input lies outside what the checkpoint was trained on."""


@dataclass
class KernelPrediction:
    index: int
    name: str
    ms: float
    flops: float


@dataclass
class Prediction:
    """A latency prediction; ``low_ms``..``high_ms`` covers the truth with ``coverage``."""

    latency_ms: float
    low_ms: float
    high_ms: float
    coverage: float
    hw_id: str
    build: str
    kernels: list[KernelPrediction] = field(default_factory=list)
    predict_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    #: the few-shot correction applied (``gnnperf calibrate``); empty: 0 shots
    calibration: str = ""
    #: at 0 shots on a CPU the checkpoint never trained on: how the unseen-CPU prior
    #: widened the interval (empty on a CPU it trained on, when calibrated, or without a
    #: prior beside the checkpoint)
    unseen_cpu: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def gflop(self) -> float:
        return sum(k.flops for k in self.kernels) / 1e9

    def plot(self, path: str | os.PathLike[str], top: int = 12, title: str | None = None
             ) -> Path:
        """Draw the per-kernel breakdown: the kernels that make up most of the predicted
        latency, labelled with their fused operators and share, and the interval."""
        from gnnperf.prediction.plots import plot_breakdown

        summary = (f"{self.hw_id}, build {self.build}: {self.latency_ms:.3f} ms predicted, "
                   f"{self.coverage * 100:.0f}% interval [{self.low_ms:.3f}, "
                   f"{self.high_ms:.3f}] ms")
        return plot_breakdown([(f"#{k.index} {k.name}", k.ms) for k in self.kernels], path,
                              title=f"{title}\n{summary}" if title else summary, top=top)
