"""The GNN checkpoint as a typed, versioned record (MetaSchedule's ``TuningRecord`` is the
model: a dataclass with ``save``/``load``, older layouts converted on load).

Why typed: prediction reads what training wrote; with a dataclass both sides name the same
fields, and what older checkpoints lack is filled in once, here, not at every reader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import torch

from gnnperf.atomic import atomic_path
from gnnperf.data import FeatureScaler, feature_names
from gnnperf.errors import CheckpointError, one_line
from gnnperf.estimators.base import INTERVAL_COVERAGE
from gnnperf.estimators.gnn.network import EnsembleGNN, ModelConfig
from gnnperf.hardware.spec import ISA_LEVELS

#: Version of the checkpoint layout (2: an ensemble of members).
CHECKPOINT_FORMAT = 2
INTERVAL_Z = NormalDist().inv_cdf(0.5 + INTERVAL_COVERAGE / 2)


def share_kernel_models(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with each kernel-model tensor that equals another member's replaced by that
    one, so that ``torch.save`` stores it once: every member reads one frozen kernel model."""
    first: dict[str, torch.Tensor] = {}
    out = dict(state)
    for key, value in state.items():
        if ".kernel_model." not in key:
            continue
        name = key.split(".kernel_model.", 1)[1]
        kept = first.setdefault(name, value)
        if kept is not value and kept.dtype == value.dtype and torch.equal(kept, value):
            out[key] = kept
    return out


def interval_ms(mu: np.ndarray | float, sigma: np.ndarray | float
                ) -> tuple[np.ndarray, np.ndarray]:
    """The nominal-coverage interval (ms) of a log-normal prediction (log-ms mean, std)."""
    return np.exp(mu - INTERVAL_Z * sigma), np.exp(mu + INTERVAL_Z * sigma)


def feature_columns(names: Any, path: str | os.PathLike[str] = "") -> list[int] | None:
    """Where a checkpoint's feature columns sit among today's (None: the same columns).

    A checkpoint trained before a feature was added still reads today's graphs: the
    encoding only ever adds columns, so its own are picked out by name, in its order.
    """
    current = feature_names()
    if names == current:
        return None
    index = {name: i for i, name in enumerate(current)}
    if not isinstance(names, list) or not names or any(n not in index for n in names):
        where = f"checkpoint {path}" if path else "the checkpoint"
        raise CheckpointError(f"{where} was trained on other features; retrain it")
    return [index[n] for n in names]


@dataclass
class Checkpoint:
    """A trained ensemble and what prediction needs to know about its training."""

    model_config: dict[str, Any]
    train_config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    scaler: dict[str, Any]
    sigma_scale: float
    interval_coverage: float
    feature_names: list[str]
    dataset_fingerprint: str
    #: per hardware feature, the training range [lo, hi]
    hw_ranges: dict[str, list[float]]
    #: per build kind, the training models' GFLOP range
    gflop_ranges: dict[str, list[float]]
    builds: list[str]
    isas: list[str]
    #: CPU signature ids of the v2 training records; None where the checkpoint cannot say
    hosts: list[str] | None
    metrics: dict[str, Any] = field(default_factory=dict)
    #: training records per build (empty in checkpoints from before 2026-12-02)
    build_counts: dict[str, int] = field(default_factory=dict)
    #: the fewest and most kernels of a training graph (None before 2026-12-05)
    kernel_counts: list[int] | None = None
    format: int = CHECKPOINT_FORMAT

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the checkpoint (a temp file renamed into place). The members' frozen kernel
        models, equal in every member, are stored once (their trees are megabytes)."""
        path = Path(path)
        payload = {f.name: getattr(self, f.name) for f in fields(self)}  # not deep-copied
        payload["state_dict"] = share_kernel_models(self.state_dict)
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """Read a checkpoint file (or ``gnnperf.pt`` in a folder), converting older ones."""
        path = Path(path)
        if path.is_dir():
            path = path / "gnnperf.pt"
        if not path.is_file():
            raise CheckpointError(f"checkpoint {path} not found; run `python train.py` first")
        try:
            payload = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as exc:
            raise CheckpointError(f"checkpoint {path} is unreadable: {one_line(exc)}") from None
        if not isinstance(payload, dict) or "format" not in payload:
            raise CheckpointError(f"{path} is not a gnnperf checkpoint")
        if payload["format"] != CHECKPOINT_FORMAT:
            raise CheckpointError(f"checkpoint {path} has format {payload['format']}, this "
                                  f"gnnperf reads {CHECKPOINT_FORMAT}; retrain it")
        try:
            checkpoint = cls.from_dict(payload)
        except (KeyError, TypeError) as exc:
            # a checkpoint of other features says so before naming a missing field
            feature_columns(payload.get("feature_names"), path)
            raise CheckpointError(f"checkpoint {path} lacks {one_line(exc)}") from None
        checkpoint.feature_columns(path)
        return checkpoint

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Checkpoint:
        """The record from a saved payload; fields older checkpoints lack are derived."""
        metrics = payload.get("metrics", {})
        hw_ranges = payload["hw_ranges"]
        isas = payload.get("isas")
        if isas is None:  # before ``isas``: read off the ISA-level range
            lo, hi = hw_ranges["isa_level"]
            isas = list(ISA_LEVELS)[int(lo): int(hi) + 1]
        hosts = payload.get("hosts")
        if hosts is None and metrics.get("split") == "random" and metrics.get("test_by_host"):
            # before ``hosts``: a random split tested on every CPU it trained on (v2 only)
            hosts = sorted(metrics["test_by_host"])
        return cls(
            model_config=payload["model_config"], train_config=payload["train_config"],
            state_dict=payload["state_dict"], scaler=payload["scaler"],
            sigma_scale=float(payload["sigma_scale"]),
            interval_coverage=float(payload["interval_coverage"]),
            feature_names=list(payload.get("feature_names") or []),
            dataset_fingerprint=str(payload.get("dataset_fingerprint", "")),
            hw_ranges=hw_ranges, gflop_ranges=payload.get("gflop_ranges", {}),
            builds=list(payload.get("builds", [])), isas=list(isas),
            hosts=list(hosts) if hosts is not None else None, metrics=metrics,
            build_counts={str(b): int(n) for b, n in payload.get("build_counts", {}).items()},
            kernel_counts=payload.get("kernel_counts"),
            format=int(payload["format"]))

    def feature_columns(self, path: str | os.PathLike[str] = "") -> list[int] | None:
        """Where this checkpoint's feature columns sit among today's (None: the same)."""
        return feature_columns(self.feature_names, path)

    def model(self) -> tuple[EnsembleGNN, FeatureScaler]:
        """The ensemble (eval mode, float32) and the feature scaler it was trained with."""
        try:
            model = EnsembleGNN(ModelConfig(**self.model_config))
            model.load_state_dict({k: v.float() if v.is_floating_point() else v
                                   for k, v in self.state_dict.items()})
            scaler = FeatureScaler.from_state_dict(self.scaler, columns=self.feature_columns())
        except (KeyError, TypeError, RuntimeError) as exc:
            raise CheckpointError(f"checkpoint does not fit this gnnperf: {one_line(exc)}"
                                  ) from None
        model.eval()
        return model, scaler
