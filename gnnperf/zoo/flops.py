"""FLOP counting on the meta device, cheap enough to run on every candidate
:func:`~gnnperf.zoo.sample_spec` draws."""

from __future__ import annotations

import functools
import json
import math
import warnings
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gnnperf.zoo.inputs import make_inputs
from gnnperf.zoo.registry import construct, inputs_for
from gnnperf.zoo.spec import ModelSpec

_aten = torch.ops.aten


# Ops whose meta kernels are slow Python references but whose output shape is trivial: the FLOP
# counter computes their outputs directly (sample_spec counts every candidate it draws).
_POINTWISE_OPS = frozenset(
    {
        _aten.relu,
        _aten.hardtanh,
        _aten.hardswish,
        _aten.hardsigmoid,
        _aten.silu,
        _aten.sigmoid,
        _aten.gelu,
        _aten.tanh,
        _aten.add,
        _aten.mul,
    }
)
_NORM_OPS = frozenset(
    {_aten.native_batch_norm, _aten._native_batch_norm_legit_no_training, _aten.native_layer_norm}
)
_MATMUL_OPS = frozenset({_aten.mm, _aten.bmm, _aten.addmm, _aten.baddbmm})
_SHAPE_ONLY_OPS = _POINTWISE_OPS | _NORM_OPS | _MATMUL_OPS | {_aten.convolution}


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(shape, device="meta")


def _shape_only(op: Any, args: tuple[Any, ...]) -> Any:
    """Output of ``op`` on float32 meta tensors, or None to fall back to the real meta kernel."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or any(t.dtype != torch.float32 or t.device.type != "meta" for t in tensors):
        return None
    if op in _POINTWISE_OPS:
        return _meta(*torch.broadcast_shapes(*(t.shape for t in tensors)))
    if op in _NORM_OPS:
        return _meta(*args[0].shape), _meta(0), _meta(0)
    if op in _MATMUL_OPS:
        a, b = args[-2], args[-1]
        if a.dim() != b.dim() or a.dim() not in (2, 3):
            return None
        return _meta(*a.shape[:-1], b.shape[-1])
    # convolution(input, weight, bias, stride, padding, dilation, transposed, out_pad, groups)
    x, w, _, stride, padding, dilation, transposed = args[:7]
    if transposed or x.dim() != 4 or not len(stride) == len(padding) == len(dilation) == 2:
        return None
    hw = [
        (x.shape[2 + i] + 2 * padding[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(2)
    ]
    return _meta(x.shape[0], w.shape[0], *hw)


class _FlopCounter(TorchDispatchMode):
    """Counts 2 x multiply-adds of convolutions and matrix products as they are dispatched.

    Much cheaper than ``torch.utils.flop_counter.FlopCounterMode`` on the meta device, which
    matters because :func:`sample_spec` counts every candidate it draws.
    """

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        op = func.overloadpacket
        out = _shape_only(op, args) if op in _SHAPE_ONLY_OPS else None
        if out is None:
            out = func(*args, **(kwargs or {}))
        if op is _aten.convolution:
            w = args[1]
            self.flops += 2 * out.numel() * math.prod(w.shape[1:])
        elif op in (_aten.mm, _aten.bmm):
            self.flops += 2 * out.numel() * args[0].shape[-1]
        elif op in (_aten.addmm, _aten.baddbmm):
            self.flops += 2 * out.numel() * args[1].shape[-1]
        return out


@functools.lru_cache(maxsize=4096)
def _count_flops_cached(family: str, hp_json: str) -> int:
    hp = json.loads(hp_json)
    try:
        return _run_counter(family, hp, "meta")
    except (RuntimeError, NotImplementedError):
        # data-dependent Python control flow (e.g. transformers' GPT-2 mask checks calls
        # .item()) cannot run on meta tensors: count on real CPU tensors instead.
        return _run_counter(family, hp, "cpu")


def _run_counter(family: str, hp: dict[str, Any], device: str) -> int:
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        with torch.device(device):
            model = construct(family, hp).eval()
        gen = None if device == "meta" else torch.Generator().manual_seed(0)
        args = make_inputs(inputs_for(family, hp), hp, gen, device)
        counter = _FlopCounter()
        with torch.no_grad(), counter:
            model(*args)
    return counter.flops


def count_flops(family: str, hp: dict[str, Any]) -> int:
    """FLOPs of one forward pass on the meta device: no weights are materialised, so this
    costs milliseconds even for BERT-base."""
    return _count_flops_cached(family, json.dumps(hp, sort_keys=True))


def estimate_flops(spec: ModelSpec) -> int:
    """FLOPs (multiply-adds x 2 of Conv/Linear/MatMul) of one inference of ``spec``."""
    return count_flops(spec.family, spec.hparams)
