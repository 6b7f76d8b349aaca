"""``gnnperf advise``: the decision a deployment engineer makes before compiling, as one
table. Every build a checkpoint predicts, at every thread count and ISA of the machine:
the predicted latency and interval, the gain over ``default`` and ``sampled`` at the same
configuration, and, for a ``tuned:N`` budget, what tuning would cost here.

A searched build's gain only pays if the search does: the tuning time comes from the
stored tuning runs (:func:`gnnperf.collect.kernels.database.tuning_stats`), per tunable
workload of the model, on this CPU at that thread count when it was tuned here, else from
the nearest hardware that was (and the row says which).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gnnperf.collect.kernels.database import tuning_stats
from gnnperf.errors import GnnperfError, HardwareError, one_line
from gnnperf.estimators.types import Prediction
from gnnperf.features import KernelGraph
from gnnperf.hardware.spec import HardwareSpec, available_cores, supported_isas
from gnnperf.lowering.build_config import BEST_OF_SCHEDULES, BuildConfig
from gnnperf.prediction.graphs import lower_for_prediction
from gnnperf.store.tuning_summary import TuningStats

#: the builds a user weighs: none, one random schedule, and searches of growing cost
ADVISED_BUILDS = ("default", "sampled:0", "best-of:16")
#: the tuning budgets (trials per kernel) advised when the checkpoint predicts them
ADVISED_BUDGETS = (16, 64, 256)


@dataclass
class AdviceRow:
    isa: str
    threads: int
    build: str
    latency_ms: float
    low_ms: float
    high_ms: float
    #: predicted ``default`` / this build at the same ISA and threads (None: no default row)
    over_default: float | None = None
    #: predicted ``sampled:0`` / this build (None: none, or this is a sampled build)
    over_sampled: float | None = None
    #: for ``tuned:N``: the search's estimated minutes on this machine, and where the
    #: per-workload cost was measured
    tuning_minutes: float | None = None
    tuning_measured_on: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class Advice:
    model: str
    rows: list[AdviceRow]
    #: build (or ``build @ ISA/Nt``) -> why it has no row
    skipped: dict[str, str]
    #: kernels a tuning would search (distinct workloads of the model's scheduled kernels)
    tunable_workloads: int
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Draw the table: each configuration's latency and interval, by build."""
        from gnnperf.prediction.plots import plot_advice

        return plot_advice(self.rows, path, title=f"{self.model}: predicted latency per "
                                                  "build, ISA and thread count")

    def best(self) -> AdviceRow:
        return min(self.rows, key=lambda r: r.latency_ms)

    def table(self) -> str:
        """The rows as a plain-text table, fastest configuration marked."""
        best = self.best()
        head = (f"{'ISA':<10} {'thr':>3}  {'build':<11} {'ms':>9} {'90% interval':>21} "
                f"{'x default':>9} {'x sampled':>9} {'tuning':>9}")
        lines = [head, "-" * len(head)]
        for r in self.rows:
            interval = f"{r.low_ms:.3f}..{r.high_ms:.3f}"
            tuning = "" if r.tuning_minutes is None else f"{r.tuning_minutes:.0f} min"
            lines.append(f"{r.isa:<10} {r.threads:>3}  {r.build:<11} {r.latency_ms:>9.3f} "
                         f"{interval:>21} {_ratio(r.over_default):>9} "
                         f"{_ratio(r.over_sampled):>9} {tuning:>9}"
                         + ("  <- fastest" if r is best else ""))
        sources = sorted({r.tuning_measured_on for r in self.rows if r.tuning_measured_on})
        if sources:
            lines.append(f"tuning time: {self.tunable_workloads} workloads x the median "
                         f"minutes per workload of the stored runs on {', '.join(sources)}")
        lines += [f"not advised: {what}: {why}" for what, why in self.skipped.items()]
        return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def advise(
    onnx_path: str | os.PathLike[str],
    hw: HardwareSpec | dict[str, Any] | str = "local",
    *,
    threads: Sequence[int] | None = None,
    isas: Sequence[str] | None = None,
    builds: Sequence[str] = ADVISED_BUILDS,
    budgets: Sequence[int] = ADVISED_BUDGETS,
    checkpoint: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> Advice:
    """Predict ``onnx_path`` at every (ISA, threads, build): ISAs the checkpoint trained on
    that ``hw`` supports (or ``isas``), 1 to ``hw``'s threads (or ``threads``), ``builds``
    and a ``tuned:N`` build per budget. A build the checkpoint cannot predict is skipped
    with its reason, never guessed. ``root``: the dataset whose tuning runs give the
    tuning cost (default: the shipped one)."""
    import time

    start = time.perf_counter()
    from gnnperf.estimators.gnn.predictor import load_predictor  # PyTorch loads here

    base = HardwareSpec.coerce(hw)
    predictor = load_predictor(checkpoint)
    counts = sorted(set(threads)) if threads else list(range(1, base.threads + 1))
    if not counts or min(counts) < 1 or (base.host == "local" and max(counts) > available_cores()):
        raise HardwareError(f"thread counts must lie in 1..{available_cores()}, got {counts}")
    wanted_isas = list(isas) if isas else [
        i for i in predictor.trained_isas if base.host != "local" or i in supported_isas()]
    if not wanted_isas:
        raise HardwareError("no ISA to advise on: this machine supports none the checkpoint "
                            "trained on")
    skipped: dict[str, str] = {}
    candidates = [*builds, *(f"tuned:{n}" for n in budgets)]
    configs: dict[str, BuildConfig] = {}  # the builds it predicts, parsed once
    for build in candidates:
        try:
            configs[predictor.check_build(build)] = BuildConfig.parse(build)
        except GnnperfError as exc:
            skipped[build] = one_line(exc)
    items, keys = [], []
    tunable: set[str] = set()
    lowered: dict[tuple[str, str], KernelGraph | GnnperfError] = {}
    for isa in wanted_isas:
        for count in counts:
            spec = predictor.hardware(_at(base, isa, count))
            for build, config in configs.items():
                # every tuned:N budget reads the graph best-of:16 does (the same design-
                # space draws): one lowering serves them all
                source = f"best-of:{BEST_OF_SCHEDULES}" if config.kind == "tuned" else build
                key = (json.dumps(spec.target_dict(), sort_keys=True), source)
                if key not in lowered:
                    try:
                        lowered[key] = lower_for_prediction(onnx_path, spec, source,
                                                            input_shapes)
                    except GnnperfError as exc:
                        lowered[key] = exc
                if isinstance(lowered[key], GnnperfError):
                    skipped[f"{build} @ {isa}/{count}t"] = one_line(lowered[key])
                    continue
                graph = replace(lowered[key], build=build)
                if config.searched:  # described by its workloads: one hash per workload
                    tunable |= {n.struct_hash for n in graph.nodes if n.kind == "tir"}
                items.append((graph, spec))
                keys.append((isa, count, build, spec))
    if not items:
        raise GnnperfError("no build could be lowered for this model: " +
                           "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    predictions: list[Prediction] = predictor.predict_graphs(items)
    costs = tuning_stats(root) if any(c.kind == "tuned" for c in configs.values()) else {}
    rows = []
    for (isa, count, build, spec), p in zip(keys, predictions, strict=True):
        row = AdviceRow(isa, count, build, p.latency_ms, p.low_ms, p.high_ms,
                        warnings=list(p.warnings))
        config = configs[build]
        if config.kind == "tuned":
            per_workload, source = _cost_at(costs, spec, config.trials)
            if per_workload is not None:
                row.tuning_minutes = per_workload * len(tunable)
                row.tuning_measured_on = source
        rows.append(row)
    by_config = {(r.isa, r.threads, configs[r.build].kind): r for r in rows}
    for r in rows:
        default = by_config.get((r.isa, r.threads, "default"))
        sampled = by_config.get((r.isa, r.threads, "sampled"))
        r.over_default = default.latency_ms / r.latency_ms if default else None
        if sampled and not r.build.startswith("sampled"):
            r.over_sampled = sampled.latency_ms / r.latency_ms
    return Advice(str(onnx_path), rows, skipped, len(tunable),
                  time.perf_counter() - start)


def _at(base: HardwareSpec, isa: str, threads: int) -> HardwareSpec | str:
    """``base`` at another ISA and thread count: this machine's id (its figures are
    measured, or cached, per ISA and threads) or, for a described machine, the same."""
    if base.host == "local":
        return f"local/{isa}/{threads}t"
    if (isa, threads) == (base.isa, base.threads):
        return base
    raise HardwareError(f"{base.hw_id} describes one ISA and thread count: advise on "
                        "another machine only at its own (or advise on 'local')")


def _cost_at(costs: TuningStats, spec: HardwareSpec, trials: int
             ) -> tuple[float | None, str]:
    """Median minutes per workload for a ``trials`` search on ``spec``: measured on its own
    CPU, ISA and threads when tuned there, else on hardware at the same thread count, else
    anywhere (the source says which)."""
    def held(hw_id: str) -> float | None:
        entry = costs.get(hw_id, {}).get("by_budget", {}).get(str(trials))
        return None if entry is None else float(entry["minutes_per_workload"])

    order = sorted(costs, key=lambda h: (h != spec.record_hw_id,
                                         not h.endswith(f"/{spec.threads}t"), h))
    for hw_id in order:
        minutes = held(hw_id)
        if minutes is not None:
            return minutes, hw_id
    return None, ""
