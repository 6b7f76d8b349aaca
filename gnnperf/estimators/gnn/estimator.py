"""The GNN behind :class:`~gnnperf.estimators.base.LatencyEstimator`: the benchmark's GNN
variants and anything else that trains and scores GNNs on lists of graphs.

Its interval is the network's own (a predicted spread per graph, rescaled on validation
so that the nominal coverage holds there), as the product reports it.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from gnnperf.data.label_noise import LabelNoise
from gnnperf.errors import GnnperfError
from gnnperf.estimators.base import Estimates, LatencyEstimator
from gnnperf.estimators.gnn.config import TrainConfig
from gnnperf.estimators.gnn.training import (
    TrainResult,
    interval_ms,
    predict_loader,
    train_model,
)


class GNNEstimator(LatencyEstimator):
    """Trains an ensemble of :class:`~gnnperf.estimators.gnn.network.LatencyGNN` under
    ``cfg`` (validation early stopping) and predicts with its calibrated interval."""

    name = "gnn"

    def __init__(self, cfg: TrainConfig, name: str = "gnn",
                 label_noise: LabelNoise | None = None) -> None:
        self.cfg = cfg
        self.name = name  # type: ignore[misc]  # a variant reports under its own name
        #: what the training records' loss weights follow (``cfg.label_noise_weighting``)
        self.label_noise = label_noise
        self.result: TrainResult | None = None

    def fit(self, train: Sequence[Data], val: Sequence[Data]) -> GNNEstimator:
        graphs = [*train, *val]
        n = len(train)
        self.result = train_model(graphs, self.cfg, progress=False,
                                  indices=(list(range(n)), list(range(n, len(graphs))), []),
                                  label_noise=self.label_noise)
        return self

    def predict(self, graphs: Sequence[Data]) -> Estimates:
        if self.result is None:
            raise GnnperfError("the GNN estimator has not been fitted")
        r = self.result
        loader = DataLoader([r.scaler(g) for g in graphs], batch_size=256)
        out = predict_loader(r.model, loader, self.cfg.device)
        low, high = interval_ms(out.mu, r.sigma_scale * out.sigma)
        m = r.metrics
        return Estimates(out.ms(), low, high, {
            "epochs_run": m["epochs_run"], "best_epochs": m["best_epochs"],
            "minutes": round(m["train_minutes"], 3),
            "stopped_by_safety_cap": bool(m["members_stopped_by_time_cap"])})
