"""The line kinds of the dataset's shards, typed.

Why TypedDicts and not classes: a shard line is read by the hundred thousand (215k kernel
measurements, 5k records each with its graph) and a reader touches a few fields of each,
so a line stays the dict orjson gives, at no conversion cost; these declarations give
each kind's fields to the type checker and to the reader. Every line also carries the
writer's ``schema`` and ``crc`` (:class:`gnnperf.store.shards.ShardWriter`). A field
added later is ``NotRequired``: older lines lack it and readers use ``.get``.

Whole-model shards (``datasets/shards``) hold ``record``, ``remeasure``, ``failure``,
``graph``, ``onnx_graph`` and ``graph_traces`` lines; kernel shards (``datasets/kernels``)
hold the ``kernel_*`` lines, whose ``ms_workload`` and ``ms_record`` (``ms_records``) are
MetaSchedule's own ``Workload.as_json()`` and ``TuningRecord.as_json()``.
"""

from __future__ import annotations

from typing import Any, Literal

# NotRequired is typing's from Python 3.11; typing_extensions has it on 3.10 too
from typing_extensions import NotRequired, TypedDict


class Timing(TypedDict):
    """A label: median and spread over the repeats after warm-up."""

    median_ms: float
    samples_ms: NotRequired[list[float]]
    cv: NotRequired[float]
    iqr_ms: NotRequired[float]


#: reference kernel name (``gemm``, ``stream``, ``chain``) → its timing beside the label
Reference = dict[str, Timing]


class HardwareFields(TypedDict):
    """:meth:`gnnperf.hardware.spec.HardwareSpec.to_dict`, as a record stores it."""

    isa: str
    threads: int
    cpu_model: str
    cores: int
    peak_gflops: float
    mem_bw_gbs: float
    l1d_kb: int
    l2_kb: int
    l3_kb: int
    host: NotRequired[str]
    extra: NotRequired[dict[str, Any]]
    signature: NotRequired[dict[str, Any] | None]
    reference_ms: NotRequired[dict[str, float] | None]
    serial: NotRequired[dict[str, Any] | None]


class ModelFields(TypedDict):
    """:meth:`gnnperf.zoo.ModelSpec.to_dict`: a zoo model, a pure function of these."""

    family: str
    seed: int
    hparams: dict[str, Any]
    inputs: dict[str, list[Any]]  # input name → [shape, dtype]


class RecordLine(TypedDict):
    """One whole-model label: a (model, hardware, build) key, its kernel graph and timings."""

    kind: Literal["record"]
    key: str
    model_id: str
    model: ModelFields
    hw_id: str
    hw: HardwareFields
    build: str
    graph_id: str
    whole: Timing
    created_at: float
    onnx_graph_id: NotRequired[str]
    onnx_sha256: NotRequired[str]
    kernels_ms: NotRequired[list[float] | None]
    kernels_cv: NotRequired[list[float] | None]
    kernel_sum_ms: NotRequired[float | None]
    other_load: NotRequired[float]
    slowdown: NotRequired[float | None]
    slow_tries: NotRequired[int]
    kernels_slowdown: NotRequired[float | None]
    reference: NotRequired[Reference | None]
    attempts: NotRequired[int]
    device: NotRequired[str]
    settings: NotRequired[dict[str, Any]]
    timings: NotRequired[dict[str, float]]
    versions: NotRequired[dict[str, str]]
    #: a ``best-of:S`` record: S and the rule that picked each kernel's schedule
    best_of: NotRequired[dict[str, Any]]
    #: a ``tuned:N`` record: the search, its seed and N
    tuning: NotRequired[dict[str, Any]]
    schema: NotRequired[int]
    crc: NotRequired[str]


class RemeasureLine(TypedDict):
    """A record measured again (A/A noise floor, ``datasets/noise``)."""

    kind: Literal["remeasure"]
    key: str
    model_id: str
    whole: Timing
    created_at: float
    first_created_at: NotRequired[float]
    scheduled_kernels: NotRequired[int]
    other_load: NotRequired[float]
    attempts: NotRequired[int]
    slowdown: NotRequired[float | None]
    slow_tries: NotRequired[int]
    reference: NotRequired[Reference | None]


