"""Which models calibrate a machine: a few, spread over the sizes of the candidates.

One rule for ``gnnperf calibrate`` (zoo models) and for the benchmark's held-out CPUs
(their test records), so the benchmark scores what the product does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gnnperf.errors import GnnperfError


@dataclass(frozen=True)
class Candidate:
    """A model calibration may measure: its id, family and size."""

    model_id: str
    family: str
    gflop: float


def spread_by_size(candidates: Sequence[Candidate], count: int) -> list[str]:
    """``count`` model ids spread over the candidates' sizes: the candidates sorted by size
    are cut into ``count`` bins of equal count, and each bin gives one model, from the
    family chosen least so far (then the one nearest the bin's middle, then by name).

    Why not the largest: a checkpoint's bias on a new CPU changes with model size, and
    the largest models under the cap stood for too few of the models users predict (Zen 3:
    ``default``/2t fitted x2.08 on them where the records needed x1.35). Equal-count bins
    follow the candidates' own size distribution, which is the zoo's. The same list on
    every machine: the order depends on sizes and names only."""
    if count < 1:
        raise GnnperfError(f"calibration needs at least one model, got {count}")
    ranked = sorted(candidates, key=lambda c: (c.gflop, c.model_id))
    if len(ranked) < count:
        raise GnnperfError(f"only {len(ranked)} candidate models for {count} calibration "
                           "models")
    used: Counter[str] = Counter()
    chosen: list[str] = []
    for b in range(count):
        lo, hi = len(ranked) * b // count, len(ranked) * (b + 1) // count
        middle = (lo + hi - 1) / 2
        pick = min(range(lo, hi), key=lambda i: (used[ranked[i].family], abs(i - middle),
                                                 ranked[i].model_id))
        used[ranked[pick].family] += 1
        chosen.append(ranked[pick].model_id)
    return chosen
