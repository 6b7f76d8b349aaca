"""Deterministic example inputs of a spec: for BatchNorm calibration, FLOP counting and export."""

from __future__ import annotations

from typing import Any

import torch

from gnnperf.zoo.spec import InputSpec, ModelSpec, stable_int

_DTYPES = {"float32": torch.float32, "int64": torch.int64}


def make_inputs(
    spec_inputs: InputSpec, hp: dict[str, Any], gen: torch.Generator | None, device: str
) -> tuple[torch.Tensor, ...]:
    """Inputs in the order of ``spec_inputs``: empty on the meta device (FLOP counting needs
    shapes only), else random from ``gen``."""
    out = []
    for shape, dtype in spec_inputs.values():
        if dtype == "int64":
            vocab = int(hp.get("vocab", 1000))
            if device == "meta":
                out.append(torch.empty(shape, dtype=torch.int64, device="meta"))
            else:
                out.append(torch.randint(0, vocab, shape, generator=gen, dtype=torch.int64))
        else:
            if device == "meta":
                out.append(torch.empty(shape, dtype=_DTYPES[dtype], device="meta"))
            else:
                out.append(torch.randn(shape, generator=gen, dtype=_DTYPES[dtype]))
    return tuple(out)


def example_inputs(spec: ModelSpec) -> tuple[torch.Tensor, ...]:
    """Deterministic random inputs in the order of ``spec.inputs`` (token ids < vocab)."""
    gen = torch.Generator().manual_seed(stable_int("gnnperf.zoo.inputs", spec.family, spec.seed))
    return make_inputs(spec.inputs, spec.hparams, gen, "cpu")
