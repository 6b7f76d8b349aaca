"""The latency GNN: message passing over the kernel DAG, a direct whole-model head.

Design (why each piece is there):

- **Directed message passing.** A kernel's cost depends on what feeds it (cache
  state, layouts) and on what consumes it; each layer passes messages along the
  dataflow edges and against them with separate weights (GINE convolutions that see
  the edge's tensor bytes), then mixes both with a residual and LayerNorm.
- **Per-kernel head.** Every node predicts its own log-latency; trained on measured
  kernel times as an auxiliary loss, it shapes the node embeddings.
- **Readout that can add and interact.** Sum, mean, max and attention pooling, plus
  ``log Σ exp(per-kernel prediction)``: the log of the predicted kernel sum, so the
  additive estimate is one feature away, while the pooled embeddings carry what a
  sum cannot express (launch overheads, inter-kernel effects, threading).
- **Whole-model head.** Log-latency is regressed directly from the readout (not a
  sum of node outputs), with a second output for the log of its standard deviation,
  which gives the prediction interval.
- **A head that holds at any graph size** (``size_safe_head``). The model's time is
  ``r · (kernel sum) + n · o``: ``r`` the bounded factor by which running together
  changes the kernels' sum (e^±``ratio_bound``), ``o`` a bounded per-kernel overhead
  (the VM's dispatch), ``n`` the kernel count, entering multiplicatively as physics
  has it. Both are read from size-independent (mean, max, attention) pooling. The
  earlier head read a sum over nodes and ``log n`` as inputs, which extrapolate: an
  unrolled RWKV of 6,168 kernels (training went to 283) got a correction of e^9.5.
- **Anchored on the kernel model.** With ``kernel_residual``, a kernel's head predicts
  a correction to the kernel model's time (what running inside the model changes), so
  the per-kernel and summed estimates start from a model trained on ~60,000 measured
  schedules instead of from the few whole-model records of a kind (e.g. large ``tuned``
  transformers, which the unanchored head overestimated by ~45%).
- **A kernel cost model underneath.** When the configuration names one, a pretrained
  :class:`~gnnperf.estimators.kernel.KernelCostModel` (frozen) reads each kernel's schedule
  row and gives the node its embedding and predicted log time (for a ``tuned`` build, the
  best of its candidate schedules' predicted times); the readout also sees ``log Σ exp``
  of those times, the learned additive estimate, so what the GNN adds over a sum of
  kernel estimates is learned.
- **Deep ensemble.** :class:`EnsembleGNN` averages members trained from different
  seeds; the spread of their means is added to their own variance, so the interval
  widens where the members disagree (inputs unlike the training data).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch_geometric.data import Batch, Data
from torch_geometric.nn import AttentionalAggregation, GINEConv
from torch_geometric.utils import scatter

from gnnperf.estimators.kernel.model import KernelCostModel, KernelModelConfig


@dataclass
class ModelConfig:
    """Shape of the network; stored in checkpoints."""

    in_dim: int
    hw_dim: int
    edge_dim: int = 1
    hidden: int = 128
    layers: int = 4
    dropout: float = 0.0
    use_hw: bool = True
    members: int = 1
    #: :class:`KernelModelConfig` fields of the kernel cost model the nodes read, or None
    kernel_model: dict[str, Any] | None = None
    #: the per-kernel head predicts a correction to the kernel model's time where that
    #: describes the kernel (False: its own log time everywhere, as checkpoints before it)
    kernel_residual: bool = False
    #: the whole-model head is ``r · kernel sum + n · o`` with bounded ``r`` and ``o`` read
    #: from size-independent pooling (False: the unbounded correction read from a sum over
    #: nodes, as checkpoints before it)
    size_safe_head: bool = False
    #: |log r| at most this (``size_safe_head``)
    ratio_bound: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mlp(dims: list[int], dropout: float = 0.0) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(nn.GELU())
            if dropout:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


class DirectedLayer(nn.Module):
    """One round of messages along and against the dataflow edges."""

    def __init__(self, hidden: int, edge_dim: int, dropout: float) -> None:
        super().__init__()
        self.forward_conv = GINEConv(_mlp([hidden, hidden, hidden]), edge_dim=edge_dim)
        self.backward_conv = GINEConv(_mlp([hidden, hidden, hidden]), edge_dim=edge_dim)
        self.mix = _mlp([2 * hidden, hidden, hidden], dropout)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, h: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        fwd = self.forward_conv(h, edge_index, edge_attr)
        bwd = self.backward_conv(h, edge_index.flip(0), edge_attr)
        return self.norm(h + self.mix(torch.cat([fwd, bwd], dim=-1)))


@dataclass
class GNNOutput:
    mu: Tensor  # [graphs] predicted log-ms of the whole model
    log_sigma: Tensor  # [graphs] log standard deviation of that prediction
    kernel_mu: Tensor  # [nodes] predicted log-ms per kernel
    correction: Tensor  # [graphs] the part of mu that is not the weighted kernel sum


#: per-kernel overhead of the size-safe head, in log ms: centred on 5 µs (the relax VM's
#: dispatch of one call is a few µs) and bounded within e^±3 of it (0.25–100 µs)
OVERHEAD_LOG_MS = -5.3
OVERHEAD_LOG_SPAN = 3.0


def bounded(raw: Tensor, bound: float) -> Tensor:
    """``raw`` squashed smoothly into (-bound, bound), the identity near 0."""
    return bound * torch.tanh(raw / bound)


def kernel_node_outputs(kernel_model: KernelCostModel, data: Data | Batch
                        ) -> tuple[Tensor, Tensor]:
    """Per node of ``data``, the kernel model's embedding and predicted log ms."""
    return kernel_model.node_outputs(data.x_kernel, data.kernel_tuned,
                                     getattr(data, "x_candidates", None),
                                     getattr(data, "candidates_node_index", None))


