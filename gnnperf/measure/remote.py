"""Measuring a compiled library on a board reached through a TVM RPC tracker."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gnnperf.errors import MeasurementError, one_line
from gnnperf.measure.results import KernelTiming, LatencyStats, Measurement, MeasureSettings
from gnnperf.measure.timing import capture_kernel_calls, time_kernel_calls, time_whole_model

# -- remote (TVM RPC tracker) ---------------------------------------------------------------


def parse_rpc(text: str) -> tuple[str, int, str]:
    """``HOST:PORT:KEY`` → (host, port, key)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[0] or not parts[2]:
        raise MeasurementError(f"--rpc wants HOST:PORT:KEY (tracker address and key), got '{text}'")
    return parts[0], int(parts[1]), parts[2]


def measure_remote(
    lib_path: str | os.PathLike[str],
    arrays: Sequence[np.ndarray],
    rpc: str,
    *,
    kernels_path: str | os.PathLike[str] | None = None,
    settings: MeasureSettings | None = None,
    session_timeout_s: float = 60.0,
    connect_timeout_s: float = 10.0,
) -> Measurement:
    """Measure a compiled library on a board reached through a TVM RPC tracker.

    With ``kernels_path`` (see :func:`gnnperf.lowering.pipeline.export_kernel_library`) every
    kernel is timed too: its arguments are captured by running the library once
    locally (values do not depend on the device) and uploaded to the board. A tracker
    that does not answer within ``connect_timeout_s`` is an error at once (TVM's own
    client retries for a minute before it says so).
    """
    import tvm
    from tvm import rpc as tvm_rpc

    settings = settings or MeasureSettings()
    host, port, key = parse_rpc(rpc)
    started = time.time()
    try:
        socket.create_connection((host, port), timeout=connect_timeout_s).close()
    except OSError as exc:
        raise MeasurementError(f"cannot reach RPC tracker {host}:{port} key '{key}': "
                               f"{one_line(exc)}") from None
    try:
        tracker = tvm_rpc.connect_tracker(host, port)
        remote = tracker.request(key, priority=1, session_timeout=session_timeout_s)
    except Exception as exc:
        raise MeasurementError(f"cannot reach RPC tracker {host}:{port} key '{key}': {exc}"
                               ) from None
    try:
        lib_path = Path(lib_path)
        remote.upload(str(lib_path))
        rlib = remote.load_module(lib_path.name)
        dev = remote.cpu()
        samples = time_whole_model(rlib, dev, arrays, settings.to_dict())
        kernels = None
        if kernels_path is not None:
            kernels_path = Path(kernels_path)
            remote.upload(str(kernels_path))
            rkernels = remote.load_module(kernels_path.name)
            local = tvm.runtime.load_module(str(lib_path))
            calls = capture_kernel_calls(local, tvm.cpu(), arrays)
            timed = time_kernel_calls(rkernels, dev, calls, settings.to_dict(),
                                      upload=lambda a: tvm.runtime.tensor(a, dev),
                                      get_func=remote.get_function)
            kernels = [KernelTiming(**k) for k in timed]
        threads = int(remote.get_function("runtime.NumThreads")())
    except MeasurementError:
        raise
    except Exception as exc:
        raise MeasurementError(f"remote measurement failed: {one_line(exc)}") from None
    return Measurement(
        whole=LatencyStats.from_samples(samples),
        threads=threads,
        kernels=kernels,
        device=f"rpc:{key}",
        settings=settings.to_dict(),
        started_at=started,
        duration_s=time.time() - started,
    )
