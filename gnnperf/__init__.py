"""gnnperf: predict the latency of an ONNX model on a CPU without running it.

    >>> import gnnperf
    >>> result = gnnperf.predict("model.onnx", "local/x86-64-v3/2t", build="sampled:0")
    >>> result.latency_ms, result.low_ms, result.high_ms

Heavy dependencies (TVM, PyTorch) load on first use, so ``import gnnperf`` stays fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["HardwareSpec", "KernelGraph", "Prediction", "errors", "predict", "predict_many"]

_LAZY = {
    "HardwareSpec": ("gnnperf.hardware.spec", "HardwareSpec"),
    "KernelGraph": ("gnnperf.features", "KernelGraph"),
    "Prediction": ("gnnperf.prediction.api", "Prediction"),
    "predict": ("gnnperf.prediction.api", "predict"),
    "predict_many": ("gnnperf.prediction.api", "predict_many"),
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "errors":
        return importlib.import_module("gnnperf.errors")
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'gnnperf' has no attribute '{name}'")
