"""A zoo of generated model families for latency measurement.

Every model is a pure function of ``(family, seed)``: :func:`sample_spec` draws the
hyperparameters from a NumPy generator seeded by a stable hash of the pair, and
:func:`build_model` constructs a torch module from those hyperparameters alone, with
``torch.manual_seed`` derived from the same pair.  That way a dataset only needs to store the
spec (or just ``family`` and ``seed``) to rebuild the exact ONNX graph that was measured.

The generated families are written in plain torch with static shapes (every reshape uses
Python ints known from the hyperparameters) so TVM's Relax ONNX frontend imports them without
any shape-folding pass.  Sizes are aimed at ~0.2 MFLOP .. ~1.5 GFLOP per inference, because
labels are measured on a 2-core CPU under a tight budget.  The ``hf-*`` entries are real
architectures built from ``transformers`` configs with random weights (nothing is downloaded);
the ``tf-*`` corpus (:mod:`.corpus`) many more; the ``op-*`` operator sweep (:mod:`.operators`)
single operators over their configuration space.

Modules: :mod:`.spec` (ModelSpec, seeded sampling helpers), :mod:`.layers` (shared blocks),
one module per family group (:mod:`.convnets`, :mod:`.depthwise_convnets`, :mod:`.attention`,
:mod:`.nas`, :mod:`.hf`), :mod:`.registry` (the family table), :mod:`.sampling`
(:func:`sample_spec`, :func:`tiny_spec`), :mod:`.flops`, :mod:`.inputs`, :mod:`.build` and
:mod:`.export`.
"""

from __future__ import annotations

from gnnperf.zoo.build import build_model
from gnnperf.zoo.corpus import corpus_order, source_family
from gnnperf.zoo.export import ONNX_OPSET, export_onnx, onnx_sha256
from gnnperf.zoo.flops import estimate_flops
from gnnperf.zoo.inputs import example_inputs
from gnnperf.zoo.registry import CORPUS, FAMILIES, KNOWN_FAMILIES, REAL_ARCHITECTURES, SWEEP
from gnnperf.zoo.sampling import FLOP_MAX, FLOP_MIN, sample_spec, tiny_spec
from gnnperf.zoo.spec import ModelSpec

__all__ = [
    "CORPUS",
    "corpus_order",
    "source_family",
    "FAMILIES",
    "FLOP_MAX",
    "FLOP_MIN",
    "KNOWN_FAMILIES",
    "ONNX_OPSET",
    "REAL_ARCHITECTURES",
    "SWEEP",
    "ModelSpec",
    "build_model",
    "estimate_flops",
    "example_inputs",
    "export_onnx",
    "onnx_sha256",
    "sample_spec",
    "tiny_spec",
]
