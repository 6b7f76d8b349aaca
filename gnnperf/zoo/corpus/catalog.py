"""The real-architecture corpus: ``transformers`` model types at a ladder of published sizes.

An *architecture* is one model type at one size (``tf-bert-l4h256``); its *source family* is
the model type, the unit the held-out-architecture split holds out. Sizes follow the BERT
miniatures' grid (Turc et al., 2019: 2-12 layers, width 128-768, 64-wide heads, 4x MLP) for
the transformer types, and width and depth multipliers of the type's reference configuration
(transformers' default, the published base size) for the convolutional and hierarchical
vision types. Every architecture is measured at two or more input sizes (``SIZES``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: model type -> modality. The modality fixes the input (token ids, an image, a waveform,
#: log-mel features or a spectrogram) and how the size ladder applies.
MODEL_TYPES: dict[str, str] = {
    # text encoders
    "bert": "text", "roberta": "text", "distilbert": "text", "albert": "text",
    "electra": "text", "deberta": "text", "deberta-v2": "text", "xlm-roberta": "text",
    "camembert": "text", "mpnet": "text", "squeezebert": "text", "mobilebert": "text",
    "convbert": "text", "roformer": "text", "ernie": "text", "megatron-bert": "text",
    "xlm": "text", "flaubert": "text", "ibert": "text", "data2vec-text": "text",
    "nystromformer": "text", "rembert": "text", "esm": "text", "modernbert": "text",
    "funnel": "text", "fnet": "text", "canine": "text", "big_bird": "text",
    "longformer": "text", "xmod": "text", "mra": "text", "yoso": "text", "splinter": "text",
    "roc_bert": "text", "layoutlm": "text", "markuplm": "text", "luke": "text",
    # decoders
    "gpt2": "text", "gpt_neo": "text", "gptj": "text", "gpt_neox": "text", "opt": "text",
    "bloom": "text", "llama": "text", "mistral": "text", "qwen2": "text", "qwen3": "text",
    "phi": "text", "phi3": "text", "gemma": "text", "gemma2": "text", "falcon": "text",
    "codegen": "text", "stablelm": "text", "starcoder2": "text", "olmo": "text",
    "biogpt": "text", "xglm": "text", "granite": "text", "cohere": "text",
    "persimmon": "text", "gpt_bigcode": "text", "mpt": "text", "ctrl": "text",
    "mamba": "text", "rwkv": "text",
    # encoder-decoders
    "t5": "seq2seq", "mt5": "seq2seq", "umt5": "seq2seq", "bart": "seq2seq",
    "mbart": "seq2seq", "marian": "seq2seq", "pegasus": "seq2seq", "blenderbot": "seq2seq",
    "blenderbot-small": "seq2seq", "m2m_100": "seq2seq", "plbart": "seq2seq",
    "fsmt": "seq2seq", "prophetnet": "seq2seq", "led": "seq2seq", "longt5": "seq2seq",
    # vision transformers
    "vit": "vision", "deit": "vision", "beit": "vision", "data2vec-vision": "vision",
    "dinov2": "vision", "vit_msn": "vision", "yolos": "vision", "ijepa": "vision",
    # hierarchical and hybrid vision
    "swin": "vision", "swinv2": "vision", "pvt": "vision", "pvt_v2": "vision",
    "segformer": "vision", "poolformer": "vision", "cvt": "vision", "focalnet": "vision",
    "levit": "vision", "mobilevit": "vision", "mobilevitv2": "vision", "glpn": "vision",
    "swiftformer": "vision", "hiera": "vision",
    # convolutional vision
    "resnet": "vision", "regnet": "vision", "convnext": "vision", "convnextv2": "vision",
    "mobilenet_v1": "vision", "mobilenet_v2": "vision", "efficientnet": "vision",
    "bit": "vision", "textnet": "vision",
    # audio: raw waveform front-ends (1-D convolutions) and feature encoders
    "wav2vec2": "waveform", "hubert": "waveform", "wavlm": "waveform",
    "data2vec-audio": "waveform", "sew": "waveform", "sew-d": "waveform",
    "unispeech": "waveform", "unispeech-sat": "waveform", "wav2vec2-conformer": "waveform",
    "whisper": "log-mel", "speech_to_text": "log-mel",
    "audio-spectrogram-transformer": "spectrogram",
}

#: (layers, width) of the transformer ladder: BERT miniatures' tiny, mini, small, medium
#: and base, plus the 6-layer 384-wide point of MiniLM/DeiT-small.
TRANSFORMER_LADDER: tuple[tuple[int, int], ...] = (
    (2, 128), (4, 256), (4, 512), (6, 384), (8, 512), (12, 768),
)
#: (width multiplier, depth multiplier) of the hierarchical and convolutional ladder.
SCALED_LADDER: tuple[tuple[float, float], ...] = (
    (0.25, 0.34), (0.5, 0.34), (0.5, 0.67), (0.75, 0.67), (1.0, 1.0),
)

#: (batch, size) per modality, in the order seeds take them: tokens, pixels, samples or frames.
SIZES: dict[str, tuple[tuple[int, int], ...]] = {
    "text": ((1, 32), (1, 128), (2, 32), (1, 16)),
    "seq2seq": ((1, 32), (1, 96), (2, 32)),
    "vision": ((1, 96), (1, 160), (2, 96), (1, 64)),
    "waveform": ((1, 8000), (1, 24000), (2, 8000)),
    "log-mel": ((1, 200), (1, 600), (2, 200)),
    "spectrogram": ((1, 256), (1, 512), (2, 256)),
}

PREFIX = "tf-"


@dataclass(frozen=True)
class Architecture:
    """One corpus architecture: a model type at one rung of its size ladder."""

    name: str
    model_type: str
    modality: str
    rung: int


def _rungs(model_type: str) -> list[tuple[str, int]]:
    """(name suffix, rung index) of each size of ``model_type``'s ladder."""
    if is_scaled(model_type):
        return [(f"w{int(w * 100)}d{int(d * 100)}", i) for i, (w, d) in enumerate(SCALED_LADDER)]
    return [(f"l{n}h{h}", i) for i, (n, h) in enumerate(TRANSFORMER_LADDER)]


_HIERARCHICAL = frozenset({
    "swin", "swinv2", "pvt", "pvt_v2", "segformer", "poolformer", "cvt", "focalnet", "levit",
    "mobilevit", "mobilevitv2", "glpn", "swiftformer", "hiera",
})
_CONVOLUTIONAL = frozenset({
    "resnet", "regnet", "convnext", "convnextv2", "mobilenet_v1", "mobilenet_v2",
    "efficientnet", "bit", "textnet",
})


def is_scaled(model_type: str) -> bool:
    """True where the ladder multiplies the reference config instead of setting (L, H)."""
    return model_type in _HIERARCHICAL | _CONVOLUTIONAL


def _build_catalog() -> dict[str, Architecture]:
    out = {}
    for model_type, modality in MODEL_TYPES.items():
        for label, rung in _rungs(model_type):
            name = f"{PREFIX}{model_type.replace('_', '-')}-{label}"
            out[name] = Architecture(name, model_type, modality, rung)
    return out


#: architecture name -> Architecture, every corpus architecture.
CATALOG: dict[str, Architecture] = _build_catalog()


def corpus_order() -> list[str]:
    """Every architecture, rung by rung across model types: any prefix of a collection
    covers as many model types as it can."""
    return sorted(CATALOG, key=lambda n: (CATALOG[n].rung, CATALOG[n].model_type))
