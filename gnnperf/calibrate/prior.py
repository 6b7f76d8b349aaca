"""What 0 shots cost: how far a checkpoint's predictions sit from a CPU it never trained on.

A checkpoint's own interval is sized on validation records of its training CPUs, where
its bias is ~0. On a CPU it has not seen, each calibration cell (build kind and thread
count, :func:`.store.cell_of`) is off by a factor: in the benchmark's two interim
leave-one-CPU-out runs the GNN's median log(measured / predicted) per cell ran from −0.35
to +0.38 while its interval's median log half-width was 0.17 (Zen 4 held out) and 0.31
(Zen 5), so its 90% interval covered 29.6% and 56.5% of the held-out records. The bias's sign
differed from CPU to CPU, so only its size transfers: the prior is a zero-mean spread per
cell, the root mean square over held-out CPUs of each one's median log-ratio, and an
uncalibrated unseen CPU's interval widens by it in quadrature. ``gnnperf calibrate``
replaces it with this CPU's measured factor.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from gnnperf.atomic import write_text
from gnnperf.calibrate.store import cell_of
from gnnperf.errors import GnnperfError

#: a cell gets its own spread once this many held-out CPUs measured it; with fewer, one
#: CPU's draw would set it, so the spread pooled over every cell is used instead
MIN_CPUS_PER_CELL = 3

#: a held-out CPU's bias in a cell is the median of at least this many of its records
MIN_RECORDS_PER_CELL = 2

#: the file beside a checkpoint that holds its prior (``gnnperf bench`` writes one)
PRIOR_FILE = "unseen_cpu_prior.json"


@dataclass(frozen=True)
class CellBias:
    """One held-out CPU's bias in one cell: the median log(measured / predicted)."""

    cpu: str
    cell: str
    log_bias: float
    records: int


@dataclass
class UnseenCpuPrior:
    """The zero-mean spread of a checkpoint's per-cell bias on a CPU it never saw."""

    pooled_log_spread: float
    cells: dict[str, float] = field(default_factory=dict)
    biases: list[CellBias] = field(default_factory=list)
    source: str = ""

    @property
    def cpus(self) -> list[str]:
        return sorted({b.cpu for b in self.biases})

    @classmethod
    def fit(cls, biases: Iterable[CellBias], source: str = "") -> UnseenCpuPrior:
        kept = [b for b in biases if b.records >= MIN_RECORDS_PER_CELL
                and math.isfinite(b.log_bias)]
        if not kept:
            raise GnnperfError("an unseen-CPU prior needs a held-out CPU's biases, got none")
        by_cell: dict[str, list[float]] = {}
        for b in kept:
            by_cell.setdefault(b.cell, []).append(b.log_bias)
        cells = {c: _rms(v) for c, v in sorted(by_cell.items())
                 if len(v) >= MIN_CPUS_PER_CELL}
        return cls(_rms([b.log_bias for b in kept]), cells, kept, source)

    @classmethod
    def from_records(cls, records: Iterable[tuple[str, str, int, float, float]],
                     source: str = "") -> UnseenCpuPrior:
        """Fit from held-out records ``(cpu, build, threads, measured_ms, predicted_ms)``."""
        ratios: dict[tuple[str, str], list[float]] = {}
        for cpu, build, threads, measured, predicted in records:
            if measured > 0 and predicted > 0 and math.isfinite(predicted):
                ratios.setdefault((cpu, cell_of(build, threads)), []).append(
                    math.log(measured / predicted))
        return cls.fit([CellBias(cpu, cell, median(v), len(v))
                        for (cpu, cell), v in sorted(ratios.items())], source)

    def log_spread(self, build: str, threads: int) -> float:
        """The spread (log) of the bias of a build at a thread count on an unseen CPU."""
        return self.cells.get(cell_of(build, threads), self.pooled_log_spread)

    def line(self, log_spread: float) -> str:
        """What a prediction widened by ``log_spread`` (its cell's) says."""
        return (f"not calibrated, and not a CPU this checkpoint trained on: its interval "
                f"allows for a bias of x/{math.exp(log_spread):.2f} (1 s.d., as seen on "
                f"{len(self.cpus)} held-out CPUs); `gnnperf calibrate` measures this CPU's")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnseenCpuPrior:
        return cls(float(data["pooled_log_spread"]),
                   {str(k): float(v) for k, v in data.get("cells", {}).items()},
                   [CellBias(**b) for b in data.get("biases", [])], str(data.get("source", "")))

    def save(self, path: str | os.PathLike[str]) -> Path:
        write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")
        return Path(path)


def load_prior(path: str | os.PathLike[str]) -> UnseenCpuPrior | None:
    """The prior stored at ``path``; None when there is none (a one-line error when the
    file is there but unreadable: a silently narrower interval would be worse)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return UnseenCpuPrior.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GnnperfError(f"unseen-CPU prior {path} is unreadable ({exc}); write it again "
                           "with `gnnperf bench` or delete it") from None


def _rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values))
