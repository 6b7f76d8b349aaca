"""The kernel cost model: an MLP from a kernel's, its schedule's and the hardware's features
to an embedding, read by two heads.

- the **time head** predicts the schedule's log time;
- the **tuned head** reads the *unscheduled* kernel's row and predicts the best log time
  over its sampled schedules: the ``best-of:S`` build (called ``tuned`` when these names,
  kept in checkpoints, were given), whose schedules are not known before measuring them.
- **tuned from candidates**: where the S schedules a ``best-of`` build picks from are known
  (drawn, not measured: MetaSchedule's design space, seeds 0..S-1), the best of their
  predicted times plus ``tuned_offset`` (fitted on validation workloads: the minimum of
  S noisy predictions is biased low) replaces the tuned head. On unseen workloads this
  is what predicts a best-of kernel best (``benchmarks/kernel_model.py``).

- **trees for the time** (:mod:`.boosted`): where the model holds a booster, its
  prediction replaces the time head's for every schedule, candidates included; the MLP
  keeps the embedding and the tuned head. One kind of row may keep the time head: the
  unscheduled kernels (what a ``default`` build runs), when on validation workloads the
  network predicts them better than the trees (:data:`HEAD_ROWS_KEY`, chosen in training).

The embedding is what the GNN receives on every node, beside the predicted time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

from gnnperf.estimators.kernel.boosted import booster_from_bytes, booster_log_ms
from gnnperf.standardize import standardize

BOOSTER_KEY = "booster_raw"
#: the input column (a 0/1 flag) whose rows keep the time head's prediction beside a
#: booster; -1: the booster predicts every row (what every model saved before it did)
HEAD_ROWS_KEY = "head_rows_column"


@dataclass
class KernelModelConfig:
    in_dim: int
    hidden: int = 256
    embed_dim: int = 64
    layers: int = 3
    dropout: float = 0.1
    #: standardised inputs clipped to ±CLIP (checkpoints before format 3 were not; their
    #: constant training columns have deviation 1e-6, see :mod:`gnnperf.standardize`)
    clip_inputs: bool = True

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
        self.register_buffer("tuned_offset", torch.zeros(()))
        # the booster's model bytes (empty: none), a buffer so that state dicts carry it
        self.register_buffer(BOOSTER_KEY, torch.zeros(0, dtype=torch.uint8))
        self.register_buffer(HEAD_ROWS_KEY, torch.tensor(-1, dtype=torch.long))
        self._booster: Any = None
        self.register_load_state_dict_pre_hook(self._fit_booster_buffer)
        dims = [cfg.in_dim] + [cfg.hidden] * (cfg.layers - 1)
        blocks: list[nn.Module] = []
        for a, b in zip(dims, dims[1:], strict=False):
            blocks += [nn.Linear(a, b), nn.LayerNorm(b), nn.GELU(), nn.Dropout(cfg.dropout)]
        blocks.append(nn.Linear(dims[-1], cfg.embed_dim))
        self.encoder = nn.Sequential(*blocks)
        self.time_head = nn.Sequential(nn.GELU(), nn.Linear(cfg.embed_dim, 1))
        self.tuned_head = nn.Sequential(nn.GELU(), nn.Linear(cfg.embed_dim, 1))

    def _fit_booster_buffer(self, module: nn.Module, state_dict: dict[str, Any], prefix: str,
                            *args: Any) -> None:
        """Loading takes the saved bytes themselves (any size; the members of an ensemble
        then share one copy, which a checkpoint stores once); a state dict saved before
        boosters (none in it) loads as a model without one, and one saved before the time
        head could keep a kind of row, as a model whose booster predicts every row."""
        key = prefix + BOOSTER_KEY
        saved = state_dict.setdefault(key, torch.zeros(0, dtype=torch.uint8))
        self.booster_raw = saved.to(self.booster_raw.device, torch.uint8)
        self._booster = None
        state_dict.setdefault(prefix + HEAD_ROWS_KEY, torch.tensor(-1, dtype=torch.long))

    def set_booster(self, raw: bytes) -> None:
        """Use the booster whose model bytes are ``raw`` for every schedule time (b"": none)."""
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw \
            else torch.zeros(0, dtype=torch.uint8)
        self.booster_raw = data.to(self.mean.device)
        self._booster = None

    @property
    def has_booster(self) -> bool:
        return self.booster_raw.numel() > 0

    def keep_head_for(self, column: int | None) -> None:
        """Rows whose input ``column`` (a 0/1 flag) is set keep the time head's prediction
        beside the booster (None: the booster predicts every row)."""
        self.head_rows_column.fill_(-1 if column is None else int(column))

    @property
    def head_rows(self) -> int | None:
        """The flag column whose rows the time head predicts beside a booster, if any."""
        column = int(self.head_rows_column)
        return column if column >= 0 else None

    def schedule_log_ms(self, x: Tensor, emb: Tensor | None = None) -> Tensor:
        """Predicted natural-log milliseconds of each row's schedule: the booster's where
        the model has one (except the rows :attr:`head_rows` names), else the time head's
        (on ``emb``, the rows' embedding, where the caller has it)."""
        if not self.has_booster:
            return self.time_head(self.embed(x) if emb is None else emb).squeeze(-1)
        if self._booster is None:
            self._booster = booster_from_bytes(self.booster_raw.cpu().numpy().tobytes())
        pred = torch.from_numpy(booster_log_ms(self._booster, x.detach().cpu().numpy())
                                ).to(x.device)
        column = self.head_rows
        if column is not None and len(x) and bool((head := x[:, column] > 0.5).any()):
            own = self.time_head(self.embed(x) if emb is None else emb).squeeze(-1)
            pred = torch.where(head, own.to(pred.dtype), pred)
        return pred

    def embed(self, x: Tensor) -> Tensor:
        z = standardize(x, self.mean, self.std) if self.cfg.clip_inputs \
            else (x - self.mean) / self.std
        return self.encoder(z)

    def forward(self, x: Tensor) -> Tensor:
        """The time head's natural-log milliseconds of each row's schedule (what training
        fits; :meth:`schedule_log_ms` is what predictions use)."""
        return self.time_head(self.embed(x)).squeeze(-1)

    def tuned(self, x_unscheduled: Tensor) -> Tensor:
        """Predicted log ms of the best schedule of each (unscheduled) row's workload."""
        return self.tuned_head(self.embed(x_unscheduled)).squeeze(-1)

    def best_candidate(self, x_candidates: Tensor, owner: Tensor, n: int
                       ) -> tuple[Tensor, Tensor]:
        """Per owner (``n`` of them), the best predicted log ms over its candidate rows plus
        ``tuned_offset``, and whether it has any candidate."""
        pred = self.schedule_log_ms(x_candidates)
        best = pred.new_zeros(n).scatter_reduce(0, owner, pred, "amin", include_self=False)
        count = torch.zeros(n, dtype=torch.long, device=owner.device).index_add_(
            0, owner, torch.ones_like(owner))
        return best + self.tuned_offset, count > 0

    def node_outputs(self, x: Tensor, tuned: Tensor, x_candidates: Tensor | None = None,
                     owner: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Per kernel (``x``: its row), the embedding and the predicted log ms of the
        schedule it runs; for ``tuned`` kernels the best of their candidates where they have
        some (rows of ``x_candidates``, ``owner`` naming each one's kernel), else the tuned
        head."""
        emb = self.embed(x)
        time = self.schedule_log_ms(x, emb)
        tuned_time = self.tuned_head(emb).squeeze(-1)
        if x_candidates is not None and owner is not None and len(x_candidates):
            best, has = self.best_candidate(x_candidates, owner, len(emb))
            tuned_time = torch.where(has, best, tuned_time)
        return emb, torch.where(tuned, tuned_time, time)
