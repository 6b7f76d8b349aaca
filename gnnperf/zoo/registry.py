"""Which families exist, how each samples and constructs its models, and what they take as
input: the one table the public API dispatches on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from gnnperf.errors import ModelLoadError
from gnnperf.zoo.attention import (
    build_bert,
    build_gpt,
    build_mixer,
    build_vit,
    sample_bert,
    sample_gpt,
    sample_mixer,
    sample_vit,
)
from gnnperf.zoo.convnets import (
    build_densenet,
    build_inception,
    build_regnet,
    build_resnet,
    build_squeezenet,
    build_vgg,
    sample_densenet,
    sample_inception,
    sample_regnet,
    sample_resnet,
    sample_squeezenet,
    sample_vgg,
)
from gnnperf.zoo.corpus import CATALOG, build_corpus, corpus_inputs
from gnnperf.zoo.depthwise_convnets import (
    build_convnext,
    build_efficientnet,
    build_mobilenet,
    sample_convnext,
    sample_efficientnet,
    sample_mobilenet,
)
from gnnperf.zoo.hf import HF_OPTIONS, HF_TEXT, build_hf
from gnnperf.zoo.nas import build_nb201, sample_nb201
from gnnperf.zoo.operators import OPERATORS
from gnnperf.zoo.spec import InputSpec, Sampler

_Sample = Callable[[Sampler, float], dict[str, Any]]
_Build = Callable[[dict[str, Any]], nn.Module]
GENERATED: dict[str, tuple[_Sample, _Build]] = {
    "vgg": (sample_vgg, build_vgg),
    "resnet": (sample_resnet, build_resnet),
    "mobilenet": (sample_mobilenet, build_mobilenet),
    "efficientnet": (sample_efficientnet, build_efficientnet),
    "densenet": (sample_densenet, build_densenet),
    "inception": (sample_inception, build_inception),
    "squeezenet": (sample_squeezenet, build_squeezenet),
    "regnet": (sample_regnet, build_regnet),
    "convnext": (sample_convnext, build_convnext),
    "vit": (sample_vit, build_vit),
    "bert": (sample_bert, build_bert),
    "gpt": (sample_gpt, build_gpt),
    "mixer": (sample_mixer, build_mixer),
    "nb201": (sample_nb201, build_nb201),
}
_TOKEN_FAMILIES = frozenset({"bert", "gpt"}) | HF_TEXT

FAMILIES: tuple[str, ...] = tuple(GENERATED)
REAL_ARCHITECTURES: tuple[str, ...] = tuple(HF_OPTIONS)
#: the real-architecture corpus (``tf-*``): transformers model types at a ladder of sizes
CORPUS: tuple[str, ...] = tuple(CATALOG)
#: the operator sweep (``op-*``): single operators over their configuration space
SWEEP: tuple[str, ...] = tuple(OPERATORS)
#: every name :func:`~gnnperf.zoo.sample_spec` takes
KNOWN_FAMILIES: frozenset[str] = frozenset(FAMILIES + REAL_ARCHITECTURES + CORPUS + SWEEP)


def unknown_family(family: str) -> ModelLoadError:
    """The error for a name that is neither a generated family nor a real architecture."""
    known = (", ".join(FAMILIES + REAL_ARCHITECTURES + SWEEP)
             + f", and {len(CORPUS)} tf-* architectures")
    return ModelLoadError(f"unknown model family '{family}'; known: {known}")


def inputs_for(family: str, hp: dict[str, Any]) -> InputSpec:
    """Input names, shapes and dtypes: token ids for text families, else an NCHW image."""
    if family in CATALOG:
        return corpus_inputs(family, hp)
    if family in OPERATORS:
        return OPERATORS[family].inputs(hp)
    if family in _TOKEN_FAMILIES:
        return {"input_ids": ((int(hp["batch"]), int(hp["seq_len"])), "int64")}
    r = int(hp["resolution"])
    return {"x": ((int(hp["batch"]), 3, r, r), "float32")}


def construct(family: str, hp: dict[str, Any]) -> nn.Module:
    """The bare module, weights from torch's current seed: :func:`~gnnperf.zoo.build_model`
    seeds and calibrates it, the FLOP counter needs neither."""
    if family in GENERATED:
        return GENERATED[family][1](hp)
    if family in HF_OPTIONS:
        return build_hf(family, hp)
    if family in CATALOG:
        return build_corpus(family, hp)
    if family in OPERATORS:
        return OPERATORS[family].build(hp)
    raise unknown_family(family)
