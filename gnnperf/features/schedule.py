"""What a schedule decided, read from its MetaSchedule trace, and how those decisions meet
the hardware.

The scheduled TIR's own features (:mod:`.analyses`) describe the program that results;
these describe the *choices* behind it, in the form MetaSchedule records them
(``Trace.as_json()``: instructions and the decisions of its sampling instructions):

- tiling: the factors ``SamplePerfectTile`` drew, by level, for spatial loops (4 levels in
  the CPU rule's ``SSRSRS`` structure) and reduction loops (2 levels);
- the parallel, vectorize and unroll annotations and the compute-at choices;
- the same choices against the machine: the innermost spatial tile modulo the SIMD width
  (a tail is lanes wasted), the parallel extent against the threads (a remainder is a
  thread idle in the last round), and the output tile's bytes against L1 and L2.

An unscheduled kernel has an empty trace and all zeros but ``unscheduled``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gnnperf.features.schema import (
    COUNTED_INSTRUCTIONS,
    REDUCTION_LEVELS,
    SCHEDULE,
    SPATIAL_LEVELS,
)

_ANNOTATIONS = {"meta_schedule.parallel": "parallel", "meta_schedule.vectorize": "vectorize",
                "pragma_auto_unroll_max_step": "unroll"}


def _log2(x: float) -> float:
    return math.log2(max(float(x), 1.0))


def schedule_feature_vector(trace_json: Sequence[Any] | None, *, simd_width: int, threads: int,
                            l1d_kb: float, l2_kb: float, parallel_extent: float,
                            dtype_bytes: int = 4) -> list[float]:
    """The features of :data:`SCHEDULE` for one schedule.

    ``trace_json`` is ``Trace.as_json()`` (``[instructions, decisions]``; None or empty for
    an unscheduled kernel); ``parallel_extent`` the scheduled TIR's (see
    :func:`.analyses.loop_features`), since fusing loops before ``Parallel`` is a
    post-processing step the decisions alone do not give.
    """
    insts: list[Any] = list(trace_json[0]) if trace_json else []
    if not insts:
        return [1.0] + [0.0] * (len(SCHEDULE) - 1)
    decisions: Mapping[int, Any] = {int(i): d for i, d in trace_json[1]}
    spatial: list[list[int]] = []
    reduction: list[list[int]] = []
    annotated = {"parallel": 0.0, "vectorize": 0.0, "unroll": 0.0}
    at_root = inlined = at_loop = 0
    counts = dict.fromkeys(COUNTED_INSTRUCTIONS, 0)
    for index, (kind, inputs, attrs, _outputs) in enumerate(insts):
        if kind in counts:
            counts[kind] += 1
        if kind == "SamplePerfectTile" and index in decisions:
            factors = [int(f) for f in decisions[index]]
            (spatial if len(factors) == SPATIAL_LEVELS else reduction).append(factors)
        elif kind == "SampleComputeLocation" and index in decisions:
            loc = int(decisions[index])
            at_root += loc == -1
            inlined += loc == -2
            at_loop += loc >= 0
        elif kind == "Annotate" and attrs and attrs[0] in _ANNOTATIONS:
            value = inputs[1] if len(inputs) > 1 else None
            if isinstance(value, int | float):
                key = _ANNOTATIONS[attrs[0]]
                annotated[key] = max(annotated[key], float(value))

    def level_sums(tiles: list[list[int]], levels: int) -> list[float]:
        return [sum(_log2(t[k]) for t in tiles if len(t) == levels) for k in range(levels)]

    spatial_levels = level_sums(spatial, SPATIAL_LEVELS)
    reduction_levels = level_sums([t for t in reduction if len(t) == REDUCTION_LEVELS],
                                  REDUCTION_LEVELS)
    # the last spatial loop is the one the rules vectorize
    inner = spatial[-1][-1] if spatial else 1
    tail = (-inner) % simd_width
    # the output tile each thread's outer loop iteration keeps live: levels 1.. (L2) and
    # 2.. (L1) of every spatial tile
    tile_l2 = dtype_bytes * 2.0 ** sum(spatial_levels[1:])
    tile_l1 = dtype_bytes * 2.0 ** sum(spatial_levels[2:])
    threads = max(threads, 1)
    parallel = max(parallel_extent, 1.0)
    rounds = math.ceil(parallel / threads)
    return [
        0.0,
        float(len(spatial)),
        float(len(reduction)),
        *spatial_levels,
        *reduction_levels,
        _log2(inner),
        1.0 if spatial and tail == 0 else 0.0,
        tail / (inner + tail) if spatial else 0.0,
        math.log2(tile_l1 / (l1d_kb * 1024.0)) if spatial else 0.0,
        math.log2(tile_l2 / (l2_kb * 1024.0)) if spatial else 0.0,
        _log2(1.0 + annotated["unroll"]),
        _log2(annotated["parallel"]),
        _log2(annotated["vectorize"]),
        float(at_root),
        float(inlined),
        float(at_loop),
        math.log2(parallel / threads),
        1.0 - parallel / (rounds * threads),
        1.0 if parallel < threads else 0.0,
        *(float(counts[name]) for name in COUNTED_INSTRUCTIONS),
    ]