@torch.no_grad()
def attach_kernel_outputs(kernel_model: KernelCostModel, graphs: list[Data]) -> None:
    """Store the (frozen) kernel model's outputs on each graph, as ``kernel_emb`` and
    ``kernel_time``, so that training computes them once instead of every epoch: they
    were four fifths of a training epoch's time. The graphs must not be shared with code
    that expects other kernel outputs (training attaches them to its own scaled copies)."""
    kernel_model.eval()
    for g in graphs:
        if getattr(g, "x_kernel", None) is not None:
            g.kernel_emb, g.kernel_time = kernel_node_outputs(kernel_model, g)


class LatencyGNN(nn.Module):
    """Kernel graph (+ hardware on every node) → whole-model and per-kernel log-latency."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.kernel_model: KernelCostModel | None = None
        extra = 0
        if config.kernel_model is not None:
            self.kernel_model = KernelCostModel(KernelModelConfig(**config.kernel_model))
            self.kernel_model.requires_grad_(False)
            # embedding, predicted log ms and (residual head) whether the two count
            extra = self.kernel_model.cfg.embed_dim + 1 + config.kernel_residual
        self.encoder = _mlp([config.in_dim + extra, h, h], config.dropout)
        self.layers = nn.ModuleList(
            DirectedLayer(h, config.edge_dim, config.dropout) for _ in range(config.layers)
        )
        # the kernel head sees the node's own encoding beside its context, so that what a
        # kernel costs alone is not washed out by the message passing
        self.kernel_head = _mlp([2 * h, h, 1])
        self.attention_pool = AttentionalAggregation(gate_nn=_mlp([h, h // 2, 1]),
                                                     nn=_mlp([h, h]))
        pools = 3 if config.size_safe_head else 4  # the size-safe head reads no sum pool
        outputs = 3 if config.size_safe_head else 2  # (ratio, overhead,) correction, spread
        self.graph_head = _mlp([pools * h + 2 + (extra > 0), h, h // 2, outputs],
                               config.dropout)
        self.additive_weight = nn.Parameter(torch.tensor(1.0))

    def train(self, mode: bool = True) -> LatencyGNN:
        super().train(mode)
        if self.kernel_model is not None:  # frozen: no dropout, whatever the GNN does
            self.kernel_model.eval()
        return self

    def _kernel_model_outputs(self, data: Data | Batch) -> tuple[Tensor, Tensor]:
        """Per node, the kernel model's embedding and predicted log ms (zeros on nodes it
        does not describe); per node, whether the prediction counts. Read from the graph
        where :func:`attach_kernel_outputs` stored them."""
        assert self.kernel_model is not None
        mask = data.kernel_model_mask
        if getattr(data, "kernel_emb", None) is not None:
            emb, time = data.kernel_emb, data.kernel_time
        else:
            emb, time = kernel_node_outputs(self.kernel_model, data)
        out = torch.cat([emb, time.unsqueeze(-1)], dim=-1)
        out = torch.where(mask.unsqueeze(-1), out, torch.zeros_like(out))
        if self.config.kernel_residual:
            out = torch.cat([out, mask.unsqueeze(-1).to(out.dtype)], dim=-1)
        return out, time

    def _inputs(self, x: Tensor) -> Tensor:
        if self.config.use_hw:
            return x
        # ablation: the model sees no hardware (the columns are zeroed, shapes unchanged)
        keep = x.new_ones(x.shape[1])
        keep[-self.config.hw_dim:] = 0.0
        return x * keep

    @staticmethod
    def log_sum_exp(values: Tensor, batch: Tensor, n_graphs: int,
                    mask: Tensor | None = None) -> Tensor:
        """log Σ exp(values) per graph (over the nodes ``mask`` keeps), computed stably: the
        log of a sum of per-kernel times given as log times."""
        if mask is not None:
            values = values.masked_fill(~mask, -30.0)  # e^-30 ms: nothing
        peak = scatter(values, batch, dim=0, dim_size=n_graphs, reduce="max")
        total = scatter((values - peak[batch]).exp(), batch, dim=0, dim_size=n_graphs,
                        reduce="sum")
        return peak + total.log()

    def forward(self, data: Data | Batch) -> GNNOutput:
        x, edge_index, edge_attr = data.x, data.edge_index, data.edge_attr
        batch = getattr(data, "batch", None)
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        n_graphs = int(batch.max()) + 1 if batch.numel() else 0
        x = self._inputs(x)
        additive: list[Tensor] = []
        anchor = None
        if self.kernel_model is not None:
            node_extra, kernel_time = self._kernel_model_outputs(data)
            if self.config.kernel_residual:
                anchor = torch.where(data.kernel_model_mask, kernel_time,
                                     torch.zeros_like(kernel_time))
            x = torch.cat([x, node_extra], dim=-1)
            additive.append(self.log_sum_exp(kernel_time, batch, n_graphs,
                                             data.kernel_model_mask).unsqueeze(-1))
        h0 = self.encoder(x)
        h = h0
        for layer in self.layers:
            h = layer(h, edge_index, edge_attr)
        kernel_mu = self.kernel_head(torch.cat([h0, h], dim=-1)).squeeze(-1)
        if anchor is not None:
            kernel_mu = kernel_mu + anchor
        log_kernel_sum = self.log_sum_exp(kernel_mu, batch, n_graphs)
        counts = scatter(torch.ones_like(kernel_mu), batch, dim=0, dim_size=n_graphs,
                         reduce="sum")
        extensive = [] if self.config.size_safe_head else [
            scatter(h, batch, dim=0, dim_size=n_graphs, reduce="sum") / 16.0]
        pooled = torch.cat([
            *extensive,
            scatter(h, batch, dim=0, dim_size=n_graphs, reduce="mean"),
            scatter(h, batch, dim=0, dim_size=n_graphs, reduce="max"),
            self.attention_pool(h, batch, dim_size=n_graphs),
            log_kernel_sum.unsqueeze(-1),
            counts.log().unsqueeze(-1),
            *additive,
        ], dim=-1)
        out = self.graph_head(pooled)
        log_sigma = out[:, -1].clamp(-7.0, 3.0)
        summed = self.additive_weight * log_kernel_sum
        if self.config.size_safe_head:
            log_ratio = bounded(out[:, 0], self.config.ratio_bound)
            log_overhead = OVERHEAD_LOG_MS + bounded(out[:, 1], OVERHEAD_LOG_SPAN)
            mu = torch.logaddexp(summed + log_ratio, counts.log() + log_overhead)
            return GNNOutput(mu=mu, log_sigma=log_sigma, kernel_mu=kernel_mu,
                             correction=mu - summed)
        return GNNOutput(mu=summed + out[:, 0], log_sigma=log_sigma, kernel_mu=kernel_mu,
                         correction=out[:, 0])


class EnsembleGNN(nn.Module):
    """Members of one configuration, combined as a Gaussian mixture's mean and spread."""

    def __init__(self, config: ModelConfig, members: list[LatencyGNN] | None = None) -> None:
        super().__init__()
        self.config = config
        self.members = nn.ModuleList(
            members if members is not None
            else [LatencyGNN(config) for _ in range(max(1, config.members))])

    def forward(self, data: Data | Batch) -> GNNOutput:
        first = self.members[0].kernel_model
        if (first is not None and getattr(data, "kernel_emb", None) is None
                and getattr(data, "x_kernel", None) is not None):
            # the members read one frozen kernel model: its outputs (trees included) once
            data = copy.copy(data)
            with torch.no_grad():
                data.kernel_emb, data.kernel_time = kernel_node_outputs(first, data)
        outs = [m(data) for m in self.members]
        mus = torch.stack([o.mu for o in outs])
        mu = mus.mean(0)
        variance = torch.stack([(2 * o.log_sigma).exp() for o in outs]).mean(0)
        variance = variance + mus.var(0, unbiased=False)
        kernel_mu = torch.stack([o.kernel_mu for o in outs]).mean(0)
        correction = torch.stack([o.correction for o in outs]).mean(0)
        return GNNOutput(mu=mu, log_sigma=0.5 * variance.log(), kernel_mu=kernel_mu,
                         correction=correction)
