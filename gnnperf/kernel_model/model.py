"""The kernel cost model: an MLP from a kernel's, its schedule's and the hardware's features
to an embedding, read by two heads.

- the **time head** predicts the schedule's log time;
- the **tuned head** reads the *unscheduled* kernel's row and predicts the best log time
  over its schedules: the `tuned` build, whose schedules are not known before tuning.

The embedding is what the GNN receives on every node, beside the predicted time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass
class KernelModelConfig:
    in_dim: int
    hidden: int = 256
    embed_dim: int = 64
    layers: int = 3
    dropout: float = 0.1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class KernelCostModel(nn.Module):
    """Standardises its inputs itself (the statistics are buffers, saved with the weights)."""

    def __init__(self, cfg: KernelModelConfig, mean: Tensor | None = None,
                 std: Tensor | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.register_buffer("mean", mean if mean is not None else torch.zeros(cfg.in_dim))
        self.register_buffer("std", std if std is not None else torch.ones(cfg.in_dim))
        dims = [cfg.in_dim] + [cfg.hidden] * (cfg.layers - 1)
        blocks: list[nn.Module] = []
        for a, b in zip(dims, dims[1:], strict=False):
            blocks += [nn.Linear(a, b), nn.LayerNorm(b), nn.GELU(), nn.Dropout(cfg.dropout)]
        blocks.append(nn.Linear(dims[-1], cfg.embed_dim))
        self.encoder = nn.Sequential(*blocks)
        self.time_head = nn.Sequential(nn.GELU(), nn.Linear(cfg.embed_dim, 1))
        self.tuned_head = nn.Sequential(nn.GELU(), nn.Linear(cfg.embed_dim, 1))

    def embed(self, x: Tensor) -> Tensor:
        return self.encoder((x - self.mean) / self.std)

    def forward(self, x: Tensor) -> Tensor:
        """Predicted natural-log milliseconds of each row's schedule."""
        return self.time_head(self.embed(x)).squeeze(-1)

    def tuned(self, x_unscheduled: Tensor) -> Tensor:
        """Predicted log ms of the best schedule of each (unscheduled) row's workload."""
        return self.tuned_head(self.embed(x_unscheduled)).squeeze(-1)
