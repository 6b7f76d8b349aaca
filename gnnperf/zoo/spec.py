"""What identifies a zoo model, and the seeded sampling every family draws its choices with.

A :class:`ModelSpec` is all a dataset record stores to rebuild a measured model; the helpers
here are shared by every family's sampler so their draws stay comparable.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from gnnperf.errors import DatasetError

T = TypeVar("T")


InputSpec = dict[str, tuple[tuple[int, ...], str]]


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to rebuild one zoo model: family, seed and the sampled choices."""

    family: str
    seed: int
    hparams: dict[str, Any]
    inputs: dict[str, tuple[tuple[int, ...], str]]

    def __hash__(self) -> int:
        # the generated hash would try to hash the dicts; (family, seed) identifies a spec
        return hash((self.family, self.seed))

    @property
    def model_id(self) -> str:
        """Stable, sortable id such as ``resnet-000017`` (used as a file and record key)."""
        if self.hparams.get("tiny"):
            return f"{self.family}-{self.seed:06d}-tiny"
        return f"{self.family}-{self.seed:06d}"

    @staticmethod
    def family_of(model_id: str) -> str:
        """The family part of a :attr:`model_id` (``resnet-000017`` -> ``resnet``)."""
        match = re.fullmatch(r"(.+)-\d{6}(?:-tiny)?", model_id)
        if match is None:
            raise DatasetError(f"not a zoo model id: {model_id!r}")
        return match.group(1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (shapes become lists)."""
        return {
            "family": self.family,
            "seed": self.seed,
            "hparams": jsonable(self.hparams),
            "inputs": {k: [list(shape), dtype] for k, (shape, dtype) in self.inputs.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelSpec:
        """Inverse of :meth:`to_dict` (also accepts the dict after a JSON round trip)."""
        inputs = {
            str(k): (tuple(int(x) for x in shape), str(dtype))
            for k, (shape, dtype) in d["inputs"].items()
        }
        return cls(
            family=str(d["family"]),
            seed=int(d["seed"]),
            hparams=jsonable(d["hparams"]),
            inputs=inputs,
        )


def jsonable(x: Any) -> Any:
    """Deep copy with tuples → lists and NumPy scalars → Python scalars, so specs compare equal
    before and after a JSON round trip."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


# --------------------------------------------------------------------------------------------
# Seeding and sampling helpers
# --------------------------------------------------------------------------------------------


def stable_int(*parts: object) -> int:
    """63-bit integer from a SHA-256 of the parts (Python's hash() is salted per process)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


class Sampler:
    """Thin wrapper over a NumPy generator that returns plain Python values."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def choice(self, options: Sequence[T], weights: Sequence[float] | None = None) -> T:
        p = None
        if weights is not None:
            w = np.asarray(weights, dtype=float)
            p = w / w.sum()
        return options[int(self.rng.choice(len(options), p=p))]

    def randint(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi] inclusive."""
        return int(self.rng.integers(lo, hi + 1))

    def uniform(self, lo: float, hi: float) -> float:
        return float(self.rng.uniform(lo, hi))

    def loguniform(self, lo: float, hi: float) -> float:
        return float(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))

    def logint(self, lo: int, hi: int, step: int = 1) -> int:
        """Log-uniform integer in [lo, hi], rounded to a multiple of ``step``."""
        v = self.loguniform(lo, hi)
        return int(min(hi, max(lo, step * round(v / step))))

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def jittered(self, u: float, jitter: float) -> float:
        return min(1.0, max(0.0, u + self.uniform(-jitter, jitter)))

    def knob(self, u: float, lo: int, hi: int, step: int = 1, jitter: float = 0.25) -> int:
        """Size knob: log-interpolate [lo, hi] at the jittered size quantile ``u`` ∈ [0, 1].

        Tying the main size knobs of a family to one quantile (with independent jitter)
        spreads FLOPs over the whole window instead of piling them into a bell in the middle.
        """
        v = self.jittered(u, jitter)
        x = math.exp(math.log(lo) + v * (math.log(hi) - math.log(lo)))
        return int(min(hi, max(lo, step * round(x / step))))

    def knob_choice(self, u: float, options: Sequence[T], jitter: float = 0.25) -> T:
        """Pick from ascending ``options`` at the jittered size quantile ``u``."""
        v = self.jittered(u, jitter)
        return options[min(len(options) - 1, int(v * len(options)))]


# Small batches dominate deployment; keep some large ones so batch effects are learnable.
_BATCHES = (1, 2, 3, 4, 5, 6, 7, 8)
_BATCH_WEIGHTS = (0.34, 0.22, 0.07, 0.15, 0.03, 0.06, 0.03, 0.10)


def sample_batch(s: Sampler) -> int:
    return s.choice(_BATCHES, _BATCH_WEIGHTS)


def make_divisible(v: float, d: int = 8, min_value: int | None = None) -> int:
    """Round a channel count to a multiple of ``d`` (never dropping more than 10%)."""
    min_value = d if min_value is None else min_value
    new = max(min_value, int(v + d / 2) // d * d)
    if new < 0.9 * v:
        new += d
    return int(new)


def sample_classes(s: Sampler) -> int:
    return s.choice([10, 100, 1000], [0.3, 0.3, 0.4])
