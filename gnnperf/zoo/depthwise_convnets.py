"""Generated convolutional families built around depthwise convolutions:
mobilenet, efficientnet and convnext."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from gnnperf.zoo.layers import Mlp, SqueezeExcite, activation, classifier_head, conv_bn
from gnnperf.zoo.spec import Sampler, make_divisible, sample_batch, sample_classes


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
            layers.append(conv_bn(cin, exp, 1, act=act))
        layers.append(conv_bn(exp, exp, k, stride, groups=exp, act=act))
        if se > 0:
            layers.append(SqueezeExcite(exp, se, se_act, gate))
        layers.append(conv_bn(exp, cout, 1, act="identity"))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


# --------------------------------------------------------------------------------------------
# Family: mobilenet (V2/V3-style inverted residuals)
# --------------------------------------------------------------------------------------------


def _sample_mobile_blocks(
    s: Sampler, u: float, res: int, wm: float, v3: bool, stem: int
) -> list[list[Any]]:
    """Blocks as [kernel, expanded, out, stride, se_channels, act]."""
    blocks: list[list[Any]] = []
    n_stages = s.knob(u, 2, 6, jitter=0.4)
    max_down = max(1, int(math.log2(res)) - 3)  # the stem already halves; keep >= 4 px
    downs = sorted(s.rng.choice(n_stages, size=min(n_stages, max_down), replace=False).tolist())
    cin, base = stem, 16.0
    for i in range(n_stages):
        base *= s.choice([1.0, 1.5, 2.0], [0.2, 0.5, 0.3]) if i else 1.0
        cout = make_divisible(base * wm)
        exp_ratio = s.choice([1, 3, 4, 6] if not v3 else [2.5, 3, 4, 6], [0.1, 0.3, 0.2, 0.4])
        k = s.choice([3, 5], [0.7, 0.3]) if v3 else 3
        se = v3 and s.coin(0.5)
        act = s.choice(["relu", "hardswish"]) if v3 else "relu6"
        for j in range(s.knob(u, 1, 4, jitter=0.5)):
            exp = make_divisible(cin * (1 if i == 0 and not v3 else exp_ratio))
            stride = 2 if (j == 0 and i in downs) else 1
            se_ch = make_divisible(exp / 4) if se else 0
            blocks.append([k, exp, cout, stride, se_ch, act])
            cin = cout
    return blocks


def sample_mobilenet(s: Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 224, 16)
    v3 = s.coin(0.5)
    wm = s.knob_choice(u, [0.25, 0.35, 0.5, 0.75, 1.0, 1.4])
    stem = make_divisible(16 * wm)
    blocks = _sample_mobile_blocks(s, u, res, wm, v3, stem)
    last = blocks[-1][2]
    return {
        "batch": sample_batch(s),
        "resolution": res,
        "style": "v3" if v3 else "v2",
        "width_mult": wm,
        "stem_width": stem,
        "stem_act": "hardswish" if v3 else "relu6",
        "blocks": blocks,
        "last_width": make_divisible(max(last * 6, s.choice([576, 960, 1280]) * wm)),
        "head_hidden": s.choice([0, 1024, 1280]) if v3 else 0,
        "classes": sample_classes(s),
    }


def build_mobilenet(hp: dict[str, Any]) -> nn.Module:
    v3 = hp["style"] == "v3"
    layers: list[nn.Module] = [conv_bn(3, hp["stem_width"], 3, 2, act=hp["stem_act"])]
    cin = hp["stem_width"]
    for k, exp, cout, stride, se, act in hp["blocks"]:
        gate = "hardsigmoid" if v3 else "sigmoid"
        layers.append(_InvertedResidual(cin, cout, k, stride, exp, se, act, "relu", gate))
        cin = cout
    act = hp["stem_act"]
    layers.append(conv_bn(cin, hp["last_width"], 1, act=act))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    cin = hp["last_width"]
    if hp["head_hidden"]:
        layers += [nn.Linear(cin, hp["head_hidden"]), activation(act)]
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


def sample_efficientnet(s: Sampler, u: float) -> dict[str, Any]:
    phi = round(-16.0 + 16.5 * s.jittered(u, 0.2), 3)
    width = 1.1**phi
    depth = 1.2**phi
    res = max(16, int(16 * round(224 * 1.15**phi / 16)))
    n_stages = s.knob_choice(u, [4, 5, 6, 7], jitter=0.5)
    stem = make_divisible(32 * width)
    blocks: list[list[Any]] = []
    cin = stem
    for e, k, st, c, r in _EFFNET_B0[:n_stages]:
        cout = make_divisible(c * width)
        for j in range(max(1, math.ceil(r * depth))):
            exp = cin * e
            se = max(1, int(cin * 0.25))
            blocks.append([k, exp, cout, st if j == 0 else 1, se, "silu"])
            cin = cout
    return {
        "batch": sample_batch(s),
        "resolution": res,
        "phi": phi,
        "width_mult": round(width, 4),
        "depth_mult": round(depth, 4),
        "stages": n_stages,
        "stem_width": stem,
        "blocks": blocks,
        "head_width": make_divisible(1280 * width),
        "classes": sample_classes(s),
    }


def build_efficientnet(hp: dict[str, Any]) -> nn.Module:
    layers: list[nn.Module] = [conv_bn(3, hp["stem_width"], 3, 2, act="silu")]
    cin = hp["stem_width"]
    for k, exp, cout, stride, se, act in hp["blocks"]:
        layers.append(_InvertedResidual(cin, cout, k, stride, exp, se, act, "silu", "sigmoid"))
        cin = cout
    layers.append(conv_bn(cin, hp["head_width"], 1, act="silu"))
    layers.append(classifier_head(hp["head_width"], hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: convnext
# --------------------------------------------------------------------------------------------


class _LayerNorm2d(nn.Module):
    """LayerNorm over the channel axis of an NCHW tensor (ConvNeXt style)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(c, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, k: int, ratio: int, layer_scale: bool) -> None:
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, k, padding=k // 2, groups=dim)
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, ratio * dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6)) if layer_scale else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.mlp(self.ln(self.dw(x).permute(0, 2, 3, 1)))
        if self.gamma is not None:
            y = y * self.gamma
        return x + y.permute(0, 3, 1, 2)


def sample_convnext(s: Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 128, 8)
    patch = s.choice([2, 4], [0.3, 0.7])
    n_stages = s.randint(2, min(4, int(math.log2(res // patch)) + 1))
    d0 = s.knob(u, 8, 96, 8)
    depths = [s.choice([1, 2, 3], [0.4, 0.4, 0.2]) for _ in range(n_stages)]
    if n_stages >= 3 and s.coin(0.5):
        depths[-2] = s.randint(3, 6)  # ConvNeXt puts most blocks in its third stage
    return {
        "batch": sample_batch(s),
        "resolution": res,
        "stem_patch": patch,
        "stage_dims": [d0 * 2**i for i in range(n_stages)],
        "stage_depths": depths,
        "kernel": s.choice([3, 5, 7], [0.2, 0.2, 0.6]),
        "mlp_ratio": s.choice([2, 3, 4], [0.2, 0.2, 0.6]),
        "layer_scale": s.coin(0.5),
        "classes": sample_classes(s),
    }


class _ConvNeXtHead(nn.Module):
    def __init__(self, dim: int, classes: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.ln(x.mean(dim=(2, 3))))


def build_convnext(hp: dict[str, Any]) -> nn.Module:
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
