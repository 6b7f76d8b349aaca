"""The feature schema: the name and order of every column an encoder writes, in one place.

Three encoders read it: a kernel graph's nodes for the GNN (:func:`feature_names`: kernel
⊕ build ⊕ hardware), a (kernel, schedule, hardware) row for the kernel model
(:func:`kernel_feature_names`), and the hardware vector both end with (:data:`HARDWARE`).
A checkpoint stores the column names it was trained on and is mapped onto these on load,
so a column may be appended without retraining; :data:`SCHEMA_VERSION` changes, and
:func:`schema_digest` with it, whenever a column is added, removed or changes meaning.
"""

from __future__ import annotations

import hashlib
import math
from functools import lru_cache

from gnnperf.features.vocabulary import ANALYSES, MS_FEATURE_DIM, OP_PATTERNS
from gnnperf.lowering.build_config import BuildConfig

SCHEMA_VERSION = 2

#: coarse classes of a kernel's anchor operator (one-hot)
OP_CLASSES = ("conv", "matmul", "pool", "reduce", "softmax", "norm", "elementwise",
              "concat", "layout", "gather", "builtin", "other")
#: the loop-nest figures of a kernel (:func:`gnnperf.features.analyses.loop_features`)
LOOP_KEYS = ("n_blocks", "n_loops", "max_depth", "parallel_extent", "vector_lanes",
             "unroll_extent", "auto_unroll_max_step", "reduction_size", "spatial_size",
             "reduce_blocks")
#: TVM's operator patterns by name (one-hot)
PATTERN_NAMES = tuple(OP_PATTERNS.values())
#: node columns that describe a kernel's place in its model, not the kernel: the kernel
#: model, which sees workloads out of any model, leaves them out (with the pattern)
GRAPH_ONLY = ("log_param_bytes", "log_input_bytes", "is_first", "is_last")

#: schedule instructions whose count is a feature: structural choices of the schedule rules
COUNTED_INSTRUCTIONS = ("ComputeInline", "ReverseComputeInline", "ComputeAt",
                        "ReverseComputeAt", "RFactor", "CacheRead", "CacheWrite",
                        "DecomposeReduction", "Reorder", "Parallel", "Vectorize", "Unroll")
SPATIAL_LEVELS = 4
REDUCTION_LEVELS = 2
#: a schedule's decisions, read from its MetaSchedule trace (:mod:`gnnperf.features.schedule`)
SCHEDULE: tuple[str, ...] = (
    "sched_unscheduled",
    "sched_n_spatial_tiles",
    "sched_n_reduction_tiles",
    *(f"sched_log2_spatial_level{k}" for k in range(SPATIAL_LEVELS)),
    *(f"sched_log2_reduction_level{k}" for k in range(REDUCTION_LEVELS)),
    "sched_log2_inner_spatial",
    "sched_inner_vector_aligned",
    "sched_inner_tail_fraction",
    "sched_log2_output_tile_over_l1",
    "sched_log2_output_tile_over_l2",
    "sched_log2_unroll_max_step",
    "sched_log2_parallel_annotation",
    "sched_log2_vectorize_annotation",
    "sched_compute_at_root",
    "sched_compute_inlined",
    "sched_compute_at_loop",
    "sched_log2_parallel_over_threads",
    "sched_parallel_idle_fraction",
    "sched_parallel_below_threads",
    *(f"sched_n_{name}" for name in COUNTED_INSTRUCTIONS),
)

#: :meth:`gnnperf.hardware.spec.HardwareSpec.feature_vector`, in this order
HARDWARE: tuple[str, ...] = (
    "isa_level",
    "simd_width_log2",
    "threads",
    "log2_threads",
    "cores",
    "log2_l1d_kb",
    "log2_l2_kb",
    "log2_l3_kb",
    "log2_peak_gflops",
    "log2_mem_bw_gbs",
    "log2_peak_gflops_per_thread",
    "log2_ridge_flops_per_byte",
    # what the machine does (measurement v2): the reference kernels' median times, so an
    # unseen CPU enters by running the suite rather than by being named
    "log2_ref_gemm_ms",
    "log2_ref_stream_ms",
    "log2_ref_chain_ms",
    "ref_missing",
)

#: per build kind, the slot of the one-hot build column it sets on every node (the unfused
#: operator graph, an ablation, has no other way to know the build). ``best-of`` builds set
#: the slot named ``tuned``: that was their name when the shipped estimators learned them
#: (a column keeps its name, or every checkpoint would have to be trained again).
#: ``tuned:N`` builds (MetaSchedule's evolutionary search) set ``evolutionary``, and their
#: budget is :data:`BUDGET_COLUMN`.
BUILD_SLOTS: dict[str, str] = {"default": "default", "dlight": "dlight", "sampled": "sampled",
                               "best-of": "tuned", "tuned": "evolutionary"}
#: log2 of a ``tuned:N`` build's trials per kernel (0 for every other build): the budget
#: is an input, so one estimator predicts any N in the range it trained on
BUDGET_COLUMN = "build_log2_trials"
BUILD: tuple[str, ...] = (*(f"build_{slot}" for slot in BUILD_SLOTS.values()), BUDGET_COLUMN)


def build_vector(build: str | BuildConfig) -> list[float]:
    """``build``'s columns (:data:`BUILD`): its one-hot slot, then its budget."""
    config = BuildConfig.parse(build)
    slot = BUILD_SLOTS[config.kind]  # every kind BuildConfig accepts has one
    budget = math.log2(config.trials) if config.kind == "tuned" else 0.0
    return [1.0 if slot == s else 0.0 for s in BUILD_SLOTS.values()] + [budget]


def node_feature_names() -> list[str]:
    """A kernel node's own columns (:func:`gnnperf.features.encoding.node_feature_vector`);
    a fresh list."""
    return list(_node_feature_names())


@lru_cache(maxsize=1)
def _node_feature_names() -> tuple[str, ...]:
    names = [f"op_{c}" for c in OP_CLASSES] + [f"pattern_{p}" for p in PATTERN_NAMES]
    names += ["log_flops", "log_bytes_read", "log_bytes_written", "log_param_bytes",
              "log_input_bytes", "log_intensity", "n_inputs", "n_outputs", "log_out_elems",
              "n_ops", "is_first", "is_last"]
    names += [f"loop_log_{k}" for k in LOOP_KEYS]
    names += [f"ms_{i}" for i in range(MS_FEATURE_DIM)]
    names += [f"missing_{a}" for a in ANALYSES] + ["schedule_fallback"]
    return tuple(names)


def feature_names() -> list[str]:
    """The GNN's node columns: kernel, build kind, then hardware (hardware always last)."""
    return node_feature_names() + list(BUILD) + [f"hw_{n}" for n in HARDWARE]


def kernel_node_feature_names() -> list[str]:
    """The node columns a kernel has on its own (no pattern: workloads do not keep it)."""
    return list(_kernel_node_feature_names())


@lru_cache(maxsize=1)
def _kernel_node_feature_names() -> tuple[str, ...]:
    return tuple(n for n in _node_feature_names()
                 if n not in GRAPH_ONLY and not n.startswith("pattern_"))


def kernel_feature_names() -> list[str]:
    """The kernel model's columns: kernel, then schedule, then hardware features."""
    return [*kernel_node_feature_names(), *SCHEDULE, *(f"hw_{n}" for n in HARDWARE)]


def schema_digest() -> str:
    """A short hash of the version and every column list: cached encodings keyed by it are
    never read under another schema."""
    text = "|".join([str(SCHEMA_VERSION), *feature_names(), *kernel_feature_names()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]
