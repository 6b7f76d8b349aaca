"""A zoo of generated model families for latency measurement.

Every model is a pure function of ``(family, seed)``: :func:`sample_spec` draws the
hyperparameters from a NumPy generator seeded by a stable hash of the pair, and
:func:`build_model` constructs a torch module from those hyperparameters alone, with
``torch.manual_seed`` derived from the same pair.  That way a dataset only needs to store the
spec (or just ``family`` and ``seed``) to rebuild the exact ONNX graph that was measured.

The generated families are written in plain torch with static shapes (every reshape uses
Python ints known from the hyperparameters) so TVM's Relax ONNX frontend imports them without
any shape-folding pass.  Sizes are aimed at ~0.2 MFLOP .. ~1.5 GFLOP per inference, because
labels are measured on a 2-core CPU under a tight budget.  The ``hf-*`` entries are real
architectures built from ``transformers`` configs with random weights (nothing is downloaded).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import onnx
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from gnnperf.atomic import write_bytes
from gnnperf.errors import ModelLoadError

__all__ = [
    "FAMILIES",
    "REAL_ARCHITECTURES",
    "ModelSpec",
    "build_model",
    "estimate_flops",
    "example_inputs",
    "export_onnx",
    "onnx_sha256",
    "sample_spec",
    "tiny_spec",
]

T = TypeVar("T")
_aten = torch.ops.aten

ONNX_OPSET = 17
# FLOP window the generated families are confined to (multiply-adds x 2 of Conv/Linear/MatMul).
FLOP_MIN = 200_000
FLOP_MAX = 1_500_000_000

InputSpec = dict[str, tuple[tuple[int, ...], str]]


# --------------------------------------------------------------------------------------------
# Spec
# --------------------------------------------------------------------------------------------


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (shapes become lists)."""
        return {
            "family": self.family,
            "seed": self.seed,
            "hparams": _jsonable(self.hparams),
            "inputs": {k: [list(shape), dtype] for k, (shape, dtype) in self.inputs.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelSpec:
        """Inverse of :meth:`to_dict` (also accepts the dict after a JSON round trip)."""
        inputs = {
            str(k): (tuple(int(x) for x in shape), str(dtype))
            for k, (shape, dtype) in d["inputs"].items()
        }
        return cls(
            family=str(d["family"]),
            seed=int(d["seed"]),
            hparams=_jsonable(d["hparams"]),
            inputs=inputs,
        )


def _jsonable(x: Any) -> Any:
    """Deep copy with tuples → lists and NumPy scalars → Python scalars, so specs compare equal
    before and after a JSON round trip."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


# --------------------------------------------------------------------------------------------
# Seeding and sampling helpers
# --------------------------------------------------------------------------------------------


def _stable_int(*parts: object) -> int:
    """63-bit integer from a SHA-256 of the parts (Python's hash() is salted per process)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


class _Sampler:
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


def _batch(s: _Sampler) -> int:
    return s.choice(_BATCHES, _BATCH_WEIGHTS)


def _div(v: float, d: int = 8, min_value: int | None = None) -> int:
    """Round a channel count to a multiple of ``d`` (never dropping more than 10%)."""
    min_value = d if min_value is None else min_value
    new = max(min_value, int(v + d / 2) // d * d)
    if new < 0.9 * v:
        new += d
    return int(new)


def _classes(s: _Sampler) -> int:
    return s.choice([10, 100, 1000], [0.3, 0.3, 0.4])


# --------------------------------------------------------------------------------------------
# Shared building blocks
# --------------------------------------------------------------------------------------------


def _act(name: str) -> nn.Module:
    acts: dict[str, Callable[[], nn.Module]] = {
        "relu": nn.ReLU,
        "relu6": nn.ReLU6,
        "hardswish": nn.Hardswish,
        "silu": nn.SiLU,
        "gelu": nn.GELU,
        "sigmoid": nn.Sigmoid,
        "hardsigmoid": nn.Hardsigmoid,
        "identity": nn.Identity,
    }
    return acts[name]()


def _conv_bn(
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    groups: int = 1,
    act: str = "relu",
    bn: bool = True,
) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=not bn)]
    if bn:
        layers.append(nn.BatchNorm2d(cout))
    if act != "identity":
        layers.append(_act(act))
    return nn.Sequential(*layers)


def _head(cin: int, classes: int) -> nn.Sequential:
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


class _Residual(nn.Module):
    """``act(body(x) + shortcut(x))``; shortcut None means identity."""

    def __init__(
        self, body: nn.Module, shortcut: nn.Module | None = None, act: str = "identity"
    ) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut
        self.act = _act(act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x if self.shortcut is None else self.shortcut(x)
        return self.act(self.body(x) + s)


class _SqueezeExcite(nn.Module):
    def __init__(self, c: int, rd: int, act: str = "relu", gate: str = "sigmoid") -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, rd, 1)
        self.act = _act(act)
        self.fc2 = nn.Conv2d(rd, c, 1)
        self.gate = _act(gate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class _InvertedResidual(nn.Module):
    """MobileNetV2/V3 and EfficientNet MBConv block."""

    def __init__(
        self,
        cin: int,
        cout: int,
        k: int,
        stride: int,
        exp: int,
        se: int,
        act: str,
        se_act: str,
        gate: str,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if exp != cin:
            layers.append(_conv_bn(cin, exp, 1, act=act))
        layers.append(_conv_bn(exp, exp, k, stride, groups=exp, act=act))
        if se > 0:
            layers.append(_SqueezeExcite(exp, se, se_act, gate))
        layers.append(_conv_bn(exp, cout, 1, act="identity"))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class _LayerNorm2d(nn.Module):
    """LayerNorm over the channel axis of an NCHW tensor (ConvNeXt style)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(c, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _Mlp(nn.Sequential):
    def __init__(self, dim: int, hidden: int, out: int | None = None, act: str = "gelu") -> None:
        super().__init__(nn.Linear(dim, hidden), _act(act), nn.Linear(hidden, out or dim))


class _Attention(nn.Module):
    """Multi-head self-attention with explicit q/k/v matmuls and static reshapes.

    ``fused`` selects one qkv projection (split by Gather) or three separate Linears;
    ``causal`` masks with a constant lower-triangular buffer of ``max_len`` rows.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        batch: int,
        tokens: int,
        fused: bool = True,
        causal: bool = False,
        max_len: int = 0,
    ) -> None:
        super().__init__()
        self.b, self.n, self.h, self.d = batch, tokens, heads, dim // heads
        self.scale = self.d**-0.5
        self.fused = fused
        if fused:
            self.qkv = nn.Linear(dim, 3 * dim)
        else:
            self.q = nn.Linear(dim, dim)
            self.k = nn.Linear(dim, dim)
            self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.causal = causal
        if causal:
            tril = torch.tril(torch.ones(max(max_len, tokens), max(max_len, tokens)))
            self.register_buffer("tril", tril.to(torch.bool), persistent=False)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(self.b, self.n, self.h, self.d).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            qkv = self.qkv(x).reshape(self.b, self.n, 3, self.h, self.d).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        att = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        if self.causal:
            mask = self.tril[: self.n, : self.n]
            att = att.masked_fill(~mask, float("-inf"))
        att = att.softmax(dim=-1)
        out = torch.matmul(att, v).transpose(1, 2).reshape(self.b, self.n, self.h * self.d)
        return self.proj(out)


class _TorchMHA(nn.Module):
    """``nn.MultiheadAttention`` as self-attention, returning only the output tensor.

    Calls the module's reference path (``F.multi_head_attention_forward``) directly: in eval
    mode under ``no_grad`` the module itself takes the fused ``_native_multi_head_attention``
    fast path, which the ONNX exporter cannot translate.
    """

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.mha
        q = x.transpose(0, 1)  # (tokens, batch, dim)
        out, _ = F.multi_head_attention_forward(
            q,
            q,
            q,
            m.embed_dim,
            m.num_heads,
            m.in_proj_weight,
            m.in_proj_bias,
            m.bias_k,
            m.bias_v,
            m.add_zero_attn,
            0.0,
            m.out_proj.weight,
            m.out_proj.bias,
            training=False,
            need_weights=False,
        )
        return out.transpose(0, 1)


class _TransformerLayer(nn.Module):
    def __init__(self, attn: nn.Module, dim: int, hidden: int, pre_norm: bool, act: str) -> None:
        super().__init__()
        self.attn = attn
        self.ln1 = nn.LayerNorm(dim)
        self.mlp = _Mlp(dim, hidden, act=act)
        self.ln2 = nn.LayerNorm(dim)
        self.pre_norm = pre_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


def _heads_for(s: _Sampler, dim: int, options: Sequence[int] = (1, 2, 3, 4, 6, 8, 12)) -> int:
    valid = [h for h in options if dim % h == 0 and dim // h >= 8]
    return s.choice(valid) if valid else 1


# --------------------------------------------------------------------------------------------
# Family: vgg
# --------------------------------------------------------------------------------------------


def _sample_vgg(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 128, 8)
    n_stages = s.randint(2, min(5, int(math.log2(res)) - 1))
    c0 = s.knob(u, 4, 48, 4)
    cmax = s.choice([128, 256, 512])
    return {
        "batch": _batch(s),
        "resolution": res,
        "stage_widths": [min(cmax, c0 * 2**i) for i in range(n_stages)],
        "stage_convs": [s.choice([1, 2, 3], [0.4, 0.4, 0.2]) for _ in range(n_stages)],
        "stage_kernels": [s.choice([3, 5, 1], [0.75, 0.15, 0.1]) for _ in range(n_stages)],
        "batch_norm": s.coin(0.6),
        "pool": s.choice(["max", "avg"], [0.8, 0.2]),
        "head": s.choice(["gap", "fc"]),
        "fc_hidden": s.logint(32, 512, 8),
        "classes": _classes(s),
    }


def _build_vgg(hp: dict[str, Any]) -> nn.Module:
    layers: list[nn.Module] = []
    cin, size = 3, hp["resolution"]
    for width, convs, k in zip(
        hp["stage_widths"], hp["stage_convs"], hp["stage_kernels"], strict=True
    ):
        for _ in range(convs):
            layers.append(_conv_bn(cin, width, k, bn=hp["batch_norm"]))
            cin = width
        layers.append(nn.MaxPool2d(2) if hp["pool"] == "max" else nn.AvgPool2d(2))
        size //= 2
    if hp["head"] == "gap":
        layers.append(_head(cin, hp["classes"]))
    else:
        h = hp["fc_hidden"]
        layers += [
            nn.Flatten(),
            nn.Linear(cin * size * size, h),
            nn.ReLU(),
            nn.Linear(h, h),
            nn.ReLU(),
            nn.Linear(h, hp["classes"]),
        ]
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: resnet (basic or bottleneck blocks, optional groups = ResNeXt)
# --------------------------------------------------------------------------------------------


def _sample_resnet(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 160, 8)
    block = s.choice(["basic", "bottleneck"])
    n_stages = s.randint(2, 4)
    base = s.knob(u, 4, 64, 4)
    groups = s.choice([1, 2, 4, 8], [0.55, 0.15, 0.15, 0.15]) if block == "bottleneck" else 1
    expansion = s.choice([2, 4], [0.3, 0.7]) if block == "bottleneck" else 1
    # bottleneck mid width must be a multiple of the group count
    mids = [max(groups, base * 2**i // groups * groups) for i in range(n_stages)]
    return {
        "batch": _batch(s),
        "resolution": res,
        "block": block,
        "stem_kernel": s.choice([3, 7]),
        "stem_stride": s.choice([1, 2], [0.3, 0.7]),
        "stem_pool": s.coin(0.5),
        "stem_width": base,
        "stage_mids": mids,
        "stage_widths": [m * expansion for m in mids],
        "stage_depths": [s.choice([1, 2, 3, 4], [0.35, 0.35, 0.15, 0.15]) for _ in mids],
        "groups": groups,
        "classes": _classes(s),
    }


def _build_resnet(hp: dict[str, Any]) -> nn.Module:
    stem_stride = hp["stem_stride"]
    layers: list[nn.Module] = [_conv_bn(3, hp["stem_width"], hp["stem_kernel"], stem_stride)]
    if hp["stem_pool"]:
        layers.append(nn.MaxPool2d(3, 2, 1))
    cin = hp["stem_width"]
    for i, (mid, cout, depth) in enumerate(
        zip(hp["stage_mids"], hp["stage_widths"], hp["stage_depths"], strict=True)
    ):
        for j in range(depth):
            stride = 2 if i > 0 and j == 0 else 1
            if hp["block"] == "basic":
                body: nn.Module = nn.Sequential(
                    _conv_bn(cin, cout, 3, stride), _conv_bn(cout, cout, 3, act="identity")
                )
            else:
                body = nn.Sequential(
                    _conv_bn(cin, mid, 1),
                    _conv_bn(mid, mid, 3, stride, groups=hp["groups"]),
                    _conv_bn(mid, cout, 1, act="identity"),
                )
            short = None
            if stride != 1 or cin != cout:
                short = _conv_bn(cin, cout, 1, stride, act="identity")
            layers.append(_Residual(body, short, "relu"))
            cin = cout
    layers.append(_head(cin, hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: mobilenet (V2/V3-style inverted residuals)
# --------------------------------------------------------------------------------------------


def _sample_mobile_blocks(
    s: _Sampler, u: float, res: int, wm: float, v3: bool, stem: int
) -> list[list[Any]]:
    """Blocks as [kernel, expanded, out, stride, se_channels, act]."""
    blocks: list[list[Any]] = []
    n_stages = s.knob(u, 2, 6, jitter=0.4)
    max_down = max(1, int(math.log2(res)) - 3)  # the stem already halves; keep >= 4 px
    downs = sorted(s.rng.choice(n_stages, size=min(n_stages, max_down), replace=False).tolist())
    cin, base = stem, 16.0
    for i in range(n_stages):
        base *= s.choice([1.0, 1.5, 2.0], [0.2, 0.5, 0.3]) if i else 1.0
        cout = _div(base * wm)
        exp_ratio = s.choice([1, 3, 4, 6] if not v3 else [2.5, 3, 4, 6], [0.1, 0.3, 0.2, 0.4])
        k = s.choice([3, 5], [0.7, 0.3]) if v3 else 3
        se = v3 and s.coin(0.5)
        act = s.choice(["relu", "hardswish"]) if v3 else "relu6"
        for j in range(s.knob(u, 1, 4, jitter=0.5)):
            exp = _div(cin * (1 if i == 0 and not v3 else exp_ratio))
            stride = 2 if (j == 0 and i in downs) else 1
            se_ch = _div(exp / 4) if se else 0
            blocks.append([k, exp, cout, stride, se_ch, act])
            cin = cout
    return blocks


def _sample_mobilenet(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 224, 16)
    v3 = s.coin(0.5)
    wm = s.knob_choice(u, [0.25, 0.35, 0.5, 0.75, 1.0, 1.4])
    stem = _div(16 * wm)
    blocks = _sample_mobile_blocks(s, u, res, wm, v3, stem)
    last = blocks[-1][2]
    return {
        "batch": _batch(s),
        "resolution": res,
        "style": "v3" if v3 else "v2",
        "width_mult": wm,
        "stem_width": stem,
        "stem_act": "hardswish" if v3 else "relu6",
        "blocks": blocks,
        "last_width": _div(max(last * 6, s.choice([576, 960, 1280]) * wm)),
        "head_hidden": s.choice([0, 1024, 1280]) if v3 else 0,
        "classes": _classes(s),
    }


def _build_mobilenet(hp: dict[str, Any]) -> nn.Module:
    v3 = hp["style"] == "v3"
    layers: list[nn.Module] = [_conv_bn(3, hp["stem_width"], 3, 2, act=hp["stem_act"])]
    cin = hp["stem_width"]
    for k, exp, cout, stride, se, act in hp["blocks"]:
        gate = "hardsigmoid" if v3 else "sigmoid"
        layers.append(_InvertedResidual(cin, cout, k, stride, exp, se, act, "relu", gate))
        cin = cout
    act = hp["stem_act"]
    layers.append(_conv_bn(cin, hp["last_width"], 1, act=act))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    cin = hp["last_width"]
    if hp["head_hidden"]:
        layers += [nn.Linear(cin, hp["head_hidden"]), _act(act)]
        cin = hp["head_hidden"]
    layers.append(nn.Linear(cin, hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: efficientnet (MBConv + SE, compound scaling)
# --------------------------------------------------------------------------------------------

# EfficientNet-B0 stages: expand ratio, kernel, stride, out channels, repeats.
_EFFNET_B0 = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)


def _sample_efficientnet(s: _Sampler, u: float) -> dict[str, Any]:
    phi = round(-16.0 + 16.5 * s.jittered(u, 0.2), 3)
    width = 1.1**phi
    depth = 1.2**phi
    res = max(16, int(16 * round(224 * 1.15**phi / 16)))
    n_stages = s.knob_choice(u, [4, 5, 6, 7], jitter=0.5)
    stem = _div(32 * width)
    blocks: list[list[Any]] = []
    cin = stem
    for e, k, st, c, r in _EFFNET_B0[:n_stages]:
        cout = _div(c * width)
        for j in range(max(1, math.ceil(r * depth))):
            exp = cin * e
            se = max(1, int(cin * 0.25))
            blocks.append([k, exp, cout, st if j == 0 else 1, se, "silu"])
            cin = cout
    return {
        "batch": _batch(s),
        "resolution": res,
        "phi": phi,
        "width_mult": round(width, 4),
        "depth_mult": round(depth, 4),
        "stages": n_stages,
        "stem_width": stem,
        "blocks": blocks,
        "head_width": _div(1280 * width),
        "classes": _classes(s),
    }


def _build_efficientnet(hp: dict[str, Any]) -> nn.Module:
    layers: list[nn.Module] = [_conv_bn(3, hp["stem_width"], 3, 2, act="silu")]
    cin = hp["stem_width"]
    for k, exp, cout, stride, se, act in hp["blocks"]:
        layers.append(_InvertedResidual(cin, cout, k, stride, exp, se, act, "silu", "sigmoid"))
        cin = cout
    layers.append(_conv_bn(cin, hp["head_width"], 1, act="silu"))
    layers.append(_head(hp["head_width"], hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: densenet
# --------------------------------------------------------------------------------------------


class _DenseBlock(nn.Module):
    def __init__(self, cin: int, layers: int, growth: int, bottleneck: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(layers):
            c = cin + i * growth
            mods: list[nn.Module] = [nn.BatchNorm2d(c), nn.ReLU()]
            if bottleneck:
                mods += [nn.Conv2d(c, 4 * growth, 1, bias=False), nn.BatchNorm2d(4 * growth)]
                mods += [nn.ReLU()]
                c = 4 * growth
            mods.append(nn.Conv2d(c, growth, 3, padding=1, bias=False))
            self.layers.append(nn.Sequential(*mods))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [x]
        for layer in self.layers:
            inp = feats[0] if len(feats) == 1 else torch.cat(feats, 1)
            feats.append(layer(inp))
        return torch.cat(feats, 1)


def _sample_densenet(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 128, 8)
    growth = s.knob_choice(u, [4, 8, 12, 16, 24, 32])
    max_layers = s.knob(u, 2, 8)
    stem = s.choice(["cifar", "imagenet"]) if res >= 48 else "cifar"
    n_blocks = s.randint(2, 4 if res >= 32 else 3)
    return {
        "batch": _batch(s),
        "resolution": res,
        "growth": growth,
        "stem": stem,
        "stem_width": 2 * growth,
        "block_layers": [s.randint(1, max_layers) for _ in range(n_blocks)],
        "bottleneck": s.coin(0.6),
        "compression": s.choice([0.5, 1.0], [0.7, 0.3]),
        "classes": _classes(s),
    }


def _build_densenet(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    if hp["stem"] == "cifar":
        layers: list[nn.Module] = [nn.Conv2d(3, c, 3, padding=1, bias=False)]
    else:
        layers = [_conv_bn(3, c, 7, 2), nn.MaxPool2d(3, 2, 1)]
    n = len(hp["block_layers"])
    for i, nl in enumerate(hp["block_layers"]):
        layers.append(_DenseBlock(c, nl, hp["growth"], hp["bottleneck"]))
        c += nl * hp["growth"]
        if i < n - 1:
            cout = int(c * hp["compression"])
            layers += [
                nn.BatchNorm2d(c),
                nn.ReLU(),
                nn.Conv2d(c, cout, 1, bias=False),
                nn.AvgPool2d(2),
            ]
            c = cout
    layers += [nn.BatchNorm2d(c), nn.ReLU(), _head(c, hp["classes"])]
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: inception
# --------------------------------------------------------------------------------------------


class _InceptionModule(nn.Module):
    def __init__(self, cin: int, m: dict[str, Any]) -> None:
        super().__init__()
        branches: list[nn.Module] = []
        if m["b1"]:
            branches.append(_conv_bn(cin, m["b1"], 1))
        branches.append(nn.Sequential(_conv_bn(cin, m["b3r"], 1), _conv_bn(m["b3r"], m["b3"], 3)))
        if m["b5"]:
            if m["factorized"]:
                b5: nn.Module = nn.Sequential(
                    _conv_bn(cin, m["b5r"], 1),
                    _conv_bn(m["b5r"], m["b5"], 3),
                    _conv_bn(m["b5"], m["b5"], 3),
                )
            else:
                b5 = nn.Sequential(_conv_bn(cin, m["b5r"], 1), _conv_bn(m["b5r"], m["b5"], 5))
            branches.append(b5)
        pool = nn.MaxPool2d(3, 1, 1) if m["pool"] == "max" else nn.AvgPool2d(3, 1, 1)
        branches.append(nn.Sequential(pool, _conv_bn(cin, m["pool_proj"], 1)))
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


def _inception_out(m: dict[str, Any]) -> int:
    return int(m["b1"] + m["b3"] + m["b5"] + m["pool_proj"])


def _sample_inception(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 160, 8)
    n_groups = s.knob(u, 1, 3, jitter=0.5)
    base = s.knob(u, 4, 64, 4)
    groups: list[list[dict[str, Any]]] = []
    for g in range(n_groups):
        w = base * 2**g
        mods = []
        for _ in range(s.knob(u, 1, 3, jitter=0.5)):
            b3 = _div(w * s.uniform(0.8, 2.0), 4, 4)
            b5 = _div(w * s.uniform(0.25, 1.0), 4, 4) if s.coin(0.75) else 0
            mods.append(
                {
                    "b1": _div(w * s.uniform(0.5, 1.5), 4, 4) if s.coin(0.85) else 0,
                    "b3r": _div(b3 * s.uniform(0.4, 1.0), 4, 4),
                    "b3": b3,
                    "b5r": _div(max(b5, 4) * s.uniform(0.25, 1.0), 4, 4),
                    "b5": b5,
                    "factorized": s.coin(0.5),
                    "pool": s.choice(["max", "avg"]),
                    "pool_proj": _div(w * s.uniform(0.25, 1.0), 4, 4),
                }
            )
        groups.append(mods)
    return {
        "batch": _batch(s),
        "resolution": res,
        "stem_width": s.knob(u, 4, 64, 4),
        "stem_stride": s.choice([1, 2]),
        "stem_pool": res >= 64 and s.coin(0.5),
        "groups": groups,
        "classes": _classes(s),
    }


def _build_inception(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    layers: list[nn.Module] = [_conv_bn(3, c, 3, hp["stem_stride"])]
    if hp["stem_pool"]:
        layers.append(nn.MaxPool2d(3, 2, 1))
    for g, mods in enumerate(hp["groups"]):
        if g > 0:
            layers.append(nn.MaxPool2d(3, 2, 1))
        for m in mods:
            layers.append(_InceptionModule(c, m))
            c = _inception_out(m)
    layers.append(_head(c, hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: squeezenet
# --------------------------------------------------------------------------------------------


class _Fire(nn.Module):
    def __init__(self, cin: int, sq: int, e1: int, e3: int, bypass: bool) -> None:
        super().__init__()
        self.squeeze = _conv_bn(cin, sq, 1, bn=False)
        self.e1 = _conv_bn(sq, e1, 1, bn=False)
        self.e3 = _conv_bn(sq, e3, 3, bn=False)
        self.bypass = bypass and cin == e1 + e3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        y = torch.cat([self.e1(s), self.e3(s)], 1)
        return x + y if self.bypass else y


def _sample_squeezenet(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 32, 224, 16)
    n_fire = s.randint(2, 8)
    base_e, incr = s.knob(u, 8, 128, 8), s.knob(u, 4, 128, 4)
    pct3 = s.choice([0.25, 0.5, 0.75])
    sr = s.choice([0.125, 0.25, 0.5])
    freq = s.randint(1, 3)
    fires = []
    for i in range(n_fire):
        e = base_e + incr * (i // freq)
        e3 = max(4, int(e * pct3))
        fires.append([max(4, int(e * sr)), e - e3 if e - e3 > 0 else 4, e3])
    max_pools = max(0, int(math.log2(res)) - 4)
    pool_after = sorted(
        s.rng.choice(n_fire, size=min(n_fire, max_pools, s.randint(1, 3)), replace=False).tolist()
    )
    return {
        "batch": _batch(s),
        "resolution": res,
        "stem_width": s.knob(u, 8, 96, 8),
        "stem_kernel": s.choice([3, 7]),
        "fires": fires,
        "pool_after": pool_after,
        "bypass": s.coin(0.5),
        "classes": _classes(s),
    }


def _build_squeezenet(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    layers: list[nn.Module] = [
        _conv_bn(3, c, hp["stem_kernel"], 2, bn=False),
        nn.MaxPool2d(3, 2, 1),
    ]
    for i, (sq, e1, e3) in enumerate(hp["fires"]):
        layers.append(_Fire(c, sq, e1, e3, hp["bypass"]))
        c = e1 + e3
        if i in hp["pool_after"]:
            layers.append(nn.MaxPool2d(3, 2, 1))
    layers += [
        nn.Conv2d(c, hp["classes"], 1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    ]
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: regnet (quantized linear widths, grouped 3x3 convs, optional SE = RegNetY)
# --------------------------------------------------------------------------------------------


def _sample_regnet(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 160, 8)
    depth = s.randint(2, s.knob(u, 4, 16))
    w0 = s.knob(u, 8, 64, 8)
    wa = round(s.loguniform(4.0, 48.0), 2)
    wm = round(s.uniform(1.5, 3.0), 3)
    g = s.choice([1, 2, 4, 8, 16, 24])
    # quantized linear width parameterisation: u_j = w0 + wa*j, snapped to w0 * wm^k
    u = [w0 + wa * j for j in range(depth)]
    ks = [round(math.log(uj / w0) / math.log(wm)) for uj in u]
    widths = [_div(w0 * wm**k) for k in ks]
    stage_widths: list[int] = []
    stage_depths: list[int] = []
    for w in widths:
        if stage_widths and (stage_widths[-1] == w or len(stage_widths) == 4):
            stage_depths[-1] += 1
        else:
            stage_widths.append(w)
            stage_depths.append(1)
    gw = [min(g, w) for w in stage_widths]
    stage_widths = [
        max(gi, int(round(w / gi)) * gi) for w, gi in zip(stage_widths, gw, strict=True)
    ]
    return {
        "batch": _batch(s),
        "resolution": res,
        "depth": depth,
        "w0": w0,
        "wa": wa,
        "wm": wm,
        "group_width": g,
        "se": s.coin(0.5),
        "stem_width": s.choice([16, 24, 32]),
        "stage_widths": stage_widths,
        "stage_depths": stage_depths,
        "stage_groups": [w // gi for w, gi in zip(stage_widths, gw, strict=True)],
        "classes": _classes(s),
    }


def _build_regnet(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    layers: list[nn.Module] = [_conv_bn(3, c, 3, 2)]
    stages = zip(hp["stage_widths"], hp["stage_depths"], hp["stage_groups"], strict=True)
    for w, d, groups in stages:
        for j in range(d):
            stride = 2 if j == 0 else 1
            body: list[nn.Module] = [_conv_bn(c, w, 1), _conv_bn(w, w, 3, stride, groups=groups)]
            if hp["se"]:
                body.append(_SqueezeExcite(w, max(1, int(c * 0.25))))
            body.append(_conv_bn(w, w, 1, act="identity"))
            short = _conv_bn(c, w, 1, stride, act="identity") if stride != 1 or c != w else None
            layers.append(_Residual(nn.Sequential(*body), short, "relu"))
            c = w
    layers.append(_head(c, hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: convnext
# --------------------------------------------------------------------------------------------


class _ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, k: int, ratio: int, layer_scale: bool) -> None:
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, k, padding=k // 2, groups=dim)
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = _Mlp(dim, ratio * dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6)) if layer_scale else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.mlp(self.ln(self.dw(x).permute(0, 2, 3, 1)))
        if self.gamma is not None:
            y = y * self.gamma
        return x + y.permute(0, 3, 1, 2)


def _sample_convnext(s: _Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 128, 8)
    patch = s.choice([2, 4], [0.3, 0.7])
    n_stages = s.randint(2, min(4, int(math.log2(res // patch)) + 1))
    d0 = s.knob(u, 8, 96, 8)
    depths = [s.choice([1, 2, 3], [0.4, 0.4, 0.2]) for _ in range(n_stages)]
    if n_stages >= 3 and s.coin(0.5):
        depths[-2] = s.randint(3, 6)  # ConvNeXt puts most blocks in its third stage
    return {
        "batch": _batch(s),
        "resolution": res,
        "stem_patch": patch,
        "stage_dims": [d0 * 2**i for i in range(n_stages)],
        "stage_depths": depths,
        "kernel": s.choice([3, 5, 7], [0.2, 0.2, 0.6]),
        "mlp_ratio": s.choice([2, 3, 4], [0.2, 0.2, 0.6]),
        "layer_scale": s.coin(0.5),
        "classes": _classes(s),
    }


class _ConvNeXtHead(nn.Module):
    def __init__(self, dim: int, classes: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.ln(x.mean(dim=(2, 3))))


def _build_convnext(hp: dict[str, Any]) -> nn.Module:
    dims = hp["stage_dims"]
    p = hp["stem_patch"]
    layers: list[nn.Module] = [nn.Conv2d(3, dims[0], p, p), _LayerNorm2d(dims[0])]
    for i, (d, n) in enumerate(zip(dims, hp["stage_depths"], strict=True)):
        if i > 0:
            layers += [_LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], d, 2, 2)]
        for _ in range(n):
            layers.append(_ConvNeXtBlock(d, hp["kernel"], hp["mlp_ratio"], hp["layer_scale"]))
    layers.append(_ConvNeXtHead(dims[-1], hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: vit
# --------------------------------------------------------------------------------------------


class _ViT(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        d, p, b = hp["dim"], hp["patch"], hp["batch"]
        self.grid = hp["resolution"] // p
        self.patches = self.grid * self.grid
        self.tokens = self.patches + (1 if hp["cls_token"] else 0)
        self.b, self.d = b, d
        self.embed = nn.Conv2d(3, d, p, p)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02) if hp["cls_token"] else None
        self.pos = nn.Parameter(torch.randn(1, self.tokens, d) * 0.02)
        layers = []
        for _ in range(hp["depth"]):
            if hp["attention"] == "mha":
                attn: nn.Module = _TorchMHA(d, hp["heads"])
            else:
                attn = _Attention(d, hp["heads"], b, self.tokens, fused=hp["fused_qkv"])
            layers.append(_TransformerLayer(attn, d, hp["mlp_ratio"] * d, True, "gelu"))
        self.layers = nn.Sequential(*layers)
        self.ln = nn.LayerNorm(d)
        self.pool = hp["pool"]
        self.fc = nn.Linear(d, hp["classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).reshape(self.b, self.d, self.patches).transpose(1, 2)
        if self.cls is not None:
            x = torch.cat([self.cls.expand(self.b, 1, self.d), x], 1)
        x = self.ln(self.layers(x + self.pos))
        x = x[:, 0] if self.pool == "cls" else x.mean(dim=1)
        return self.fc(x)


def _sample_vit(s: _Sampler, u: float) -> dict[str, Any]:
    patch = s.choice([4, 8, 16], [0.35, 0.4, 0.25])
    grid = s.knob(u, 2, 14)
    dim = s.knob_choice(u, [16, 24, 32, 48, 64, 96, 128, 192, 256, 384])
    cls_token = s.coin(0.6)
    return {
        "batch": _batch(s),
        "resolution": grid * patch,
        "patch": patch,
        "dim": dim,
        "heads": _heads_for(s, dim),
        "depth": s.knob(u, 1, 8, jitter=0.4),
        "mlp_ratio": s.choice([2, 3, 4], [0.2, 0.2, 0.6]),
        "attention": s.choice(["mha", "explicit"], [0.4, 0.6]),
        "fused_qkv": s.coin(0.5),
        "cls_token": cls_token,
        "pool": "cls" if cls_token and s.coin(0.7) else "mean",
        "classes": _classes(s),
    }


def _build_vit(hp: dict[str, Any]) -> nn.Module:
    return _ViT(hp)


# --------------------------------------------------------------------------------------------
# Families: bert (post-norm encoder) and gpt (pre-norm causal decoder)
# --------------------------------------------------------------------------------------------


class _TextTransformer(nn.Module):
    def __init__(self, hp: dict[str, Any], causal: bool) -> None:
        super().__init__()
        b, n, d = hp["batch"], hp["seq_len"], hp["hidden"]
        self.n = n
        self.causal = causal
        self.tok = nn.Embedding(hp["vocab"], d)
        self.pos = nn.Embedding(hp["max_positions"], d)
        self.ln_emb = nn.LayerNorm(d) if not causal else None
        layers = []
        for _ in range(hp["layers"]):
            attn = _Attention(
                d,
                hp["heads"],
                b,
                n,
                fused=hp["fused_qkv"],
                causal=causal,
                max_len=hp["max_positions"],
            )
            act = hp["activation"]
            layers.append(_TransformerLayer(attn, d, hp["intermediate"], causal, act))
        self.layers = nn.Sequential(*layers)
        self.ln_f = nn.LayerNorm(d) if causal else None
        self.head_kind = hp["head"]
        self.head: nn.Module | None = None
        if hp["head"] == "pooler":
            self.head = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        elif hp["head"] == "lm":
            lm = nn.Linear(d, hp["vocab"], bias=False)
            if hp.get("tied_head", False):
                lm.weight = self.tok.weight
            self.head = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(input_ids) + self.pos.weight[: self.n]
        if self.ln_emb is not None:
            x = self.ln_emb(x)
        x = self.layers(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        if self.head_kind == "pooler":
            assert self.head is not None
            return self.head(x[:, 0])
        if self.head is not None:
            return self.head(x)
        return x


def _sample_text(s: _Sampler, u: float, causal: bool) -> dict[str, Any]:
    seq = s.knob_choice(u, [4, 8, 16, 32, 64, 128, 256])
    hidden = s.knob_choice(u, [16, 32, 64, 128, 192, 256, 384, 512, 768])
    hp: dict[str, Any] = {
        "batch": _batch(s),
        "seq_len": seq,
        "vocab": s.knob_choice(u, [512, 1000, 4096, 8192, 16384, 30522], jitter=0.4),
        "hidden": hidden,
        "heads": _heads_for(s, hidden, (1, 2, 4, 8, 12, 16)),
        "layers": s.knob(u, 1, 8, jitter=0.4),
        "intermediate": hidden * s.choice([2, 3, 4], [0.2, 0.2, 0.6]),
        "max_positions": s.choice([seq, 512, 1024]) if seq <= 512 else seq,
        "fused_qkv": s.coin(0.5),
        "activation": s.choice(["gelu", "relu"], [0.8, 0.2]),
    }
    if causal:
        hp["head"] = s.choice(["hidden", "lm"], [0.4, 0.6])
        hp["tied_head"] = s.coin(0.5)
    else:
        hp["head"] = s.choice(["hidden", "pooler", "lm"], [0.4, 0.3, 0.3])
    return hp


def _sample_bert(s: _Sampler, u: float) -> dict[str, Any]:
    return _sample_text(s, u, causal=False)


def _sample_gpt(s: _Sampler, u: float) -> dict[str, Any]:
    return _sample_text(s, u, causal=True)


def _build_bert(hp: dict[str, Any]) -> nn.Module:
    return _TextTransformer(hp, causal=False)


def _build_gpt(hp: dict[str, Any]) -> nn.Module:
    return _TextTransformer(hp, causal=True)


# --------------------------------------------------------------------------------------------
# Family: mixer (MLP-Mixer)
# --------------------------------------------------------------------------------------------


class _MixerLayer(nn.Module):
    def __init__(self, tokens: int, dim: int, token_hidden: int, channel_hidden: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.token_mlp = _Mlp(tokens, token_hidden)
        self.ln2 = nn.LayerNorm(dim)
        self.channel_mlp = _Mlp(dim, channel_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.ln2(x))


class _Mixer(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        p, d = hp["patch"], hp["dim"]
        self.b, self.d = hp["batch"], d
        self.tokens = (hp["resolution"] // p) ** 2
        self.embed = nn.Conv2d(3, d, p, p)
        self.layers = nn.Sequential(
            *[
                _MixerLayer(self.tokens, d, hp["token_hidden"], hp["channel_hidden"])
                for _ in range(hp["depth"])
            ]
        )
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, hp["classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).reshape(self.b, self.d, self.tokens).transpose(1, 2)
        return self.fc(self.ln(self.layers(x)).mean(dim=1))


def _sample_mixer(s: _Sampler, u: float) -> dict[str, Any]:
    patch = s.choice([4, 8, 16], [0.35, 0.4, 0.25])
    grid = s.knob(u, 2, 14)
    dim = s.knob(u, 16, 512, 16)
    tokens = grid * grid
    return {
        "batch": _batch(s),
        "resolution": grid * patch,
        "patch": patch,
        "dim": dim,
        "token_hidden": max(8, _div(tokens * s.choice([0.5, 1, 2, 4]))),
        "channel_hidden": dim * s.choice([1, 2, 4], [0.2, 0.3, 0.5]),
        "depth": s.knob(u, 1, 8, jitter=0.4),
        "classes": _classes(s),
    }


def _build_mixer(hp: dict[str, Any]) -> nn.Module:
    return _Mixer(hp)


# --------------------------------------------------------------------------------------------
# Family: nb201 (NAS-Bench-201 cell search space)
# --------------------------------------------------------------------------------------------

_NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
# edge (to, from) order of the NAS-Bench-201 arch string
_NB201_EDGES = ((1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2))


def _nb201_live_edges(ops: Sequence[str]) -> list[tuple[int, int, str]]:
    """Edges that carry a non-zero value (skips 'none' and edges out of all-zero nodes)."""
    live_nodes = {0}
    edges = []
    for (to, frm), op in zip(_NB201_EDGES, ops, strict=True):
        if op != "none" and frm in live_nodes:
            edges.append((to, frm, op))
            live_nodes.add(to)
    return edges


class _NB201Cell(nn.Module):
    def __init__(self, c: int, ops: Sequence[str]) -> None:
        super().__init__()
        self.edges = _nb201_live_edges(ops)
        mods: list[nn.Module] = []
        for _, _, op in self.edges:
            if op == "skip_connect":
                mods.append(nn.Identity())
            elif op == "avg_pool_3x3":
                mods.append(nn.AvgPool2d(3, 1, 1, count_include_pad=False))
            else:
                k = 1 if op == "nor_conv_1x1" else 3
                mods.append(
                    nn.Sequential(
                        nn.ReLU(),
                        nn.Conv2d(c, c, k, padding=k // 2, bias=False),
                        nn.BatchNorm2d(c),
                    )
                )
        self.ops = nn.ModuleList(mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes: dict[int, torch.Tensor] = {0: x}
        for (to, frm, _), op in zip(self.edges, self.ops, strict=True):
            y = op(nodes[frm])
            nodes[to] = y if to not in nodes else nodes[to] + y
        return nodes[3]


def _sample_nb201(s: _Sampler, u: float) -> dict[str, Any]:
    while True:
        ops = [s.choice(_NB201_OPS) for _ in _NB201_EDGES]
        if any(to == 3 for to, _, _ in _nb201_live_edges(ops)):
            break
    arch = (
        "|"
        + "|+|".join(
            "|".join(f"{ops[i]}~{frm}" for i, (to, frm) in enumerate(_NB201_EDGES) if to == node)
            for node in (1, 2, 3)
        )
        + "|"
    )
    return {
        "batch": _batch(s),
        "resolution": s.knob_choice(u, [16, 32, 64]),
        "channels": s.knob_choice(u, [4, 8, 16, 24, 32, 48]),
        "cells_per_stage": s.knob(u, 1, 5, jitter=0.4),
        "ops": ops,
        "arch": arch,
        "classes": s.choice([10, 100, 120]),
    }


def _build_nb201(hp: dict[str, Any]) -> nn.Module:
    c = hp["channels"]
    layers: list[nn.Module] = [nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)]
    for stage in range(3):
        if stage > 0:  # ResNet basic block with stride 2 as the reduction cell
            body = nn.Sequential(
                nn.ReLU(),
                nn.Conv2d(c, 2 * c, 3, 2, 1, bias=False),
                nn.BatchNorm2d(2 * c),
                nn.ReLU(),
                nn.Conv2d(2 * c, 2 * c, 3, 1, 1, bias=False),
                nn.BatchNorm2d(2 * c),
            )
            short = nn.Sequential(nn.AvgPool2d(2, 2), nn.Conv2d(c, 2 * c, 1, bias=False))
            layers.append(_Residual(body, short))
            c *= 2
        for _ in range(hp["cells_per_stage"]):
            layers.append(_NB201Cell(c, hp["ops"]))
    layers += [nn.BatchNorm2d(c), nn.ReLU(), _head(c, hp["classes"])]
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Real architectures (transformers configs, random weights)
# --------------------------------------------------------------------------------------------

# (batch, resolution or sequence length) options per architecture, sized so one inference
# stays measurable on a 2-core CPU: at most ~12 GFLOP (BERT/GPT-2 at 128 tokens would be 22).
_HF_OPTIONS: dict[str, tuple[tuple[int, int], ...]] = {
    "hf-resnet18": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 64), (2, 96), (2, 128)),
    "hf-resnet50": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 64), (2, 96)),
    "hf-mobilenetv2": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 96), (2, 128), (2, 160)),
    "hf-efficientnet-b0": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 96), (2, 128)),
    "hf-convnext-tiny": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 64), (2, 96)),
    "hf-vit-b16": ((1, 64), (1, 96), (1, 128), (2, 64)),
    "hf-bert-base": ((1, 16), (1, 32), (1, 64), (2, 16), (2, 32)),
    "hf-gpt2": ((1, 16), (1, 32), (1, 64), (2, 16), (2, 32)),
    "hf-roberta-base": ((1, 16), (1, 32), (1, 64), (2, 16), (2, 32)),
}
_HF_TEXT = frozenset({"hf-bert-base", "hf-gpt2", "hf-roberta-base"})
_HF_VOCAB = {"hf-bert-base": 30522, "hf-gpt2": 50257, "hf-roberta-base": 50265}
#: Vocabulary of the tiny text variants (:func:`tiny_spec`).
_TINY_VOCAB = 128


class _HFWrapper(nn.Module):
    """Exposes a single positional input and returns one tensor (the exporter needs both).

    ``mask`` is passed as a constant ``attention_mask``: for GPT-2 a prepared 4-D additive
    causal mask, because transformers' own mask construction exports to constant subgraphs
    (ConstantOfShape/Expand, or ``torch.diff`` without a mask) that TVM cannot import.
    """

    def __init__(
        self,
        model: nn.Module,
        input_name: str,
        output: str,
        mask: torch.Tensor | None = None,
        **extra: Any,
    ) -> None:
        super().__init__()
        self.model = model
        self.input_name = input_name
        self.output = output
        self.extra = extra
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kwargs = {self.input_name: x, "return_dict": True, **self.extra}
        if self.mask is not None:
            kwargs["attention_mask"] = self.mask
        return getattr(self.model(**kwargs), self.output)


def _build_hf(name: str, hp: dict[str, Any]) -> nn.Module:
    """The architecture at its published size, or at a tiny one (``hp["tiny"]``: the same
    layer types with few, narrow layers, so tests can lower every architecture quickly)."""
    import transformers as tf

    res = int(hp.get("resolution", 0))
    tiny = bool(hp.get("tiny", False))
    eager = {"attn_implementation": "eager"}
    # width stages and depths of the convolutional networks; layers/width/heads/MLP of ViTs
    # and text transformers
    conv_widths = [8, 16, 32, 64] if tiny else None
    conv_depths = [1, 1, 1, 1] if tiny else None
    layers, width, heads, mlp = (1, 32, 2, 64) if tiny else (12, 768, 12, 3072)
    if name == "hf-resnet18":
        cfg: Any = tf.ResNetConfig(
            embedding_size=8 if tiny else 64,
            hidden_sizes=conv_widths or [64, 128, 256, 512],
            depths=conv_depths or [2, 2, 2, 2],
            layer_type="basic",
            num_labels=10 if tiny else 1000,
        )
        return _HFWrapper(tf.ResNetForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-resnet50":
        cfg = tf.ResNetConfig(
            embedding_size=8 if tiny else 64,
            hidden_sizes=[4 * w for w in conv_widths] if conv_widths else [256, 512, 1024, 2048],
            depths=conv_depths or [3, 4, 6, 3],
            layer_type="bottleneck",
            num_labels=10 if tiny else 1000,
        )
        return _HFWrapper(tf.ResNetForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-mobilenetv2":
        cfg = tf.MobileNetV2Config(depth_multiplier=0.35 if tiny else 1.0, image_size=res,
                                   num_labels=10 if tiny else 1001)
        return _HFWrapper(tf.MobileNetV2ForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-efficientnet-b0":
        cfg = tf.EfficientNetConfig(
            width_coefficient=0.25 if tiny else 1.0,
            depth_coefficient=0.25 if tiny else 1.0,
            hidden_dim=320 if tiny else 1280,  # the top conv: round_filters(1280 × width)
            image_size=res,
            dropout_rate=0.2,
            num_labels=10 if tiny else 1000,
        )
        effnet = tf.EfficientNetForImageClassification(cfg)
        # HF pools with AvgPool2d(kernel=1280, ceil_mode=True), whose ONNX export runtimes
        # disagree on (divisor 1280² vs window); a global average pool is what it computes.
        effnet.efficientnet.pooler = nn.AdaptiveAvgPool2d(1)
        return _HFWrapper(effnet, "pixel_values", "logits")
    if name == "hf-convnext-tiny":
        cfg = tf.ConvNextConfig(
            hidden_sizes=conv_widths or [96, 192, 384, 768],
            depths=conv_depths or [3, 3, 9, 3],
            num_labels=10 if tiny else 1000,
        )
        return _HFWrapper(tf.ConvNextForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-vit-b16":
        cfg = tf.ViTConfig(
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=mlp,
            patch_size=16,
            image_size=res,
            num_labels=10 if tiny else 1000,
            **eager,
        )
        return _HFWrapper(tf.ViTForImageClassification(cfg), "pixel_values", "logits")
    vocab = int(hp.get("vocab", _HF_VOCAB.get(name, 0)))
    if name in ("hf-bert-base", "hf-roberta-base"):
        # RoBERTa differs in its embeddings: position ids are a cumsum over the non-padding
        # tokens (a scan kernel), counted from padding_idx + 1
        roberta = name == "hf-roberta-base"
        config_class = tf.RobertaConfig if roberta else tf.BertConfig
        cfg = config_class(
            vocab_size=vocab,
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=mlp,
            max_position_embeddings=514 if roberta else 512,
            **({"pad_token_id": 1, "type_vocab_size": 1} if roberta else {}),
            **eager,
        )
        model_class = tf.RobertaModel if roberta else tf.BertModel
        return _HFWrapper(model_class(cfg, add_pooling_layer=False), "input_ids",
                          "last_hidden_state")
    if name == "hf-gpt2":
        cfg = tf.GPT2Config(
            vocab_size=vocab,
            n_positions=1024,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            use_cache=False,
            **({"bos_token_id": 0, "eos_token_id": 0} if tiny else {}),
            **eager,
        )
        b, n = int(hp["batch"]), int(hp["seq_len"])
        # 0 on and below the diagonal, dtype-min above: what transformers' eager mask holds
        causal = torch.full((b, 1, n, n), torch.finfo(torch.float32).min).triu(1)
        return _HFWrapper(
            tf.GPT2Model(cfg), "input_ids", "last_hidden_state", mask=causal, use_cache=False
        )
    raise _unknown(name)


def _sample_hf(name: str, s: _Sampler) -> dict[str, Any]:
    batch, size = s.choice(_HF_OPTIONS[name])
    key = "seq_len" if name in _HF_TEXT else "resolution"
    hp: dict[str, Any] = {"batch": batch, key: size}
    if name in _HF_TEXT:
        hp["vocab"] = _HF_VOCAB[name]
    return hp


# --------------------------------------------------------------------------------------------
# Registry and public API
# --------------------------------------------------------------------------------------------

_Sample = Callable[[_Sampler, float], dict[str, Any]]
_Build = Callable[[dict[str, Any]], nn.Module]
_GENERATED: dict[str, tuple[_Sample, _Build]] = {
    "vgg": (_sample_vgg, _build_vgg),
    "resnet": (_sample_resnet, _build_resnet),
    "mobilenet": (_sample_mobilenet, _build_mobilenet),
    "efficientnet": (_sample_efficientnet, _build_efficientnet),
    "densenet": (_sample_densenet, _build_densenet),
    "inception": (_sample_inception, _build_inception),
    "squeezenet": (_sample_squeezenet, _build_squeezenet),
    "regnet": (_sample_regnet, _build_regnet),
    "convnext": (_sample_convnext, _build_convnext),
    "vit": (_sample_vit, _build_vit),
    "bert": (_sample_bert, _build_bert),
    "gpt": (_sample_gpt, _build_gpt),
    "mixer": (_sample_mixer, _build_mixer),
    "nb201": (_sample_nb201, _build_nb201),
}
_TOKEN_FAMILIES = frozenset({"bert", "gpt"}) | _HF_TEXT

FAMILIES: tuple[str, ...] = tuple(_GENERATED)
REAL_ARCHITECTURES: tuple[str, ...] = tuple(_HF_OPTIONS)


def _unknown(family: str) -> ModelLoadError:
    known = ", ".join(FAMILIES + REAL_ARCHITECTURES)
    return ModelLoadError(f"unknown model family '{family}'; known: {known}")


def _inputs_for(family: str, hp: dict[str, Any]) -> InputSpec:
    if family in _TOKEN_FAMILIES:
        return {"input_ids": ((int(hp["batch"]), int(hp["seq_len"])), "int64")}
    r = int(hp["resolution"])
    return {"x": ((int(hp["batch"]), 3, r, r), "float32")}


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
    if family not in _GENERATED and family not in _HF_OPTIONS:
        raise _unknown(family)
    s = _Sampler(np.random.default_rng(_stable_int("gnnperf.zoo", family, int(seed))))
    if family in _HF_OPTIONS:
        hp = _jsonable(_sample_hf(family, s))
    else:
        sampler = _GENERATED[family][0]
        best: tuple[float, dict[str, Any]] | None = None
        u = 0.0
        for attempt in range(64):
            if attempt % 8 == 0:  # a quantile the family cannot reach is re-drawn too
                u = round(s.uniform(0.0, 1.0), 4)
            lo, hi = _SIZE_WARP[family]
            cand = _jsonable({**sampler(s, lo + u * (hi - lo)), "size_quantile": u})
            dist = _distance_to_window(_count_flops(family, cand))
            if best is None or dist < best[0]:
                best = (dist, cand)
            if dist == 0.0:
                break
        assert best is not None
        hp = best[1]
    return ModelSpec(family=family, seed=int(seed), hparams=hp, inputs=_inputs_for(family, hp))


def tiny_spec(family: str) -> ModelSpec:
    """The smallest model of ``family`` that still has all of its layer types.

    For checks that every architecture of the zoo lowers, gets a graph and a prediction
    (in the test suite, on 2 cores): a generated family's smallest of its first eight
    seeds; a real architecture at batch 1 with few, narrow layers (``hparams["tiny"]``),
    a 32-pixel image or 8 tokens of a 128-word vocabulary. Its ``model_id`` ends in
    ``tiny``, so it never passes for a measured zoo model.
    """
    if family in _GENERATED:
        seed = min(range(8), key=lambda s: estimate_flops(sample_spec(family, s)))
        spec = sample_spec(family, seed)
        return ModelSpec(family, spec.seed, {**spec.hparams, "tiny": True}, spec.inputs)
    if family not in _HF_OPTIONS:
        raise _unknown(family)
    hp: dict[str, Any] = {"batch": 1, "tiny": True}
    if family in _HF_TEXT:
        hp.update(seq_len=8, vocab=_TINY_VOCAB)
    else:
        hp["resolution"] = 32
    return ModelSpec(family, 0, hp, _inputs_for(family, hp))


def _construct(family: str, hp: dict[str, Any]) -> nn.Module:
    if family in _GENERATED:
        return _GENERATED[family][1](hp)
    if family in _HF_OPTIONS:
        return _build_hf(family, hp)
    raise _unknown(family)


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
        torch.manual_seed(_stable_int("gnnperf.zoo.weights", spec.family, spec.seed))
        model = _construct(spec.family, spec.hparams)
        if spec.family in _GENERATED:
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


_DTYPES = {"float32": torch.float32, "int64": torch.int64}


def _make_inputs(
    spec_inputs: InputSpec, hp: dict[str, Any], gen: torch.Generator | None, device: str
) -> tuple[torch.Tensor, ...]:
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
    gen = torch.Generator().manual_seed(_stable_int("gnnperf.zoo.inputs", spec.family, spec.seed))
    return _make_inputs(spec.inputs, spec.hparams, gen, "cpu")


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
            model = _construct(family, hp).eval()
        gen = None if device == "meta" else torch.Generator().manual_seed(0)
        args = _make_inputs(_inputs_for(family, hp), hp, gen, device)
        counter = _FlopCounter()
        with torch.no_grad(), counter:
            model(*args)
    return counter.flops


def _count_flops(family: str, hp: dict[str, Any]) -> int:
    """FLOPs of one forward pass on the meta device: no weights are materialised, so this
    costs milliseconds even for BERT-base."""
    return _count_flops_cached(family, json.dumps(hp, sort_keys=True))


def estimate_flops(spec: ModelSpec) -> int:
    """FLOPs (multiply-adds x 2 of Conv/Linear/MatMul) of one inference of ``spec``."""
    return _count_flops(spec.family, spec.hparams)


def export_onnx(spec: ModelSpec, path: str | Path | None = None) -> onnx.ModelProto:
    """Export ``spec`` to ONNX (opset 17, TorchScript exporter, static shapes, folded constants).

    The TorchScript exporter is used because its graphs are what TVM's Relax frontend imports
    best.  If ``path`` is given the file is written atomically (temp file + ``os.replace``) so a
    crashed worker never leaves a truncated model behind.
    """
    model = build_model(spec)
    args = example_inputs(spec)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", UserWarning)
        with torch.no_grad():
            torch.onnx.export(
                model,
                args,
                buf,
                dynamo=False,
                opset_version=ONNX_OPSET,
                input_names=list(spec.inputs),
                output_names=["output"],
                do_constant_folding=True,
            )
    proto = onnx.load_from_string(buf.getvalue())
    if path is not None:
        write_bytes(path, proto.SerializeToString())
    return proto


def onnx_sha256(model: onnx.ModelProto) -> str:
    """SHA-256 of the deterministic serialisation: the identity of a measured graph."""
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()
