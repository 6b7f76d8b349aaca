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


def source_family(family: str) -> str:
    """The unit a held-out-architecture split holds out: a corpus architecture's model type
    (``tf-bert-l4h256`` -> ``tf:bert``); any other family is its own source."""
    arch = CATALOG.get(family)
    return f"tf:{arch.model_type}" if arch else family
