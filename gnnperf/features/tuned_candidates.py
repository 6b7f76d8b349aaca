"""A searched kernel's candidate schedules, drawn without measuring them.

The ``best-of:S`` build runs each kernel with the fastest of the S schedules that seeds
``0..S-1`` draw from MetaSchedule's design space (:mod:`gnnperf.lowering.schedules`). Which of them
is fastest takes measuring; what they are does not. A prediction for a model nobody
tuned draws them here and describes each as a kernel record stores it (analyses and
trace), so the kernel cost model can predict the best one instead of guessing a searched
time from the unscheduled kernel alone.
"""

from __future__ import annotations

from typing import Any

from gnnperf.features.analyses import kernel_statics
from gnnperf.features.extract import extract_graph
from gnnperf.features.graph import KernelGraph
from gnnperf.lowering.build_config import BEST_OF_SCHEDULES
from gnnperf.lowering.pipeline import LoweredModel
from gnnperf.lowering.schedules import cached_sampled_schedule, kernel_hash


def kernel_candidates(func: Any, target: Any, schedules: int = BEST_OF_SCHEDULES
                      ) -> list[dict[str, Any]]:
    """The distinct schedules seeds ``0..schedules-1`` draw for ``func`` (an unscheduled
    kernel), as :attr:`~gnnperf.features.KernelNode.candidates`; seeds whose draw fails
    are skipped, as the kernel collector skips them."""
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for seed in range(schedules):
        try:
            drawn = cached_sampled_schedule(func, target, seed)
        except Exception:  # TVM raises its own error types from C++; the collector skips too
            continue
        if drawn is None or (program := kernel_hash(drawn.func)) in seen:
            continue
        seen.add(program)
        out.append({"features": kernel_statics(drawn.func, target).candidate_features(),
                    "trace": drawn.trace})
    return out


def graph_for_prediction(lowered: LoweredModel) -> KernelGraph:
    """:func:`extract_graph`, and for a searched build each kernel's candidates: the S a
    ``best-of:S`` build picks from; for ``tuned:N``, the :data:`BEST_OF_SCHEDULES` first
    draws of the design space the search starts from (as its training records read them:
    the kernel dataset's sampled schedules), whatever N is."""
    graph = extract_graph(lowered)
    if not lowered.build.searched:
        return graph
    schedules = lowered.build.trials if lowered.build.kind == "best-of" else BEST_OF_SCHEDULES
    return graph.with_candidates(
        lambda n: kernel_candidates(lowered.unscheduled[n.name], lowered.target, schedules)
        if n.name in lowered.unscheduled else [])
