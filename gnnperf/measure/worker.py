"""The measurement worker: one process per thread count, serving timing requests.

TVM sizes its thread pool once, at runtime start-up, from ``TVM_NUM_THREADS``, so
each thread count gets its own long-lived process (``python -m gnnperf.measure
--worker``) and compiled libraries are handed to it as files.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from gnnperf.errors import MeasurementError, one_line
from gnnperf.measure.guard import SpeedProbe, timed_on_quiet_host
from gnnperf.measure.kernels import serve_capture, serve_time_funcs
from gnnperf.measure.reference import ReferenceSuite
from gnnperf.measure.timing import capture_kernel_calls, time_kernel_calls, time_whole_model

_REPLY_PREFIX = "@@gnnperf-reply "
T = TypeVar("T")


# -- worker process (one per thread count) --------------------------------------------------


class MeasureWorker:
    """A child process with ``TVM_NUM_THREADS=threads`` that loads libraries and times them."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        env = dict(os.environ, TVM_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "gnnperf.measure", "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
            start_new_session=True,
        )

    def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        if proc.poll() is not None:
            raise MeasurementError(
                f"measurement worker exited with code {proc.returncode}: {self._stderr_tail()}"
            )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(payload) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            raise MeasurementError(
                f"measurement worker is gone: {self._stderr_tail()}") from None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise MeasurementError(f"measurement timed out after {timeout_s:.0f} s")
            ready, _, _ = select.select([proc.stdout], [], [], min(remaining, 1.0))
            if not ready:
                continue
            line = proc.stdout.readline()
            if not line:
                code = proc.wait()
                raise MeasurementError(
                    f"measurement worker died (exit code {code}): {self._stderr_tail()}"
                )
            if line.startswith(_REPLY_PREFIX):
                reply = json.loads(line[len(_REPLY_PREFIX):])
                if "error" in reply:
                    raise MeasurementError(reply["error"])
                return reply

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = [ln for ln in self._stderr.read().splitlines() if ln.strip()]
        return lines[-1] if lines else "no error output"

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        self._stderr.close()

    def __enter__(self) -> MeasureWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WorkerPool:
    """One live worker per thread count, started on first use and again if one died."""

    def __init__(self) -> None:
        self._workers: dict[int, MeasureWorker] = {}

    def get(self, threads: int) -> MeasureWorker:
        worker = self._workers.get(threads)
        if worker is None or worker._proc.poll() is not None:
            worker = self._workers[threads] = MeasureWorker(threads)
        return worker

    def close(self) -> None:
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()


def worker_main() -> None:
    """Serve measurement requests on stdin; one JSON reply line per request."""
    # Replies go to the original stdout; anything else that prints (TVM, numpy) goes to
    # stderr, so the parent's pipe carries exactly one line per request.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import tvm  # noqa: F401  (starts the runtime with this process's TVM_NUM_THREADS)

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            reply = _serve(req)
        except Exception as exc:  # report, never die: the parent decides
            reply = {"error": f"{type(exc).__name__}: {one_line(exc)}"}
        replies.write(_REPLY_PREFIX + json.dumps(reply) + "\n")
        replies.flush()


def _serve(req: dict[str, Any]) -> dict[str, Any]:
    import tvm

    if req.get("reference_only"):  # the machine's state alone (`gnnperf hw`)
        suite = _reference_suite(req["reference_only"])
        assert suite is not None
        return {"reference_rounds": [suite.round() for _ in range(int(req["rounds"]))]}
    if req.get("time_funcs"):  # kernels alone (the kernel dataset)
        s = req["settings"]
        return serve_time_funcs(req, lambda fn: _guarded(fn, s, int(s["kernel_slow_retries"])),
                                _reference_suite(req.get("reference")))
    lib = tvm.runtime.load_module(req["lib"])
    dev = tvm.cpu()
    with np.load(req["inputs"]) as data:
        arrays = [data[f"arg{i}"] for i in range(len(data.files))]
    if req.get("capture"):  # the arguments each kernel sees in a real run
        return serve_capture(req, lib, dev, arrays)
    s = req["settings"]

    def guard(fn: Callable[[], T], retries: int) -> tuple[T, float, int]:
        return _guarded(fn, s, retries)

    suite = _reference_suite(req.get("reference"))

    def whole() -> tuple[list[float], list[dict[str, float]]]:
        rounds: list[dict[str, float]] = []
        between = (lambda: rounds.append(suite.round())) if suite is not None else None
        return time_whole_model(lib, dev, arrays, s, between=between), rounds

    (whole_ms, rounds), slowdown, tries = guard(whole, int(s["slow_retries"]))
    out: dict[str, Any] = {"whole_ms": whole_ms, "whole_slowdown": slowdown,
                           "whole_tries": tries, "reference_rounds": rounds}
    if req.get("per_kernel"):
        calls = capture_kernel_calls(lib, dev, arrays)
        out["kernels"] = time_kernel_calls(
            lib.imports[0], dev, calls, s,
            guard=lambda fn: guard(fn, int(s["kernel_slow_retries"])))
    return out


def _guarded(fn: Callable[[], T], s: dict[str, Any], retries: int) -> tuple[T, float, int]:
    """``fn`` timed on a quiet host (see :func:`timed_on_quiet_host`); one-thread workers
    pin the timing to the quieter CPU."""
    return timed_on_quiet_host(fn, _worker_probe(), float(s["max_slowdown"]), retries,
                               float(s["slow_wait_s"]),
                               pin=os.environ.get("TVM_NUM_THREADS") == "1")


_PROBE: SpeedProbe | None = None
_SUITES: dict[str, ReferenceSuite] = {}


def _reference_suite(library: str | None) -> ReferenceSuite | None:
    """The reference kernels of ``library``, loaded once per worker (None: no suite)."""
    if not library:
        return None
    if library not in _SUITES:
        _SUITES[library] = ReferenceSuite(library)
    return _SUITES[library]


def _worker_probe() -> SpeedProbe:
    """The worker's probe, calibrated once: its best times grow more exact as it lives."""
    global _PROBE
    if _PROBE is None:
        _PROBE = SpeedProbe()
        _PROBE.calibrate()
    return _PROBE
