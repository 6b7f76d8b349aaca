"""Generated family nb201: networks of the NAS-Bench-201 cell search space."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from gnnperf.zoo.layers import Residual, classifier_head
from gnnperf.zoo.spec import Sampler, sample_batch

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


def sample_nb201(s: Sampler, u: float) -> dict[str, Any]:
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
        "batch": sample_batch(s),
        "resolution": s.knob_choice(u, [16, 32, 64]),
        "channels": s.knob_choice(u, [4, 8, 16, 24, 32, 48]),
        "cells_per_stage": s.knob(u, 1, 5, jitter=0.4),
        "ops": ops,
        "arch": arch,
        "classes": s.choice([10, 100, 120]),
    }


def build_nb201(hp: dict[str, Any]) -> nn.Module:
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
            layers.append(Residual(body, short))
            c *= 2
        for _ in range(hp["cells_per_stage"]):
            layers.append(_NB201Cell(c, hp["ops"]))
    layers += [nn.BatchNorm2d(c), nn.ReLU(), classifier_head(c, hp["classes"])]
    return nn.Sequential(*layers)
