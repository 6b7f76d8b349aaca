"""Feature normalisation fitted on a training split only."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch_geometric.data import Data

from gnnperf.standardize import column_mean_std, standardize


class FeatureScaler:
    """Per-feature mean/std of node and edge features, fitted on training graphs only.

    ``columns`` picks a checkpoint's own node columns out of today's encoding (a
    checkpoint trained before a column was added); None keeps every column.
    """

    def __init__(self, x_mean: torch.Tensor, x_std: torch.Tensor, e_mean: torch.Tensor,
                 e_std: torch.Tensor, columns: Sequence[int] | None = None) -> None:
        self.x_mean, self.x_std, self.e_mean, self.e_std = x_mean, x_std, e_mean, e_std
        self.columns = torch.tensor(list(columns), dtype=torch.long) \
            if columns is not None else None

    @classmethod
    def fit(cls, graphs: Iterable[Data]) -> FeatureScaler:
        xs, es = [], []
        for g in graphs:
            xs.append(g.x)
            es.append(g.edge_attr)
        x = torch.cat(xs)
        e = torch.cat(es) if es else torch.zeros((1, 1))
        return cls(*column_mean_std(x), *column_mean_std(e))

    def __call__(self, data: Data) -> Data:
        data = data.clone()
        x = data.x if self.columns is None else data.x[:, self.columns]
        data.x = standardize(x, self.x_mean, self.x_std)
        if data.edge_attr is not None and data.edge_attr.numel():
            data.edge_attr = standardize(data.edge_attr, self.e_mean, self.e_std)
        return data

    def state_dict(self) -> dict[str, list[float]]:
        return {k: getattr(self, k).tolist() for k in ("x_mean", "x_std", "e_mean", "e_std")}

    @classmethod
    def from_state_dict(cls, state: dict[str, list[float]],
                        columns: Sequence[int] | None = None) -> FeatureScaler:
        return cls(*(torch.tensor(state[k]) for k in ("x_mean", "x_std", "e_mean", "e_std")),
                   columns=columns)
