"""Input sizes of corpus models: seed ``i`` of an architecture takes its modality's ``i``-th
(batch, size), so ``--count 2`` measures every architecture at two sizes."""

from __future__ import annotations

from typing import Any

from gnnperf.zoo.corpus.catalog import CATALOG, SIZES
from gnnperf.zoo.spec import InputSpec

#: feature channels of the log-mel and spectrogram encoders (their reference configs)
_MEL_BINS = {"whisper": 80, "speech_to_text": 80, "audio-spectrogram-transformer": 128}


def sample_corpus(name: str, seed: int) -> dict[str, Any]:
    """Hyperparameters of model ``seed`` of architecture ``name``: batch and input size."""
    from gnnperf.zoo.corpus.build import vocab_of

    arch = CATALOG[name]
    options = SIZES[arch.modality]
    batch, size = options[seed % len(options)]
    hp: dict[str, Any] = {"batch": batch, "size": size}
    if arch.modality in ("text", "seq2seq"):
        hp["vocab"] = vocab_of(name)
    return hp


def corpus_inputs(name: str, hp: dict[str, Any]) -> InputSpec:
    """The one input of the wrapped model, by modality."""
    arch = CATALOG[name]
    b, n = int(hp["batch"]), int(hp["size"])
    if arch.modality in ("text", "seq2seq"):
        return {"input_ids": ((b, n), "int64")}
    if arch.modality == "vision":
        return {"x": ((b, 3, n, n), "float32")}
    if arch.modality == "waveform":
        return {"x": ((b, n), "float32")}
    mels = _MEL_BINS[arch.model_type]
    if arch.model_type == "whisper":
        return {"x": ((b, mels, n), "float32")}
    return {"x": ((b, n, mels), "float32")}


#: the transformers model type each ``hf-*`` real architecture is an instance of: holding a
#: model type out holds these out with it
HF_MODEL_TYPES = {
    "hf-resnet18": "resnet", "hf-resnet50": "resnet", "hf-mobilenetv2": "mobilenet_v2",
    "hf-efficientnet-b0": "efficientnet", "hf-convnext-tiny": "convnext", "hf-vit-b16": "vit",
    "hf-bert-base": "bert", "hf-gpt2": "gpt2", "hf-roberta-base": "roberta",
}


def source_family(family: str) -> str:
    """The unit a held-out-architecture split holds out: a real architecture's model type
    (``tf-bert-l4h256`` and ``hf-bert-base`` -> ``tf:bert``); a generated zoo family is
    its own source."""
    arch = CATALOG.get(family)
    if arch is not None:
        return f"tf:{arch.model_type}"
    return f"tf:{HF_MODEL_TYPES[family]}" if family in HF_MODEL_TYPES else family


def is_real_architecture(family: str) -> bool:
    """A public architecture (corpus or ``hf-*``), as opposed to a generated zoo family."""
    return family in CATALOG or family in HF_MODEL_TYPES
