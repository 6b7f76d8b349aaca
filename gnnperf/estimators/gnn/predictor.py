"""A loaded checkpoint: the GNN ensemble that turns kernel graphs into predictions."""

from __future__ import annotations

import atexit
import gc
import math
import os
import time
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Batch

from gnnperf.calibrate.prior import PRIOR_FILE, UnseenCpuPrior, load_prior
from gnnperf.calibrate.store import Calibration, checkpoint_sha256, load_calibration
from gnnperf.data import graph_to_data
from gnnperf.data.encoding import EncodingMemo
from gnnperf.errors import BuildConfigError
from gnnperf.estimators.gnn.checkpoint import Checkpoint, interval_ms
from gnnperf.estimators.gnn.network import EnsembleGNN
from gnnperf.estimators.types import (
    KernelPrediction,
    OutOfDistributionWarning,
    Prediction,
    default_checkpoint,
)
from gnnperf.features import KernelGraph
from gnnperf.features.schema import HARDWARE as HW_FEATURE_NAMES
from gnnperf.hardware.spec import HardwareSpec, supported_isas
from gnnperf.lowering.build_config import BuildConfig

# torch, PyG and TVM leave about a million objects behind, and the garbage collections of
# interpreter shutdown spend ~0.8 s (Zen 3: 1.7 s) walking them for nothing: a
# command-line user who predicts or advises waits for that. Frozen objects are skipped
# (memory goes back to the OS at exit anyway).
atexit.register(gc.freeze)

# Reference-kernel times (log2 ms) within a factor of 2 of the training range are not out of
# distribution: on one CPU at one thread count the dataset's own medians span up to 1.67
# (stream, 2 threads, Zen 4), and a small training set sees only a sliver of that drift.
REFERENCE_STATE_MARGIN_LOG2 = 1.0
#: training records a searched build (``best-of:S``, ``tuned:N``) needs before the
#: checkpoint predicts it (the GNN of 2026-12-02 trained on 11 ``tuned:64`` records, too few;
#: the one of 2026-12-07 on 124 ``tuned:64`` and 31 ``tuned:256``)
MIN_SEARCHED_RECORDS = 20


