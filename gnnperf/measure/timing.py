"""Timing primitives, used in a local worker and against RPC sessions alike."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gnnperf.measure.results import LatencyStats


def make_inputs(
    inputs: Mapping[str, tuple[Sequence[int], str]], seed: int = 0, int_high: int = 16
) -> list[np.ndarray]:
    """Deterministic example inputs: normal floats, small non-negative integers (token ids)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in inputs.values():
        if dtype.startswith("float"):
            arrays.append(rng.standard_normal(tuple(shape)).astype(dtype))
        elif dtype == "bool":
            arrays.append(rng.integers(0, 2, tuple(shape)).astype(bool))
        else:
            arrays.append(rng.integers(0, int_high, tuple(shape)).astype(dtype))
    return arrays


# -- timing primitives (used locally in the worker and against RPC sessions) ----------------


def time_whole_model(lib: Any, dev: Any, arrays: Sequence[np.ndarray], s: Mapping[str, Any],
                     between: Callable[[], None] | None = None) -> list[float]:
    """Samples (ms) of whole-model runs of ``main`` on ``dev``, after warm-up.

    With ``between`` (a round of the reference kernels), the samples are taken in
    ``reference_blocks`` blocks, and ``between`` runs before each block and after the
    last, so the machine's state is measured interleaved with the label.
    """
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(lib, dev)
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    start = time.perf_counter()
    for _ in range(max(1, int(s["warmup"]))):
        vm["main"](*args)
    per_run_ms = (time.perf_counter() - start) * 1e3 / max(1, int(s["warmup"]))
    # Long models get fewer samples (never fewer than 5) so one label stays within budget.
    repeat = int(s["repeat"])
    if per_run_ms * repeat > float(s["budget_ms"]):
        repeat = max(5, int(float(s["budget_ms"]) / per_run_ms))
    blocks = max(1, min(repeat, int(s.get("reference_blocks", 1)))) if between else 1
    timer = vm.time_evaluator(
        "main", dev, number=1, repeat=-(-repeat // blocks), min_repeat_ms=int(s["min_repeat_ms"])
    )
    samples: list[float] = []
    for _ in range(blocks):
        if between is not None:
            between()
        samples += [float(r) * 1e3 for r in timer(*args).results]
    if between is not None:
        between()
    return samples


def capture_kernel_calls(lib: Any, dev: Any, arrays: Sequence[np.ndarray]
                         ) -> list[tuple[str, list[Any]]]:
    """(name, argument copies) of every kernel call of one VM run, in execution order."""
    import tvm
    from tvm import relax

    from gnnperf.features import BOOKKEEPING_BUILTINS

    vm = relax.VirtualMachine(lib, dev)
    calls: list[tuple[str, list[Any]]] = []

    def record(func: Any, name: str, before_run: bool, ret: Any, *args: Any) -> int:
        if before_run and name not in BOOKKEEPING_BUILTINS:
            copies = [a.numpy() if isinstance(a, tvm.runtime.Tensor) else a for a in args]
            calls.append((name, copies))
        return 0

    vm.set_instrument(record)
    vm["main"](*[tvm.runtime.tensor(a, dev) for a in arrays])
    return calls


def time_kernel_calls(kernels: Any, dev: Any, calls: Sequence[tuple[str, list[Any]]],
                      s: Mapping[str, Any], upload: Any = None, get_func: Any = None,
                      guard: Callable[[Callable[[], list[float]]],
                                      tuple[list[float], float, int]] | None = None,
                      ) -> list[dict[str, Any]]:
    """Time each captured call on its own arguments.

    ``upload`` maps numpy arrays to the device and ``get_func`` finds a builtin by name;
    both default to this process (an RPC session passes its own). ``guard`` (see
    :func:`timed_on_quiet_host`) repeats a kernel's timing while the host is slowed.
    """
    import tvm

    to_dev = upload or (lambda a: tvm.runtime.tensor(a, dev))
    get_func = get_func or tvm.get_global_func
    evaluators: dict[str, Any] = {}
    out = []
    for name, args in calls:
        dev_args = [to_dev(a) if isinstance(a, np.ndarray) else a for a in args]
        if name.startswith("vm.builtin."):
            func = get_func(name)

            def run(func: Any = func, dev_args: list[Any] = dev_args) -> list[float]:
                return _time_packed(func, dev_args, int(s["kernel_repeat"]))
        else:
            if name not in evaluators:
                evaluators[name] = kernels.time_evaluator(
                    name, dev, number=1, repeat=int(s["kernel_repeat"]),
                    min_repeat_ms=int(s["kernel_min_repeat_ms"]),
                )

            def run(ev: Any = evaluators[name], dev_args: list[Any] = dev_args) -> list[float]:
                return [float(r) * 1e3 for r in ev(*dev_args).results]
        slowdown: float | None = None
        if guard is None:
            samples = run()
        else:
            samples, slowdown, _ = guard(run)
        stats = LatencyStats.from_samples(samples)
        out.append({"name": name, "median_ms": stats.median_ms, "cv": stats.cv,
                    "slowdown": slowdown})
    return out


def _time_packed(func: Any, args: Sequence[Any], repeat: int, calls: int = 200) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            func(*args)
        samples.append((time.perf_counter() - start) / calls * 1e3)
    return samples
