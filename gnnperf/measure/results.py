"""What a measurement is: its settings, timing statistics and the labelled result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from gnnperf.errors import MeasurementError


@dataclass(frozen=True)
class MeasureSettings:
    """Repetition, spread and quiet-machine policy of a measurement."""

    warmup: int = 2
    repeat: int = 10
    min_repeat_ms: int = 20
    budget_ms: float = 4000.0
    kernel_repeat: int = 5
    kernel_min_repeat_ms: int = 5
    max_cv: float = 0.10
    max_attempts: int = 3
    max_other_load: float = 0.15
    quiet_timeout_s: float = 120.0
    timeout_s: float = 600.0
    max_slowdown: float = 1.15
    slow_retries: int = 4
    kernel_slow_retries: int = 3
    slow_wait_s: float = 10.0
    #: blocks the whole-model samples are split into when reference kernels are timed
    #: between them (a round before each block and after the last)
    reference_blocks: int = 3

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def waiting_at_most(cls, quiet_timeout_s: float, **overrides: Any) -> MeasureSettings:
        """Settings whose waits for a quiet machine, for other processes' load *and* for
        a slowed host, each end after ``quiet_timeout_s``.

        Why: a short timeout is asked for when finishing matters more than the quietest
        label (tests, quick checks); then a slowed host must not hold every timing for
        ``slow_wait_s`` and its retries either.
        """
        settings = cls(quiet_timeout_s=quiet_timeout_s, **overrides)
        if quiet_timeout_s >= settings.slow_wait_s:
            return settings
        return replace(settings, slow_wait_s=quiet_timeout_s, slow_retries=0,
                       kernel_slow_retries=0)


@dataclass
class LatencyStats:
    """Median and spread of repeated timings, in milliseconds."""

    median_ms: float
    samples_ms: list[float]
    cv: float
    iqr_ms: float

    @classmethod
    def from_samples(cls, samples_ms: Sequence[float]) -> LatencyStats:
        arr = np.asarray(samples_ms, dtype=np.float64)
        if arr.size == 0:
            raise MeasurementError("no timing samples")
        mean = float(arr.mean())
        q1, q3 = np.percentile(arr, [25, 75])
        return cls(
            median_ms=float(np.median(arr)),
            samples_ms=[round(float(v), 6) for v in arr],
            cv=float(arr.std() / mean) if mean > 0 else 0.0,
            iqr_ms=float(q3 - q1),
        )

    def label(self) -> dict[str, Any]:
        """The dataset's form of a whole-model label."""
        return {"median_ms": self.median_ms, "samples_ms": self.samples_ms,
                "cv": round(self.cv, 5), "iqr_ms": self.iqr_ms}


@dataclass
class KernelTiming:
    """Latency of one kernel call, in execution order."""

    name: str
    median_ms: float
    cv: float
    slowdown: float | None = None


@dataclass
class Measurement:
    """One labelled measurement of a compiled model at one thread count."""

    whole: LatencyStats
    threads: int
    kernels: list[KernelTiming] | None = None
    other_load: float = 0.0
    attempts: int = 1
    device: str = "local"
    settings: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    duration_s: float = 0.0
    slowdown: float | None = None
    slow_tries: int = 0
    #: reference kernel → median, samples and CV, timed interleaved with the label
    reference: dict[str, dict[str, Any]] | None = None

    @property
    def kernel_sum_ms(self) -> float | None:
        if self.kernels is None:
            return None
        return float(sum(k.median_ms for k in self.kernels))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kernel_sum_ms"] = self.kernel_sum_ms
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        data = dict(data)
        data.pop("kernel_sum_ms", None)
        data["whole"] = LatencyStats(**data["whole"])
        if data.get("kernels") is not None:
            data["kernels"] = [KernelTiming(**k) for k in data["kernels"]]
        return cls(**data)


# -- inputs ---------------------------------------------------------------------------------


@dataclass
class FuncTiming:
    """One PrimFunc timed alone (the kernel dataset): its latency and the host's state."""

    name: str
    stats: LatencyStats
    slowdown: float
    tries: int
