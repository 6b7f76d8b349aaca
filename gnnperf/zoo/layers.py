"""Torch building blocks shared by several generated families."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def activation(name: str) -> nn.Module:
    """A fresh activation module from the name a sampler recorded."""
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


def conv_bn(
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    groups: int = 1,
    act: str = "relu",
    bn: bool = True,
) -> nn.Sequential:
    """Conv with same padding, optional BatchNorm, activation: the unit of the CNN families."""
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=not bn)]
    if bn:
        layers.append(nn.BatchNorm2d(cout))
    if act != "identity":
        layers.append(activation(act))
    return nn.Sequential(*layers)


def classifier_head(cin: int, classes: int) -> nn.Sequential:
    """Global average pool and a linear classifier."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


class Residual(nn.Module):
    """``act(body(x) + shortcut(x))``; shortcut None means identity."""

    def __init__(
        self, body: nn.Module, shortcut: nn.Module | None = None, act: str = "identity"
    ) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut
        self.act = activation(act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x if self.shortcut is None else self.shortcut(x)
        return self.act(self.body(x) + s)


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, rd: int, act: str = "relu", gate: str = "sigmoid") -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, rd, 1)
        self.act = activation(act)
        self.fc2 = nn.Conv2d(rd, c, 1)
        self.gate = activation(gate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class Mlp(nn.Sequential):
    def __init__(self, dim: int, hidden: int, out: int | None = None, act: str = "gelu") -> None:
        super().__init__(nn.Linear(dim, hidden), activation(act), nn.Linear(hidden, out or dim))
