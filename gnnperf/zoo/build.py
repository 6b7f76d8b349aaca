"""Model construction with deterministic weights, so a spec alone rebuilds the measured graph."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from gnnperf.zoo.inputs import example_inputs
from gnnperf.zoo.registry import GENERATED, construct
from gnnperf.zoo.spec import ModelSpec, stable_int


def build_model(spec: ModelSpec) -> nn.Module:
    """Construct the spec's model in eval mode with deterministic random weights.

    Weights come from ``torch.manual_seed`` derived from ``(family, seed)`` (inside
    ``fork_rng``, so the caller's RNG state is untouched).  Generated conv layers get He
    initialisation and every BatchNorm is calibrated on :func:`example_inputs`, so activations
    stay near unit scale through deep stacks: with PyTorch's default init they shrink towards
    zero (and denormals), which would make measured latencies unrepresentative.
    """
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(stable_int("gnnperf.zoo.weights", spec.family, spec.seed))
        model = construct(spec.family, spec.hparams)
        if spec.family in GENERATED:
            for m in model.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
    model.eval()
    _calibrate_batchnorm(model, example_inputs(spec))
    return model


def _round_mantissa(t: torch.Tensor, bits: int = 10) -> torch.Tensor:
    """Keep ``bits`` mantissa bits, so last-ulp differences between machines cannot leak into
    the exported weights (and the ONNX hash)."""
    m, e = torch.frexp(t)
    return torch.ldexp(torch.round(m * 2**bits) / 2**bits, e)


def _calibrate_batchnorm(model: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
    """Set each BatchNorm's running statistics to those of its input on ``args`` (and its
    affine transform to identity), so every BN outputs unit-scale activations.

    One float64 forward pass with pre-hooks: each BN is calibrated before it runs, so later
    layers see already-normalised activations.  Statistics are computed in float64 and
    rounded to 10 mantissa bits so the result is identical across CPUs.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return

    def pre_hook(mod: nn.Module, inp: tuple[torch.Tensor, ...]) -> None:
        x = inp[0]
        dims = [d for d in range(x.dim()) if d != 1]
        if x.numel() // x.shape[1] > 1:
            mean = x.mean(dim=dims)
            var = x.var(dim=dims, unbiased=False)
        else:  # one value per channel: normalise by the second moment only
            mean = torch.zeros(x.shape[1], dtype=x.dtype)
            var = (x * x).mean(dim=dims)
        if not isinstance(mod.running_mean, torch.Tensor) or not isinstance(
            mod.running_var, torch.Tensor
        ):
            return  # track_running_stats=False: normalises by batch statistics anyway
        mod.running_mean.copy_(_round_mantissa(mean))
        mod.running_var.copy_(_round_mantissa(var.clamp_min(1e-12)))
        if isinstance(mod.weight, torch.Tensor) and isinstance(mod.bias, torch.Tensor):
            mod.weight.fill_(1.0)  # transformers inits BN gamma ~ N(0, 0.02) for some models
            mod.bias.fill_(0.0)

    handles = [bn.register_forward_pre_hook(pre_hook) for bn in bns]
    try:
        model.double()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(*(a.double() if a.is_floating_point() else a for a in args))
    finally:
        for h in handles:
            h.remove()
        model.float()