class Predictor:
    """A loaded checkpoint, ready to predict graphs."""

    def __init__(self, checkpoint: str | os.PathLike[str] | None = None) -> None:
        path = Path(checkpoint) if checkpoint is not None else default_checkpoint()
        self.path = path
        self.checkpoint = Checkpoint.load(path)
        self.model: EnsembleGNN
        self.model, self.scaler = self.checkpoint.model()
        self.sigma_scale = self.checkpoint.sigma_scale
        self.coverage = self.checkpoint.interval_coverage
        folder = path if path.is_dir() else path.parent
        #: how far this checkpoint's recipe errs on a CPU it never trained on, measured by
        #: ``gnnperf bench`` on checkpoints trained without each held-out CPU (None: no
        #: such file beside the checkpoint; one retrained into this folder keeps it)
        self.unseen_prior: UnseenCpuPrior | None = load_prior(folder / PRIOR_FILE)

    @property
    def trained_cpus(self) -> set[str] | None:
        """The CPU signature ids of the v2 training records; None when the checkpoint does
        not say."""
        hosts = self.checkpoint.hosts
        return set(hosts) if hosts is not None else None

    def unseen_spread(self, hw: HardwareSpec, build: str) -> float:
        """The log spread an uncalibrated prediction for ``hw`` adds to its interval: the
        unseen-CPU prior's for a CPU the checkpoint did not train on, else 0."""
        cpus = self.trained_cpus
        if self.unseen_prior is None or cpus is None or hw.cpu_id in cpus:
            return 0.0
        return self.unseen_prior.log_spread(build, hw.threads)

    @property
    def learned_builds(self) -> list[str]:
        """The builds the checkpoint trained on; a searched one only with at least
        :data:`MIN_SEARCHED_RECORDS` training records (where the checkpoint counted them):
        a search's result learned from a handful of labels would be a guess."""
        counts = self.checkpoint.build_counts
        return [b for b in self.checkpoint.builds
                if not counts or not BuildConfig.parse(b).searched
                or counts.get(b, 0) >= MIN_SEARCHED_RECORDS]

    @property
    def learned_kinds(self) -> set[str]:
        """The build kinds the checkpoint learned (one from before its build list was
        stored: every kind but ``tuned``, which none of those learned)."""
        if not self.checkpoint.builds:
            return {"default", "dlight", "sampled", "best-of"}
        return {BuildConfig.parse(b).kind for b in self.learned_builds}

    def check_build(self, build: str) -> str:
        """``build`` in its canonical form, or a one-line :class:`BuildConfigError` for a
        searched build kind this checkpoint never trained on: what a search finds is
        learned from searched labels, and without them a prediction would be a guess. (An
        unsearched kind it never saw, ``dlight`` say, is predicted with a warning.)"""
        config = BuildConfig.parse(build)
        learned = self.learned_kinds
        if config.searched and config.kind not in learned:
            hint = (": the searched build it predicts is best-of:16 (the best of 16 random "
                    "schedules per kernel)" if "best-of" in learned else "")
            name = "tuned:N" if config.kind == "tuned" else config.kind
            raise BuildConfigError(f"this checkpoint has not learned {name} builds (it "
                                   f"learned {', '.join(sorted(learned))}){hint}")
        return str(config)

    def trained_budgets(self) -> list[int]:
        """The ``tuned:N`` budgets of the training records (empty: none learned)."""
        return sorted({BuildConfig.parse(b).trials for b in self.learned_builds
                       if BuildConfig.parse(b).kind == "tuned"})

    @property
    def trained_isas(self) -> list[str]:
        """ISAs of the training hardware."""
        return list(self.checkpoint.isas)

    @property
    def sees_reference(self) -> bool:
        """Whether the checkpoint reads the reference kernels' times (measurement v2)."""
        names = self.checkpoint.feature_names
        return any(str(n).startswith("hw_log2_ref_") for n in names)

    def hardware(self, hw: HardwareSpec | dict[str, Any] | str) -> HardwareSpec:
        """``hw`` as a spec; for this machine, with its reference kernels' usual times
        when the checkpoint reads them (measured once, then cached)."""
        spec = HardwareSpec.coerce(hw)
        if spec.reference_ms is None and spec.host == "local" and self.sees_reference:
            from gnnperf.measure.local import with_reference_figures

            spec = with_reference_figures(spec)
        return spec

    def check_inputs(self, hw: HardwareSpec, build: str, gflop: float | None = None,
                     kernels: int | None = None) -> list[str]:
        """Reasons why a prediction may be unreliable (empty when in distribution)."""
        reasons = []
        counts = self.checkpoint.kernel_counts
        if kernels is not None and counts and far_outside(kernels, counts):
            reasons.append(f"the model's {kernels} kernels are far outside the "
                           f"{counts[0]}..{counts[1]} kernels of the training models")
        ranges = self.checkpoint.gflop_ranges
        # older checkpoints keyed the ranges by the full build string
        seen = ranges.get(BuildConfig.parse(build).kind) or ranges.get(build)
        if gflop is not None and seen and far_outside(gflop, seen):
            reasons.append(f"the model's {gflop:.3g} GFLOP is far outside the "
                           f"{seen[0]:.3g}..{seen[1]:.3g} GFLOP of the '{build}' training models")
        isas = self.trained_isas
        if hw.isa not in isas:
            usable = [i for i in isas if i in supported_isas()] if hw.host == "local" else []
            hint = f"; local/{usable[-1]} is an in-distribution target here" if usable else ""
            reasons.append(f"ISA {hw.isa} was not in the training hardware "
                           f"({', '.join(isas)}){hint}")
        no_reference = self.sees_reference and hw.feature_vector()[
            HW_FEATURE_NAMES.index("ref_missing")] == 1.0
        if no_reference and self.checkpoint.hw_ranges["ref_missing"][1] == 0.0:
            reasons.append("the hardware spec has no reference-kernel times, which this "
                           "checkpoint reads; `gnnperf hw` measures them")
        for name, value in zip(HW_FEATURE_NAMES, hw.feature_vector(), strict=True):
            if name not in self.checkpoint.hw_ranges:
                continue  # a feature added after this checkpoint was trained
            if no_reference and "ref_" in name:
                continue  # said once above
            lo, hi = self.checkpoint.hw_ranges[name]
            margin = 0.25 * max(hi - lo, 1e-9)
            if "ref_" in name:  # the machine's state, not its identity: drifts between runs
                margin = max(margin, REFERENCE_STATE_MARGIN_LOG2)
            if value < lo - margin - 1e-6 or value > hi + margin + 1e-6:
                reasons.append(f"hardware feature {name}={value:.3g} is outside the training "
                               f"range [{lo:.3g}, {hi:.3g}]")
        builds = self.learned_builds
        config = BuildConfig.parse(build)
        budgets = self.trained_budgets()
        if config.kind == "tuned" and budgets:
            # the budget is an input: any N between the budgets trained on is in range
            if not budgets[0] <= config.trials <= budgets[-1]:
                reasons.append(f"tuned budget {config.trials} is outside the trained "
                               f"{budgets[0]}..{budgets[-1]} trials per kernel")
        elif builds and build not in builds and not (
            build.startswith("sampled:") and any(b.startswith("sampled:") for b in builds)
        ):
            reasons.append(f"build '{build}' is not among the builds this checkpoint learned "
                           f"({', '.join(builds)})")
        return reasons

    def calibration(self, hw: HardwareSpec) -> Calibration | None:
        """The few-shot correction ``gnnperf calibrate`` stored for ``hw``'s CPU and this
        checkpoint, if any."""
        return load_calibration(hw.cpu_id, checkpoint_sha256(self.path))

    @torch.no_grad()
    def predict_graphs(self, items: Sequence[tuple[KernelGraph, HardwareSpec]],
                       calibrated: bool = True) -> list[Prediction]:
        """Predict many lowered graphs in one batched forward pass; ``calibrated``: apply
        the CPU's stored calibration where there is one (0 shots otherwise)."""
        start = time.perf_counter()
        for graph, _ in items:
            self.check_build(graph.build)
        corrections: dict[str, Calibration | None] = {}
        memo = EncodingMemo()  # a lowered graph's builds and thread counts share its nodes
        datas = [self.scaler(graph_to_data(g, hw, memo=memo)) for g, hw in items]
        batch = Batch.from_data_list(datas)
        out = self.model(batch)
        per_graph_s = (time.perf_counter() - start) / max(len(items), 1)
        results = []
        offsets = batch.ptr.tolist()
        for i, (graph, hw) in enumerate(items):
            mu = float(out.mu[i])
            sigma = float(out.log_sigma[i].exp()) * self.sigma_scale
            kernel_ms = out.kernel_mu[offsets[i]:offsets[i + 1]].exp().tolist()
            if calibrated and hw.cpu_id not in corrections:
                corrections[hw.cpu_id] = self.calibration(hw)
            correction = corrections.get(hw.cpu_id) if calibrated else None
            unseen = ""
            if correction is not None:
                log_factor, log_spread = correction.correction(graph.build, hw.threads)
                mu += log_factor
                sigma = math.hypot(sigma, log_spread)
                kernel_ms = [ms * math.exp(log_factor) for ms in kernel_ms]
            elif self.unseen_prior is not None and (spread := self.unseen_spread(
                    hw, graph.build)):
                sigma = math.hypot(sigma, spread)
                unseen = self.unseen_prior.line(spread)
            low, high = interval_ms(mu, sigma)
            reasons = self.check_inputs(hw, graph.build, graph.total_flops / 1e9,
                                        len(graph.nodes))
            for reason in reasons:
                warnings.warn(reason, OutOfDistributionWarning, stacklevel=3)
            results.append(Prediction(
                latency_ms=math.exp(mu),
                low_ms=float(low),
                high_ms=float(high),
                coverage=self.coverage,
                hw_id=hw.hw_id,
                build=graph.build,
                kernels=[KernelPrediction(n.index, n.name, float(ms), n.flops)
                         for n, ms in zip(graph.nodes, kernel_ms, strict=True)],
                predict_s=per_graph_s,
                warnings=reasons,
                calibration=correction.line() if correction is not None else "",
                unseen_cpu=unseen,
            ))
        return results


def far_outside(value: float, seen: Sequence[float], factor: float = 4.0) -> bool:
    """Whether ``value`` lies over ``factor`` times beyond the training range ``seen``
    ([lo, hi]) of a size (GFLOP, kernels) on either side."""
    return not seen[0] / factor <= value <= seen[1] * factor


@lru_cache(maxsize=4)
def _cached_predictor(path: str) -> Predictor:
    return Predictor(path)


def load_predictor(checkpoint: str | os.PathLike[str] | None = None) -> Predictor:
    """The checkpoint's predictor, loaded once per process."""
    return _cached_predictor(str(Path(checkpoint) if checkpoint else default_checkpoint()))
