"""Generated convolutional families built from dense (non-depthwise) convolutions:
vgg, resnet, densenet, inception, squeezenet and regnet."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from gnnperf.zoo.layers import Residual, SqueezeExcite, classifier_head, conv_bn
from gnnperf.zoo.spec import Sampler, make_divisible, sample_batch, sample_classes

# --------------------------------------------------------------------------------------------
# Family: vgg
# --------------------------------------------------------------------------------------------


def sample_vgg(s: Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 128, 8)
    n_stages = s.randint(2, min(5, int(math.log2(res)) - 1))
    c0 = s.knob(u, 4, 48, 4)
    cmax = s.choice([128, 256, 512])
    return {
        "batch": sample_batch(s),
        "resolution": res,
        "stage_widths": [min(cmax, c0 * 2**i) for i in range(n_stages)],
        "stage_convs": [s.choice([1, 2, 3], [0.4, 0.4, 0.2]) for _ in range(n_stages)],
        "stage_kernels": [s.choice([3, 5, 1], [0.75, 0.15, 0.1]) for _ in range(n_stages)],
        "batch_norm": s.coin(0.6),
        "pool": s.choice(["max", "avg"], [0.8, 0.2]),
        "head": s.choice(["gap", "fc"]),
        "fc_hidden": s.logint(32, 512, 8),
        "classes": sample_classes(s),
    }


def build_vgg(hp: dict[str, Any]) -> nn.Module:
    layers: list[nn.Module] = []
    cin, size = 3, hp["resolution"]
    for width, convs, k in zip(
        hp["stage_widths"], hp["stage_convs"], hp["stage_kernels"], strict=True
    ):
        for _ in range(convs):
            layers.append(conv_bn(cin, width, k, bn=hp["batch_norm"]))
            cin = width
        layers.append(nn.MaxPool2d(2) if hp["pool"] == "max" else nn.AvgPool2d(2))
        size //= 2
    if hp["head"] == "gap":
        layers.append(classifier_head(cin, hp["classes"]))
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


def sample_resnet(s: Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 160, 8)
    block = s.choice(["basic", "bottleneck"])
    n_stages = s.randint(2, 4)
    base = s.knob(u, 4, 64, 4)
    groups = s.choice([1, 2, 4, 8], [0.55, 0.15, 0.15, 0.15]) if block == "bottleneck" else 1
    expansion = s.choice([2, 4], [0.3, 0.7]) if block == "bottleneck" else 1
    # bottleneck mid width must be a multiple of the group count
    mids = [max(groups, base * 2**i // groups * groups) for i in range(n_stages)]
    return {
        "batch": sample_batch(s),
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
        "classes": sample_classes(s),
    }


def build_resnet(hp: dict[str, Any]) -> nn.Module:
    stem_stride = hp["stem_stride"]
    layers: list[nn.Module] = [conv_bn(3, hp["stem_width"], hp["stem_kernel"], stem_stride)]
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
                    conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, act="identity")
                )
            else:
                body = nn.Sequential(
                    conv_bn(cin, mid, 1),
                    conv_bn(mid, mid, 3, stride, groups=hp["groups"]),
                    conv_bn(mid, cout, 1, act="identity"),
                )
            short = None
            if stride != 1 or cin != cout:
                short = conv_bn(cin, cout, 1, stride, act="identity")
            layers.append(Residual(body, short, "relu"))
            cin = cout
    layers.append(classifier_head(cin, hp["classes"]))
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


def sample_densenet(s: Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 128, 8)
    growth = s.knob_choice(u, [4, 8, 12, 16, 24, 32])
    max_layers = s.knob(u, 2, 8)
    stem = s.choice(["cifar", "imagenet"]) if res >= 48 else "cifar"
    n_blocks = s.randint(2, 4 if res >= 32 else 3)
    return {
        "batch": sample_batch(s),
        "resolution": res,
        "growth": growth,
        "stem": stem,
        "stem_width": 2 * growth,
        "block_layers": [s.randint(1, max_layers) for _ in range(n_blocks)],
        "bottleneck": s.coin(0.6),
        "compression": s.choice([0.5, 1.0], [0.7, 0.3]),
        "classes": sample_classes(s),
    }


def build_densenet(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    if hp["stem"] == "cifar":
        layers: list[nn.Module] = [nn.Conv2d(3, c, 3, padding=1, bias=False)]
    else:
        layers = [conv_bn(3, c, 7, 2), nn.MaxPool2d(3, 2, 1)]
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
    layers += [nn.BatchNorm2d(c), nn.ReLU(), classifier_head(c, hp["classes"])]
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: inception
# --------------------------------------------------------------------------------------------


class _InceptionModule(nn.Module):
    def __init__(self, cin: int, m: dict[str, Any]) -> None:
        super().__init__()
        branches: list[nn.Module] = []
        if m["b1"]:
            branches.append(conv_bn(cin, m["b1"], 1))
        branches.append(nn.Sequential(conv_bn(cin, m["b3r"], 1), conv_bn(m["b3r"], m["b3"], 3)))
        if m["b5"]:
            if m["factorized"]:
                b5: nn.Module = nn.Sequential(
                    conv_bn(cin, m["b5r"], 1),
                    conv_bn(m["b5r"], m["b5"], 3),
                    conv_bn(m["b5"], m["b5"], 3),
                )
            else:
                b5 = nn.Sequential(conv_bn(cin, m["b5r"], 1), conv_bn(m["b5r"], m["b5"], 5))
            branches.append(b5)
        pool = nn.MaxPool2d(3, 1, 1) if m["pool"] == "max" else nn.AvgPool2d(3, 1, 1)
        branches.append(nn.Sequential(pool, conv_bn(cin, m["pool_proj"], 1)))
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


def _inception_out(m: dict[str, Any]) -> int:
    return int(m["b1"] + m["b3"] + m["b5"] + m["pool_proj"])


def sample_inception(s: Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 160, 8)
    n_groups = s.knob(u, 1, 3, jitter=0.5)
    base = s.knob(u, 4, 64, 4)
    groups: list[list[dict[str, Any]]] = []
    for g in range(n_groups):
        w = base * 2**g
        mods = []
        for _ in range(s.knob(u, 1, 3, jitter=0.5)):
            b3 = make_divisible(w * s.uniform(0.8, 2.0), 4, 4)
            b5 = make_divisible(w * s.uniform(0.25, 1.0), 4, 4) if s.coin(0.75) else 0
            mods.append(
                {
                    "b1": make_divisible(w * s.uniform(0.5, 1.5), 4, 4) if s.coin(0.85) else 0,
                    "b3r": make_divisible(b3 * s.uniform(0.4, 1.0), 4, 4),
                    "b3": b3,
                    "b5r": make_divisible(max(b5, 4) * s.uniform(0.25, 1.0), 4, 4),
                    "b5": b5,
                    "factorized": s.coin(0.5),
                    "pool": s.choice(["max", "avg"]),
                    "pool_proj": make_divisible(w * s.uniform(0.25, 1.0), 4, 4),
                }
            )
        groups.append(mods)
    return {
        "batch": sample_batch(s),
        "resolution": res,
        "stem_width": s.knob(u, 4, 64, 4),
        "stem_stride": s.choice([1, 2]),
        "stem_pool": res >= 64 and s.coin(0.5),
        "groups": groups,
        "classes": sample_classes(s),
    }


def build_inception(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    layers: list[nn.Module] = [conv_bn(3, c, 3, hp["stem_stride"])]
    if hp["stem_pool"]:
        layers.append(nn.MaxPool2d(3, 2, 1))
    for g, mods in enumerate(hp["groups"]):
        if g > 0:
            layers.append(nn.MaxPool2d(3, 2, 1))
        for m in mods:
            layers.append(_InceptionModule(c, m))
            c = _inception_out(m)
    layers.append(classifier_head(c, hp["classes"]))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# Family: squeezenet
# --------------------------------------------------------------------------------------------


class _Fire(nn.Module):
    def __init__(self, cin: int, sq: int, e1: int, e3: int, bypass: bool) -> None:
        super().__init__()
        self.squeeze = conv_bn(cin, sq, 1, bn=False)
        self.e1 = conv_bn(sq, e1, 1, bn=False)
        self.e3 = conv_bn(sq, e3, 3, bn=False)
        self.bypass = bypass and cin == e1 + e3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        y = torch.cat([self.e1(s), self.e3(s)], 1)
        return x + y if self.bypass else y


def sample_squeezenet(s: Sampler, u: float) -> dict[str, Any]:
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
        "batch": sample_batch(s),
        "resolution": res,
        "stem_width": s.knob(u, 8, 96, 8),
        "stem_kernel": s.choice([3, 7]),
        "fires": fires,
        "pool_after": pool_after,
        "bypass": s.coin(0.5),
        "classes": sample_classes(s),
    }


def build_squeezenet(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    layers: list[nn.Module] = [
        conv_bn(3, c, hp["stem_kernel"], 2, bn=False),
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


def sample_regnet(s: Sampler, u: float) -> dict[str, Any]:
    res = s.knob(u, 16, 160, 8)
    depth = s.randint(2, s.knob(u, 4, 16))
    w0 = s.knob(u, 8, 64, 8)
    wa = round(s.loguniform(4.0, 48.0), 2)
    wm = round(s.uniform(1.5, 3.0), 3)
    g = s.choice([1, 2, 4, 8, 16, 24])
    # quantized linear width parameterisation: u_j = w0 + wa*j, snapped to w0 * wm^k
    u = [w0 + wa * j for j in range(depth)]
    ks = [round(math.log(uj / w0) / math.log(wm)) for uj in u]
    widths = [make_divisible(w0 * wm**k) for k in ks]
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
        "batch": sample_batch(s),
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
        "classes": sample_classes(s),
    }


def build_regnet(hp: dict[str, Any]) -> nn.Module:
    c = hp["stem_width"]
    layers: list[nn.Module] = [conv_bn(3, c, 3, 2)]
    stages = zip(hp["stage_widths"], hp["stage_depths"], hp["stage_groups"], strict=True)
    for w, d, groups in stages:
        for j in range(d):
            stride = 2 if j == 0 else 1
            body: list[nn.Module] = [conv_bn(c, w, 1), conv_bn(w, w, 3, stride, groups=groups)]
            if hp["se"]:
                body.append(SqueezeExcite(w, max(1, int(c * 0.25))))
            body.append(conv_bn(w, w, 1, act="identity"))
            short = conv_bn(c, w, 1, stride, act="identity") if stride != 1 or c != w else None
            layers.append(Residual(nn.Sequential(*body), short, "relu"))
            c = w
    layers.append(classifier_head(c, hp["classes"]))
    return nn.Sequential(*layers)
