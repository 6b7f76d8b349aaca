"""Constructing a corpus architecture: its ``transformers`` config at the architecture's rung,
a random-weight model from it (nothing is downloaded), wrapped to one input and one output."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from gnnperf.errors import ModelLoadError
from gnnperf.zoo.corpus.catalog import (
    CATALOG,
    SCALED_LADDER,
    TRANSFORMER_LADDER,
    Architecture,
    is_scaled,
)

_WIDTH = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim")
_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers",
           "decoder_layers", "num_decoder_layers")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads")
_FFN = ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "encoder_ffn_dim",
        "decoder_ffn_dim", "hidden_dim", "d_inner")
_HEAD_DIM = ("head_dim", "d_kv", "d_head")
_LIST_WIDTH = ("hidden_sizes", "embed_dim", "embed_dims", "neck_hidden_sizes")
_LIST_DEPTH = ("depths", "depth", "num_block_repeats")
_LIST_HEADS = ("num_heads", "num_attention_heads")


def _present(cfg: Any, name: str) -> bool:
    return name in cfg.to_dict() or name in getattr(cfg, "attribute_map", {})


def _set_transformer(cfg: Any, layers: int, width: int) -> None:
    """Set depth, width, 64-wide heads and a 4x MLP under whichever names the type uses."""
    heads = max(2, width // 64)
    values = {}
    for names, value in ((_WIDTH, width), (_LAYERS, layers), (_HEADS, heads),
                         (_FFN, 4 * width), (_HEAD_DIM, width // heads)):
        for name in names:
            if _present(cfg, name) and isinstance(getattr(cfg, name, None), int):
                values[name] = value
    if not any(n in values for n in _WIDTH):
        raise ModelLoadError(f"{cfg.model_type}: no width attribute to scale")
    if "num_key_value_heads" in cfg.to_dict() and cfg.num_key_value_heads:
        # grouped-query types keep their sharing ratio, at least one KV head
        ratio = max(1, cfg.num_attention_heads // max(1, cfg.num_key_value_heads))
        values["num_key_value_heads"] = max(1, heads // ratio)
    for name, value in values.items():
        _try_set(cfg, name, value)
    if isinstance(getattr(cfg, "block_sizes", None), list):  # Funnel: depth in blocks
        _try_set(cfg, "block_sizes", [max(1, layers // 2)] * len(cfg.block_sizes))
    for name in ("layer_types", "attention_types"):  # per-layer lists follow the depth
        old = getattr(cfg, name, None)
        if isinstance(old, list) and old and not isinstance(old[0], list):
            _try_set(cfg, name, [old[i % len(old)] for i in range(layers)])
    if getattr(cfg, "embedding_size", None) and cfg.embedding_size > width:
        cfg.embedding_size = width


def _try_set(cfg: Any, name: str, value: Any) -> None:
    """Set ``name`` where the config lets it (some are read-only properties derived from
    the others, such as Mamba's ``layer_types``)."""
    try:
        setattr(cfg, name, value)
    except AttributeError:
        pass


def _scale_list(values: list[int], factor: float, step: int) -> list[int]:
    return [max(step, int(round(v * factor / step)) * step) for v in values]


def _set_scaled(cfg: Any, width: float, depth: float) -> None:
    """Multiply the reference config's stage widths and depths (heads follow the width)."""
    d = cfg.to_dict()
    for name in _LIST_DEPTH:
        if isinstance(d.get(name), list):
            setattr(cfg, name, [max(1, math.ceil(v * depth)) for v in d[name]])
    heads_name = next((n for n in _LIST_HEADS if isinstance(d.get(n), list)), None)
    heads = d[heads_name] if heads_name else None
    if heads:
        heads = [max(1, int(round(h * width))) for h in heads]
        setattr(cfg, heads_name, heads)
    for name in _LIST_WIDTH:
        if isinstance(d.get(name), list):
            step = 8
            scaled = _scale_list(d[name], width, step)
            if heads and len(heads) == len(scaled):  # widths divisible by their heads
                scaled = [max(h, int(round(s / (8 * h))) * 8 * h)
                          for s, h in zip(scaled, heads, strict=True)]
            setattr(cfg, name, scaled)
        elif isinstance(d.get(name), int) and name == "embed_dim":
            # Swin-style: stage i is embed_dim * 2^i wide, heads 32 wide
            embed = max(32, int(round(d[name] * width / 32)) * 32)
            setattr(cfg, name, embed)
            if heads_name and isinstance(d.get("depths"), list):
                setattr(cfg, heads_name, [embed * 2**i // 32 for i in range(len(d["depths"]))])
    for name in ("depth_multiplier", "width_coefficient"):
        if isinstance(d.get(name), float):
            setattr(cfg, name, d[name] * width)
    if isinstance(d.get("width_coefficient"), float) and isinstance(d.get("hidden_dim"), int):
        # EfficientNet's top conv is round_filters(1280) at the new width
        channels = 1280 * cfg.width_coefficient
        cfg.hidden_dim = max(8, int(channels + 4) // 8 * 8)
    if isinstance(d.get("num_groups"), int) and width < 1:  # BiT's group norm
        cfg.num_groups = max(1, int(d["num_groups"] * width))
    if isinstance(d.get("depth_coefficient"), float):
        cfg.depth_coefficient = d["depth_coefficient"] * depth


def make_config(arch: Architecture, size: int) -> Any:
    """The architecture's config, with the input size written where the type fixes it."""
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(arch.model_type)
    if getattr(cfg, "vocab_size", 0) is None:  # ESM: the protein alphabet's 33 tokens
        cfg.vocab_size = 33
    if is_scaled(arch.model_type):
        _set_scaled(cfg, *SCALED_LADDER[arch.rung])
    else:
        _set_transformer(cfg, *TRANSFORMER_LADDER[arch.rung])
    d = cfg.to_dict()
    if arch.modality == "vision" and "image_size" in d:
        cfg.image_size = [size, size] if isinstance(d["image_size"], list) else size
    if arch.model_type in ("swin", "swinv2"):
        # windows tile every stage (size/4 .. size/32) only at size/32: transformers'
        # shrunken last-stage window mismatches its relative-position table
        cfg.window_size = max(1, size // 32)
    if arch.modality == "log-mel" and "max_source_positions" in d:
        # whisper's encoder takes exactly 2 x max_source_positions frames
        cfg.max_source_positions = size // 2 if arch.model_type == "whisper" else size
    if arch.modality == "spectrogram":
        cfg.max_length = size
    for name in ("use_cache", "return_dict"):
        setattr(cfg, name, name == "return_dict")
    cfg._attn_implementation = "eager"
    return cfg


class CorpusWrapper(nn.Module):
    """One positional input, one tensor out: what the exporter and the frontend need.

    Encoder-decoders read the same tokens on both sides; feature encoders (Whisper,
    Speech2Text) run their encoder only, the part that depends on the input length.
    """

    def __init__(self, model: nn.Module, modality: str) -> None:
        super().__init__()
        self.model = model
        self.modality = modality

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.modality == "seq2seq":
            out = self.model(input_ids=x, decoder_input_ids=x)
        elif self.modality == "text":
            # an explicit all-ones mask: without one, decoders derive padding with
            # ``torch.diff``, which the exporter lacks
            out = self.model(input_ids=x, attention_mask=torch.ones_like(x))
        elif self.modality == "vision":
            out = self.model(pixel_values=x)
        elif self.modality == "waveform":
            out = self.model(input_values=x)
        elif self.modality == "log-mel":
            out = self.model.get_encoder()(input_features=x)
        else:
            out = self.model(input_values=x)
        if isinstance(out, torch.Tensor):
            return out
        first = out[0] if not hasattr(out, "last_hidden_state") else out.last_hidden_state
        if first is None:
            first = next(v for v in out.values() if isinstance(v, torch.Tensor))
        return first


def build_corpus(name: str, hp: dict[str, Any]) -> nn.Module:
    """The random-weight model of corpus architecture ``name`` at ``hp``'s input size."""
    from transformers import AutoModel

    arch = CATALOG.get(name)
    if arch is None:
        raise ModelLoadError(f"unknown corpus architecture '{name}'")
    cfg = make_config(arch, int(hp["size"]))
    model = AutoModel.from_config(cfg, attn_implementation="eager")
    if hasattr(model, "set_default_language"):  # X-MOD: one language's adapters
        model.set_default_language(next(iter(cfg.languages)))
    return CorpusWrapper(model, arch.modality)


def vocab_of(name: str) -> int:
    """Token ids are drawn below this (the config's vocabulary, capped for byte-level types)."""
    from transformers import AutoConfig

    arch = CATALOG[name]
    cfg = AutoConfig.for_model(arch.model_type)
    return int(getattr(cfg, "vocab_size", None) or 33)
