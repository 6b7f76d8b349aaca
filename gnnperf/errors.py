"""One small exception hierarchy for everything a user can get wrong.

The CLI turns any :class:`GnnperfError` into a one-line message on stderr and
exit code 2, so every raise site must say what was wrong and where.
"""

from __future__ import annotations


class GnnperfError(Exception):
    """Base class of every error gnnperf raises on purpose."""


class ModelLoadError(GnnperfError):
    """The model file is missing, empty, truncated or not ONNX."""


class FrontendError(ModelLoadError):
    """A valid ONNX graph that TVM's Relax ONNX frontend failed to convert."""


class UnsupportedOpError(GnnperfError):
    """The ONNX graph uses an operator TVM's Relax frontend cannot import."""

    def __init__(self, op_type: str, detail: str = "") -> None:
        self.op_type = op_type
        msg = f"unsupported ONNX operator '{op_type}'"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class DynamicShapeError(GnnperfError):
    """A model input has a dynamic dimension and no static override was given."""


class ShapeFoldingError(GnnperfError):
    """A run-time shape computation could not be turned into a constant."""


class LoweringError(GnnperfError):
    """TVM failed to lower or compile the model."""


class BuildConfigError(GnnperfError):
    """An unknown or malformed build configuration string."""


class HardwareError(GnnperfError):
    """An ISA the CPU lacks, a thread count above its cores, a malformed spec."""


class MeasurementError(GnnperfError):
    """A measurement could not be taken (worker crash, RPC failure, timeout)."""


class DatasetError(GnnperfError):
    """A dataset folder or shard is missing or malformed."""


class CheckpointError(GnnperfError):
    """A checkpoint is missing, malformed or does not fit the features."""


class TrainingConfigError(GnnperfError):
    """Training options out of range (epochs, patience, widths, fractions, loss)."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message on one line: the CLI prints exactly one.

    Messages from protobuf and TVM span several lines; when they start with a stack
    (TVM's FFI errors), the message is the last line.
    """
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Traceback"):
        lines = lines[-1:]
    text = " ".join(lines) if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
