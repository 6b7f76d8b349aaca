"""How noisy each label is, from the dataset's own A/A re-measurements, and the loss
weight that follows from it.

Why: the CPUs this project measures on differ in their noise floor by a factor of ten
(A/A MAPE 2% on a quiet Zen 4 guest, 15-21% for ``sampled`` and ``best-of`` builds on the
Zen 3 guest). A loss that weighs every label the same lets the noisiest machine's
scatter pull the model as hard as a clean label does. Weighting each record by the
inverse of its total variance, what the model cannot explain plus the label's own
noise (``1 / (model_sigma² + label_sigma²)``), is the textbook answer
(heteroscedastic least squares) and leaves the clean labels' relative weights alone.

A label's noise is read per (machine, build kind), where the floor was measured on at
least :data:`MIN_PAIRS` re-measurements; else per machine; else the whole dataset's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gnnperf.data.stats import Pair, group_pairs, noise_pairs, protocol_pairs
from gnnperf.hardware.spec import host_of
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.measure.reference import aa_floor
from gnnperf.store.folder import DatasetFolder

#: re-measured records a (machine, build kind) floor needs before it is trusted
MIN_PAIRS = 10
#: E|log(a/b)| of two draws with log-noise sigma is 2 sigma / sqrt(pi): sigma per A/A MAPE
SIGMA_PER_AA_ERROR = math.sqrt(math.pi) / 2


def _group(hw_id: str, build: str) -> tuple[str, str]:
    return host_of(hw_id), BuildConfig.parse(build).kind


@dataclass(frozen=True)
class LabelNoise:
    """Log-space standard deviation of a label, per ``host/kind``, ``host`` and ``*``."""

    sigmas: Mapping[str, float]

    @classmethod
    def from_pairs(cls, pairs: Iterable[Pair]) -> LabelNoise:
        """From (record, re-measurement) pairs of one measurement protocol."""
        pairs = list(pairs)
        sigmas: dict[str, float] = {}
        for level in (lambda r: "/".join(_group(r["hw_id"], r["build"])),
                      lambda r: host_of(r["hw_id"]), lambda r: "*"):
            for key, group in group_pairs(pairs, level).items():
                if len(group) >= MIN_PAIRS:
                    sigmas[key] = float(aa_floor(group, "whole")["mape"]) / 100 \
                        * SIGMA_PER_AA_ERROR
        return cls(dict(sorted(sigmas.items())))

    @classmethod
    def of(cls, root: str | os.PathLike[str] | DatasetFolder | None) -> LabelNoise:
        """From the re-measurements in a dataset folder's ``noise/``."""
        return cls.from_pairs(protocol_pairs(noise_pairs(root)))

    def sigma(self, hw_id: str, build: str) -> float | None:
        """The label noise of a record on ``hw_id`` of ``build``; None where the dataset has
        too few re-measurements to say."""
        host, kind = _group(hw_id, build)
        for key in (f"{host}/{kind}", host, "*"):
            if key in self.sigmas:
                return self.sigmas[key]
        return None

    def weights(self, labels: Iterable[tuple[str, str]], model_sigma: float) -> list[float]:
        """Per (hardware id, build), ``1 / (model_sigma² + label_sigma²)``, scaled to a mean
        of 1. A label of unknown noise (only possible in a table without ``*``, such as one
        written by hand) gets the mean noise of the others."""
        sigmas = [self.sigma(hw_id, build) for hw_id, build in labels]
        known = [s for s in sigmas if s is not None]
        fallback = sum(known) / len(known) if known else 0.0
        raw = [1.0 / (model_sigma ** 2 + (fallback if s is None else s) ** 2)
               for s in sigmas]
        mean = sum(raw) / max(len(raw), 1)
        return [w / mean for w in raw]
