"""ONNX export of a spec and the hash that identifies a measured graph."""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

import onnx
import torch

from gnnperf.atomic import write_bytes
from gnnperf.zoo.build import build_model
from gnnperf.zoo.inputs import example_inputs
from gnnperf.zoo.spec import ModelSpec

ONNX_OPSET = 17


def export_onnx(spec: ModelSpec, path: str | Path | None = None) -> onnx.ModelProto:
    """Export ``spec`` to ONNX (opset 17, TorchScript exporter, static shapes, folded constants).

    The TorchScript exporter is used because its graphs are what TVM's Relax frontend imports
    best.  If ``path`` is given the file is written atomically (temp file + ``os.replace``) so a
    crashed worker never leaves a truncated model behind.
    """
    model = build_model(spec)
    args = example_inputs(spec)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", UserWarning)
        with torch.no_grad():
            torch.onnx.export(
                model,
                args,
                buf,
                dynamo=False,
                opset_version=ONNX_OPSET,
                input_names=list(spec.inputs),
                output_names=["output"],
                do_constant_folding=True,
            )
    proto = onnx.load_from_string(buf.getvalue())
    if path is not None:
        write_bytes(path, proto.SerializeToString())
    return proto


def onnx_sha256(model: onnx.ModelProto) -> str:
    """SHA-256 of the deterministic serialisation: the identity of a measured graph."""
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()