class FailureLine(TypedDict):
    """A key that could not be measured: the stage that failed and why."""

    kind: Literal["failure"]
    key: str
    model_id: str
    model: ModelFields
    stage: str
    reason: str
    created_at: float


class GraphLine(TypedDict):
    """A kernel graph (:meth:`gnnperf.features.KernelGraph.to_dict`), content-addressed."""

    kind: Literal["graph"]
    graph_id: str
    graph: dict[str, Any]


class OnnxGraphLine(TypedDict):
    """A model's unfused operator graph, content-addressed."""

    kind: Literal["onnx_graph"]
    graph_id: str
    model_id: str
    graph: dict[str, Any]


class GraphTracesLine(TypedDict):
    """MetaSchedule traces added later to a stored ``sampled`` graph's kernels."""

    kind: Literal["graph_traces"]
    graph_id: str
    traces: list[Any]


class KernelWorkloadLine(TypedDict):
    """A kernel workload, first seen in ``first_model``."""

    kind: Literal["kernel_workload"]
    workload_id: str
    name: str
    first_model: str
    ms_workload: Any


class KernelModelLine(TypedDict):
    """Which workload each kernel of a model is, at one ISA."""

    kind: Literal["kernel_model"]
    model_id: str
    model: ModelFields
    isa: str
    kernels: dict[str, str]


class KernelRecordLine(TypedDict):
    """One schedule of one workload timed alone on one hardware setting."""

    kind: Literal["kernel_record"]
    key: str
    workload_id: str
    hw_id: str
    hw: HardwareFields
    schedule: str
    seeds: list[int]
    ms_record: Any
    latency: Timing
    model_id: str
    kernel: str
    created_at: float
    slowdown: NotRequired[float | None]
    tries: NotRequired[int]
    reference: NotRequired[Reference | None]
    other_load: NotRequired[float]
    attempts: NotRequired[int]
    gflop: NotRequired[float]
    features: NotRequired[dict[str, Any]]
    settings: NotRequired[dict[str, Any]]
    versions: NotRequired[dict[str, str]]


class KernelDoneLine(TypedDict):
    """A (workload, hardware) pair whose schedules are all timed."""

    kind: Literal["kernel_done"]
    key: str
    candidates: int
    schedules_drawn: int
    failed_seeds: NotRequired[dict[str, str]]
    dropped: NotRequired[dict[str, str]]
    unscheduled_timed: NotRequired[bool]


#: a :class:`KernelFailureLine`'s stage for a kernel that its model never calls with tensor
#: arguments in the captured run: nothing to time or schedule, so it closes its pair
NOT_EXECUTED = "not-executed"


class KernelFailureLine(TypedDict):
    """A (workload, hardware) pair that could not be timed."""

    kind: Literal["kernel_failure"]
    key: str
    workload_id: str
    hw_id: str
    stage: str
    reason: str
    created_at: float


class KernelTuningLine(TypedDict):
    """One workload tuned by MetaSchedule's evolutionary search on one hardware setting
    (:class:`gnnperf.collect.kernels.tuning_run.TuningRun`): every trial in the order the search
    measured it, with MetaSchedule's timing of it (its runner's, not measurement v2)."""

    kind: Literal["kernel_tuning"]
    key: str
    workload_id: str
    hw_id: str
    hw: HardwareFields
    trials: int
    seed: int
    strategy: str
    runner: dict[str, int]
    ms_workload: Any
    ms_records: list[Any]
    #: mean run time of each trial (ms); null for a candidate that failed to build or run
    run_ms: list[float | None]
    minutes: float
    model_id: str
    kernel: str
    versions: dict[str, str]
    created_at: float
    #: the machine's load from other processes before and after the run
    other_load: NotRequired[list[float]]


class KernelTuningFailureLine(TypedDict):
    """A workload that could not be tuned on one hardware setting."""

    kind: Literal["kernel_tuning_failure"]
    key: str
    workload_id: str
    hw_id: str
    trials: int
    stage: str
    reason: str
    created_at: float


class KernelRemeasureLine(TypedDict):
    """A kernel record timed again (its A/A noise floor)."""

    kind: Literal["kernel_remeasure"]
    key: str
    latency: Timing
    created_at: float
    first_created_at: NotRequired[float]
    slowdown: NotRequired[float | None]
    reference: NotRequired[Reference | None]
    other_load: NotRequired[float]
