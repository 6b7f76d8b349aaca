"""Real architectures (``hf-*``): ``transformers`` models at their published sizes with random
weights (nothing is downloaded), wrapped so the ONNX exporter and TVM can take them."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gnnperf.errors import ModelLoadError
from gnnperf.zoo.spec import Sampler

# (batch, resolution or sequence length) options per architecture, sized so one inference
# stays measurable on a 2-core CPU: at most ~12 GFLOP (BERT/GPT-2 at 128 tokens would be 22).
HF_OPTIONS: dict[str, tuple[tuple[int, int], ...]] = {
    "hf-resnet18": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 64), (2, 96), (2, 128)),
    "hf-resnet50": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 64), (2, 96)),
    "hf-mobilenetv2": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 96), (2, 128), (2, 160)),
    "hf-efficientnet-b0": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 96), (2, 128)),
    "hf-convnext-tiny": ((1, 64), (1, 96), (1, 128), (1, 160), (2, 64), (2, 96)),
    "hf-vit-b16": ((1, 64), (1, 96), (1, 128), (2, 64)),
    "hf-bert-base": ((1, 16), (1, 32), (1, 64), (2, 16), (2, 32)),
    "hf-gpt2": ((1, 16), (1, 32), (1, 64), (2, 16), (2, 32)),
    "hf-roberta-base": ((1, 16), (1, 32), (1, 64), (2, 16), (2, 32)),
}
HF_TEXT = frozenset({"hf-bert-base", "hf-gpt2", "hf-roberta-base"})
_HF_VOCAB = {"hf-bert-base": 30522, "hf-gpt2": 50257, "hf-roberta-base": 50265}
#: Vocabulary of the tiny text variants (:func:`tiny_spec`).
TINY_VOCAB = 128


class _HFWrapper(nn.Module):
    """Exposes a single positional input and returns one tensor (the exporter needs both).

    ``mask`` is passed as a constant ``attention_mask``: for GPT-2 a prepared 4-D additive
    causal mask, because transformers' own mask construction exports to constant subgraphs
    (ConstantOfShape/Expand, or ``torch.diff`` without a mask) that TVM cannot import.
    """

    def __init__(
        self,
        model: nn.Module,
        input_name: str,
        output: str,
        mask: torch.Tensor | None = None,
        **extra: Any,
    ) -> None:
        super().__init__()
        self.model = model
        self.input_name = input_name
        self.output = output
        self.extra = extra
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kwargs = {self.input_name: x, "return_dict": True, **self.extra}
        if self.mask is not None:
            kwargs["attention_mask"] = self.mask
        return getattr(self.model(**kwargs), self.output)


def build_hf(name: str, hp: dict[str, Any]) -> nn.Module:
    """The architecture at its published size, or at a tiny one (``hp["tiny"]``: the same
    layer types with few, narrow layers, so tests can lower every architecture quickly)."""
    import transformers as tf

    res = int(hp.get("resolution", 0))
    tiny = bool(hp.get("tiny", False))
    eager = {"attn_implementation": "eager"}
    # width stages and depths of the convolutional networks; layers/width/heads/MLP of ViTs
    # and text transformers
    conv_widths = [8, 16, 32, 64] if tiny else None
    conv_depths = [1, 1, 1, 1] if tiny else None
    layers, width, heads, mlp = (1, 32, 2, 64) if tiny else (12, 768, 12, 3072)
    if name == "hf-resnet18":
        cfg: Any = tf.ResNetConfig(
            embedding_size=8 if tiny else 64,
            hidden_sizes=conv_widths or [64, 128, 256, 512],
            depths=conv_depths or [2, 2, 2, 2],
            layer_type="basic",
            num_labels=10 if tiny else 1000,
        )
        return _HFWrapper(tf.ResNetForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-resnet50":
        cfg = tf.ResNetConfig(
            embedding_size=8 if tiny else 64,
            hidden_sizes=[4 * w for w in conv_widths] if conv_widths else [256, 512, 1024, 2048],
            depths=conv_depths or [3, 4, 6, 3],
            layer_type="bottleneck",
            num_labels=10 if tiny else 1000,
        )
        return _HFWrapper(tf.ResNetForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-mobilenetv2":
        cfg = tf.MobileNetV2Config(depth_multiplier=0.35 if tiny else 1.0, image_size=res,
                                   num_labels=10 if tiny else 1001)
        return _HFWrapper(tf.MobileNetV2ForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-efficientnet-b0":
        cfg = tf.EfficientNetConfig(
            width_coefficient=0.25 if tiny else 1.0,
            depth_coefficient=0.25 if tiny else 1.0,
            hidden_dim=320 if tiny else 1280,  # the top conv: round_filters(1280 × width)
            image_size=res,
            dropout_rate=0.2,
            num_labels=10 if tiny else 1000,
        )
        effnet = tf.EfficientNetForImageClassification(cfg)
        # HF pools with AvgPool2d(kernel=1280, ceil_mode=True), whose ONNX export runtimes
        # disagree on (divisor 1280² vs window); a global average pool is what it computes.
        effnet.efficientnet.pooler = nn.AdaptiveAvgPool2d(1)
        return _HFWrapper(effnet, "pixel_values", "logits")
    if name == "hf-convnext-tiny":
        cfg = tf.ConvNextConfig(
            hidden_sizes=conv_widths or [96, 192, 384, 768],
            depths=conv_depths or [3, 3, 9, 3],
            num_labels=10 if tiny else 1000,
        )
        return _HFWrapper(tf.ConvNextForImageClassification(cfg), "pixel_values", "logits")
    if name == "hf-vit-b16":
        cfg = tf.ViTConfig(
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=mlp,
            patch_size=16,
            image_size=res,
            num_labels=10 if tiny else 1000,
            **eager,
        )
        return _HFWrapper(tf.ViTForImageClassification(cfg), "pixel_values", "logits")
    vocab = int(hp.get("vocab", _HF_VOCAB.get(name, 0)))
    if name in ("hf-bert-base", "hf-roberta-base"):
        # RoBERTa differs in its embeddings: position ids are a cumsum over the non-padding
        # tokens (a scan kernel), counted from padding_idx + 1
        roberta = name == "hf-roberta-base"
        config_class = tf.RobertaConfig if roberta else tf.BertConfig
        cfg = config_class(
            vocab_size=vocab,
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=mlp,
            max_position_embeddings=514 if roberta else 512,
            **({"pad_token_id": 1, "type_vocab_size": 1} if roberta else {}),
            **eager,
        )
        model_class = tf.RobertaModel if roberta else tf.BertModel
        return _HFWrapper(model_class(cfg, add_pooling_layer=False), "input_ids",
                          "last_hidden_state")
    if name == "hf-gpt2":
        cfg = tf.GPT2Config(
            vocab_size=vocab,
            n_positions=1024,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            use_cache=False,
            **({"bos_token_id": 0, "eos_token_id": 0} if tiny else {}),
            **eager,
        )
        b, n = int(hp["batch"]), int(hp["seq_len"])
        # 0 on and below the diagonal, dtype-min above: what transformers' eager mask holds
        causal = torch.full((b, 1, n, n), torch.finfo(torch.float32).min).triu(1)
        return _HFWrapper(
            tf.GPT2Model(cfg), "input_ids", "last_hidden_state", mask=causal, use_cache=False
        )
    # construct() only asks for the names in HF_OPTIONS, so this is a guard, not a path
    raise ModelLoadError(f"unknown real architecture '{name}'; known: {', '.join(HF_OPTIONS)}")


def sample_hf(name: str, s: Sampler) -> dict[str, Any]:
    batch, size = s.choice(HF_OPTIONS[name])
    key = "seq_len" if name in HF_TEXT else "resolution"
    hp: dict[str, Any] = {"batch": batch, key: size}
    if name in HF_TEXT:
        hp["vocab"] = _HF_VOCAB[name]
    return hp
