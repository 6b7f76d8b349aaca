"""Kernels timed alone: many candidate schedules of one workload, on the model's own data.

The kernel dataset measures each workload under many schedules. Compiling every
candidate into its own library would cost more than timing it, so all candidates of
a workload are compiled into one library of PrimFuncs and timed one after another in
a measurement worker, in a random order, on the argument tensors that the kernel
received inside a real run of its model (value-dependent kernels such as ``erf``
mislead on arbitrary data). The reference kernels of measurement v2 are timed in
rounds between the candidates, so every timing carries the machine's state.

Two worker requests serve this (here, in the worker): ``capture`` (run a compiled model
once, instrumented, and save the first call's arguments of each kernel) and
``time_funcs`` (time named PrimFuncs of a library on saved arguments). The parent's
side is :func:`gnnperf.measure.local.capture_kernel_inputs` and
:func:`gnnperf.measure.local.time_funcs`.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.measure.reference import ReferenceSuite
from gnnperf.measure.timing import capture_kernel_calls

#: candidates timed between two rounds of the reference kernels
CANDIDATES_PER_ROUND = 4

Guard = Callable[[Callable[[], list[float]]], tuple[list[float], float, int]]

#: longest kernel name kept whole in its argument file's name: file systems cap a name
#: at 255 bytes, and a fused chain of 20+ ``expand_dims`` (``tf-mamba``) passes that
MAX_NAME_BYTES = 200


def args_file_name(kernel: str) -> str:
    """The file holding ``kernel``'s saved arguments: ``<kernel>.npz``, or for a name too
    long for a file system, its first characters and a digest of the whole name."""
    if len(kernel.encode()) <= MAX_NAME_BYTES:
        return f"{kernel}.npz"
    digest = hashlib.sha256(kernel.encode()).hexdigest()[:16]
    return f"{kernel.encode()[:MAX_NAME_BYTES - 17].decode(errors='ignore')}-{digest}.npz"


# -- worker side ----------------------------------------------------------------------------


def serve_capture(req: Mapping[str, Any], lib: Any, dev: Any, arrays: Sequence[np.ndarray]
                  ) -> dict[str, Any]:
    """Run the model once and save, per TIR kernel, its first call's arguments (arrays
    ``arg0..argN``, in ``<out>/``:func:`args_file_name`); builtins are not kernels here.
    Replies with each saved kernel's file, so the parent never rebuilds the name."""
    out = Path(req["out"])
    out.mkdir(parents=True, exist_ok=True)
    saved: dict[str, str] = {}
    for name, args in capture_kernel_calls(lib, dev, arrays):
        if name.startswith("vm.builtin.") or name in saved:
            continue
        if not all(isinstance(a, np.ndarray) for a in args):
            continue  # scalar arguments (shape values): not a tensor kernel we can replay
        path = out / args_file_name(name)
        tmp = path.with_name(f".{path.stem}.tmp.npz")
        np.savez(tmp, **{f"arg{i}": a for i, a in enumerate(args)})
        os.replace(tmp, path)
        saved[name] = str(path)
    return {"kernels": saved}


def serve_time_funcs(req: Mapping[str, Any], guard: Guard, suite: ReferenceSuite | None
                     ) -> dict[str, Any]:
    """Time each named PrimFunc of ``req["lib"]`` on the arguments saved in its file.

    Output buffers are overwritten by every call, so one set of arrays serves all
    candidates of a workload. Candidates run in a random order, with a round of the
    reference kernels before the first, after every :data:`CANDIDATES_PER_ROUND`
    and after the last.
    """
    import tvm

    s = req["settings"]
    dev = tvm.cpu()
    lib = tvm.runtime.load_module(req["lib"])
    args_cache: dict[str, list[Any]] = {}
    names = list(req["funcs"])
    random.Random(req.get("seed")).shuffle(names)
    rounds: list[dict[str, float]] = []
    timings: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        if suite is not None and i % CANDIDATES_PER_ROUND == 0:
            rounds.append(suite.round())
        path = req["funcs"][name]
        if path not in args_cache:
            with np.load(path) as data:
                args_cache[path] = [tvm.runtime.tensor(data[f"arg{k}"], dev)
                                    for k in range(len(data.files))]
        timer = lib.time_evaluator(name, dev, number=1, repeat=int(s["kernel_repeat"]),
                                   min_repeat_ms=int(s["kernel_min_repeat_ms"]))

        def run(timer: Any = timer, args: list[Any] = args_cache[path]) -> list[float]:
            return [float(r) * 1e3 for r in timer(*args).results]

        run()  # warm-up: first call pages the code and data in
        samples, slowdown, tries = guard(run)
        timings[name] = {"samples_ms": samples, "slowdown": slowdown, "tries": tries}
    if suite is not None:
        rounds.append(suite.round())
    return {"timings": timings, "reference_rounds": rounds}
