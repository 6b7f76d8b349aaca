"""Drawing specs: :func:`sample_spec` keeps generated models inside the measurable FLOP window,
:func:`tiny_spec` gives each family's smallest model for quick checks."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnperf.zoo.corpus import CATALOG, sample_corpus
from gnnperf.zoo.flops import count_flops, estimate_flops
from gnnperf.zoo.hf import HF_OPTIONS, HF_TEXT, TINY_VOCAB, sample_hf
from gnnperf.zoo.operators import OPERATORS, sample_operator
from gnnperf.zoo.registry import GENERATED, inputs_for, unknown_family
from gnnperf.zoo.spec import ModelSpec, Sampler, jsonable, stable_int

# FLOP window the generated families are confined to (multiply-adds x 2 of Conv/Linear/MatMul).
FLOP_MIN = 200_000
FLOP_MAX = 1_500_000_000


# Per-family affine warp of the size quantile u ∈ [0, 1] onto the knob scale, fitted so the
# median model at u=0 has ~0.3 MFLOP and at u=1 ~1 GFLOP (log10 FLOPs are close to linear in
# the knob quantile; values outside [0, 1] push the knobs against their limits).
_SIZE_WARP: dict[str, tuple[float, float]] = {
    "vgg": (-0.23, 0.84),
    "resnet": (-0.13, 0.80),
    "mobilenet": (-0.19, 1.04),
    "efficientnet": (-0.23, 0.98),
    "densenet": (-0.23, 0.72),
    "inception": (-0.11, 0.76),
    "squeezenet": (-0.31, 0.91),
    "regnet": (-0.14, 1.13),
    "convnext": (-0.12, 0.94),
    "vit": (0.08, 0.79),
    "bert": (0.05, 0.66),
    "gpt": (0.02, 0.64),
    "mixer": (0.06, 0.84),
    "nb201": (-0.15, 0.73),
}


def _distance_to_window(flops: int) -> float:
    """0 inside [FLOP_MIN, FLOP_MAX], else the log-distance to the nearer bound."""
    if flops < FLOP_MIN:
        return math.log(FLOP_MIN / max(flops, 1))
    if flops > FLOP_MAX:
        return math.log(flops / FLOP_MAX)
    return 0.0


def sample_spec(family: str, seed: int) -> ModelSpec:
    """Draw the hyperparameters of model ``seed`` of ``family``.

    The generator is seeded by a SHA-256 of ``(family, seed)`` so the result is identical
    across processes and machines.  Generated families first draw a size quantile ``u``
    (recorded as ``size_quantile``) that drives their main size knobs, so FLOPs spread
    roughly log-uniformly; draws outside ``[FLOP_MIN, FLOP_MAX]`` are re-drawn from the same
    generator, keeping every model measurable within the labelling budget.
    """
    if family in CATALOG:
        hp = sample_corpus(family, int(seed))
        return ModelSpec(family=family, seed=int(seed), hparams=hp, inputs=inputs_for(family, hp))
    if family in OPERATORS:
        hp = sample_operator(family, int(seed))
        return ModelSpec(family=family, seed=int(seed), hparams=hp, inputs=inputs_for(family, hp))
    if family not in GENERATED and family not in HF_OPTIONS:
        raise unknown_family(family)
    s = Sampler(np.random.default_rng(stable_int("gnnperf.zoo", family, int(seed))))
    if family in HF_OPTIONS:
        hp = jsonable(sample_hf(family, s))
    else:
        sampler = GENERATED[family][0]
        best: tuple[float, dict[str, Any]] | None = None
        u = 0.0
        for attempt in range(64):
            if attempt % 8 == 0:  # a quantile the family cannot reach is re-drawn too
                u = round(s.uniform(0.0, 1.0), 4)
            lo, hi = _SIZE_WARP[family]
            cand = jsonable({**sampler(s, lo + u * (hi - lo)), "size_quantile": u})
            dist = _distance_to_window(count_flops(family, cand))
            if best is None or dist < best[0]:
                best = (dist, cand)
            if dist == 0.0:
                break
        assert best is not None
        hp = best[1]
    return ModelSpec(family=family, seed=int(seed), hparams=hp, inputs=inputs_for(family, hp))


def tiny_spec(family: str) -> ModelSpec:
    """The smallest model of ``family`` that still has all of its layer types.

    For checks that every architecture of the zoo lowers, gets a graph and a prediction
    (in the test suite, on 2 cores): a generated family's smallest of its first eight
    seeds; a real architecture at batch 1 with few, narrow layers (``hparams["tiny"]``),
    a 32-pixel image or 8 tokens of a 128-word vocabulary. Its ``model_id`` ends in
    ``tiny``, so it never passes for a measured zoo model.
    """
    if family in GENERATED:
        seed = min(range(8), key=lambda s: estimate_flops(sample_spec(family, s)))
        spec = sample_spec(family, seed)
        return ModelSpec(family, spec.seed, {**spec.hparams, "tiny": True}, spec.inputs)
    if family not in HF_OPTIONS:
        raise unknown_family(family)
    hp: dict[str, Any] = {"batch": 1, "tiny": True}
    if family in HF_TEXT:
        hp.update(seq_len=8, vocab=TINY_VOCAB)
    else:
        hp["resolution"] = 32
    return ModelSpec(family, 0, hp, inputs_for(family, hp))
