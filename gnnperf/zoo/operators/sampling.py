"""Drawing sweep configurations inside the budget, and how many to draw of each operator."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnperf.zoo.operators.catalog import MAX_ELEMENTS, MAX_FLOPS, OPERATORS
from gnnperf.zoo.spec import Sampler, jsonable, stable_int

_ATTEMPTS = 64


def sample_operator(name: str, seed: int) -> dict[str, Any]:
    """Configuration ``seed`` of operator ``name``: the first seeded draw inside the budget
    (:data:`MAX_FLOPS`, :data:`MAX_ELEMENTS`); the same on every machine."""
    op = OPERATORS[name]
    s = Sampler(np.random.default_rng(stable_int("gnnperf.zoo.operators", name, int(seed))))
    for _ in range(_ATTEMPTS):
        hp = jsonable(op.sample(s))
        flops, elements = op.cost(hp)
        if flops <= MAX_FLOPS and elements <= MAX_ELEMENTS:
            return hp
    raise AssertionError(f"{name}: no configuration within the budget in {_ATTEMPTS} draws")


def allocate_sweep(errors: dict[str, float], total: int, floor: int = 1) -> dict[str, int]:
    """How many configurations of each operator to measure next: ``floor`` each, the rest in
    proportion to the kernel model's error on the operator (nn-Meter's adaptive sampling,
    by operator), largest remainders first so the counts add up to ``total``. Operators
    without an error yet count as the worst one: nothing is known about them."""
    names = sorted(OPERATORS)
    if total < floor * len(names):
        raise ValueError(f"{total} configurations cannot give each of {len(names)} "
                         f"operators {floor}")
    known = [e for e in errors.values() if math.isfinite(e) and e > 0]
    worst = max(known, default=1.0)
    weight = {n: errors[n] if errors.get(n, 0) > 0 and math.isfinite(errors[n]) else worst
              for n in names}
    spare = total - floor * len(names)
    share = {n: spare * weight[n] / sum(weight.values()) for n in names}
    counts = {n: floor + int(share[n]) for n in names}
    left = total - sum(counts.values())
    for n in sorted(names, key=lambda n: int(share[n]) - share[n])[:left]:
        counts[n] += 1
    return counts
