"""gnnperf: predict the latency of an ONNX model on a CPU without running it."""

from __future__ import annotations

__version__ = "0.1.0"
