"""Generated token-mixing families: vit, bert, gpt (self-attention) and mixer (its MLP-only
counterpart), with static reshapes so TVM imports them without shape folding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from gnnperf.zoo.layers import Mlp
from gnnperf.zoo.spec import Sampler, make_divisible, sample_batch, sample_classes


class _Attention(nn.Module):
    """Multi-head self-attention with explicit q/k/v matmuls and static reshapes.

    ``fused`` selects one qkv projection (split by Gather) or three separate Linears;
    ``causal`` masks with a constant lower-triangular buffer of ``max_len`` rows.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        batch: int,
        tokens: int,
        fused: bool = True,
        causal: bool = False,
        max_len: int = 0,
    ) -> None:
        super().__init__()
        self.b, self.n, self.h, self.d = batch, tokens, heads, dim // heads
        self.scale = self.d**-0.5
        self.fused = fused
        if fused:
            self.qkv = nn.Linear(dim, 3 * dim)
        else:
            self.q = nn.Linear(dim, dim)
            self.k = nn.Linear(dim, dim)
            self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.causal = causal
        if causal:
            tril = torch.tril(torch.ones(max(max_len, tokens), max(max_len, tokens)))
            self.register_buffer("tril", tril.to(torch.bool), persistent=False)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(self.b, self.n, self.h, self.d).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            qkv = self.qkv(x).reshape(self.b, self.n, 3, self.h, self.d).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        att = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        if self.causal:
            mask = self.tril[: self.n, : self.n]
            att = att.masked_fill(~mask, float("-inf"))
        att = att.softmax(dim=-1)
        out = torch.matmul(att, v).transpose(1, 2).reshape(self.b, self.n, self.h * self.d)
        return self.proj(out)


class _TorchMHA(nn.Module):
    """``nn.MultiheadAttention`` as self-attention, returning only the output tensor.

    Calls the module's reference path (``F.multi_head_attention_forward``) directly: in eval
    mode under ``no_grad`` the module itself takes the fused ``_native_multi_head_attention``
    fast path, which the ONNX exporter cannot translate.
    """

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.mha
        q = x.transpose(0, 1)  # (tokens, batch, dim)
        out, _ = F.multi_head_attention_forward(
            q,
            q,
            q,
            m.embed_dim,
            m.num_heads,
            m.in_proj_weight,
            m.in_proj_bias,
            m.bias_k,
            m.bias_v,
            m.add_zero_attn,
            0.0,
            m.out_proj.weight,
            m.out_proj.bias,
            training=False,
            need_weights=False,
        )
        return out.transpose(0, 1)


class _TransformerLayer(nn.Module):
    def __init__(self, attn: nn.Module, dim: int, hidden: int, pre_norm: bool, act: str) -> None:
        super().__init__()
        self.attn = attn
        self.ln1 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, hidden, act=act)
        self.ln2 = nn.LayerNorm(dim)
        self.pre_norm = pre_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


def _heads_for(s: Sampler, dim: int, options: Sequence[int] = (1, 2, 3, 4, 6, 8, 12)) -> int:
    valid = [h for h in options if dim % h == 0 and dim // h >= 8]
    return s.choice(valid) if valid else 1


# --------------------------------------------------------------------------------------------
# Family: vit
# --------------------------------------------------------------------------------------------


class _ViT(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        d, p, b = hp["dim"], hp["patch"], hp["batch"]
        self.grid = hp["resolution"] // p
        self.patches = self.grid * self.grid
        self.tokens = self.patches + (1 if hp["cls_token"] else 0)
        self.b, self.d = b, d
        self.embed = nn.Conv2d(3, d, p, p)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02) if hp["cls_token"] else None
        self.pos = nn.Parameter(torch.randn(1, self.tokens, d) * 0.02)
        layers = []
        for _ in range(hp["depth"]):
            if hp["attention"] == "mha":
                attn: nn.Module = _TorchMHA(d, hp["heads"])
            else:
                attn = _Attention(d, hp["heads"], b, self.tokens, fused=hp["fused_qkv"])
            layers.append(_TransformerLayer(attn, d, hp["mlp_ratio"] * d, True, "gelu"))
        self.layers = nn.Sequential(*layers)
        self.ln = nn.LayerNorm(d)
        self.pool = hp["pool"]
        self.fc = nn.Linear(d, hp["classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).reshape(self.b, self.d, self.patches).transpose(1, 2)
        if self.cls is not None:
            x = torch.cat([self.cls.expand(self.b, 1, self.d), x], 1)
        x = self.ln(self.layers(x + self.pos))
        x = x[:, 0] if self.pool == "cls" else x.mean(dim=1)
        return self.fc(x)


def sample_vit(s: Sampler, u: float) -> dict[str, Any]:
    patch = s.choice([4, 8, 16], [0.35, 0.4, 0.25])
    grid = s.knob(u, 2, 14)
    dim = s.knob_choice(u, [16, 24, 32, 48, 64, 96, 128, 192, 256, 384])
    cls_token = s.coin(0.6)
    return {
        "batch": sample_batch(s),
        "resolution": grid * patch,
        "patch": patch,
        "dim": dim,
        "heads": _heads_for(s, dim),
        "depth": s.knob(u, 1, 8, jitter=0.4),
        "mlp_ratio": s.choice([2, 3, 4], [0.2, 0.2, 0.6]),
        "attention": s.choice(["mha", "explicit"], [0.4, 0.6]),
        "fused_qkv": s.coin(0.5),
        "cls_token": cls_token,
        "pool": "cls" if cls_token and s.coin(0.7) else "mean",
        "classes": sample_classes(s),
    }


def build_vit(hp: dict[str, Any]) -> nn.Module:
    return _ViT(hp)


# --------------------------------------------------------------------------------------------
# Families: bert (post-norm encoder) and gpt (pre-norm causal decoder)
# --------------------------------------------------------------------------------------------


class _TextTransformer(nn.Module):
    def __init__(self, hp: dict[str, Any], causal: bool) -> None:
        super().__init__()
        b, n, d = hp["batch"], hp["seq_len"], hp["hidden"]
        self.n = n
        self.causal = causal
        self.tok = nn.Embedding(hp["vocab"], d)
        self.pos = nn.Embedding(hp["max_positions"], d)
        self.ln_emb = nn.LayerNorm(d) if not causal else None
        layers = []
        for _ in range(hp["layers"]):
            attn = _Attention(
                d,
                hp["heads"],
                b,
                n,
                fused=hp["fused_qkv"],
                causal=causal,
                max_len=hp["max_positions"],
            )
            act = hp["activation"]
            layers.append(_TransformerLayer(attn, d, hp["intermediate"], causal, act))
        self.layers = nn.Sequential(*layers)
        self.ln_f = nn.LayerNorm(d) if causal else None
        self.head_kind = hp["head"]
        self.head: nn.Module | None = None
        if hp["head"] == "pooler":
            self.head = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        elif hp["head"] == "lm":
            lm = nn.Linear(d, hp["vocab"], bias=False)
            if hp.get("tied_head", False):
                lm.weight = self.tok.weight
            self.head = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(input_ids) + self.pos.weight[: self.n]
        if self.ln_emb is not None:
            x = self.ln_emb(x)
        x = self.layers(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        if self.head_kind == "pooler":
            assert self.head is not None
            return self.head(x[:, 0])
        if self.head is not None:
            return self.head(x)
        return x


def _sample_text(s: Sampler, u: float, causal: bool) -> dict[str, Any]:
    seq = s.knob_choice(u, [4, 8, 16, 32, 64, 128, 256])
    hidden = s.knob_choice(u, [16, 32, 64, 128, 192, 256, 384, 512, 768])
    hp: dict[str, Any] = {
        "batch": sample_batch(s),
        "seq_len": seq,
        "vocab": s.knob_choice(u, [512, 1000, 4096, 8192, 16384, 30522], jitter=0.4),
        "hidden": hidden,
        "heads": _heads_for(s, hidden, (1, 2, 4, 8, 12, 16)),
        "layers": s.knob(u, 1, 8, jitter=0.4),
        "intermediate": hidden * s.choice([2, 3, 4], [0.2, 0.2, 0.6]),
        "max_positions": s.choice([seq, 512, 1024]) if seq <= 512 else seq,
        "fused_qkv": s.coin(0.5),
        "activation": s.choice(["gelu", "relu"], [0.8, 0.2]),
    }
    if causal:
        hp["head"] = s.choice(["hidden", "lm"], [0.4, 0.6])
        hp["tied_head"] = s.coin(0.5)
    else:
        hp["head"] = s.choice(["hidden", "pooler", "lm"], [0.4, 0.3, 0.3])
    return hp


def sample_bert(s: Sampler, u: float) -> dict[str, Any]:
    return _sample_text(s, u, causal=False)


def sample_gpt(s: Sampler, u: float) -> dict[str, Any]:
    return _sample_text(s, u, causal=True)


def build_bert(hp: dict[str, Any]) -> nn.Module:
    return _TextTransformer(hp, causal=False)


def build_gpt(hp: dict[str, Any]) -> nn.Module:
    return _TextTransformer(hp, causal=True)


# --------------------------------------------------------------------------------------------
# Family: mixer (MLP-Mixer)
# --------------------------------------------------------------------------------------------


class _MixerLayer(nn.Module):
    def __init__(self, tokens: int, dim: int, token_hidden: int, channel_hidden: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.token_mlp = Mlp(tokens, token_hidden)
        self.ln2 = nn.LayerNorm(dim)
        self.channel_mlp = Mlp(dim, channel_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.ln2(x))


class _Mixer(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        p, d = hp["patch"], hp["dim"]
        self.b, self.d = hp["batch"], d
        self.tokens = (hp["resolution"] // p) ** 2
        self.embed = nn.Conv2d(3, d, p, p)
        self.layers = nn.Sequential(
            *[
                _MixerLayer(self.tokens, d, hp["token_hidden"], hp["channel_hidden"])
                for _ in range(hp["depth"])
            ]
        )
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, hp["classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).reshape(self.b, self.d, self.tokens).transpose(1, 2)
        return self.fc(self.ln(self.layers(x)).mean(dim=1))


def sample_mixer(s: Sampler, u: float) -> dict[str, Any]:
    patch = s.choice([4, 8, 16], [0.35, 0.4, 0.25])
    grid = s.knob(u, 2, 14)
    dim = s.knob(u, 16, 512, 16)
    tokens = grid * grid
    return {
        "batch": sample_batch(s),
        "resolution": grid * patch,
        "patch": patch,
        "dim": dim,
        "token_hidden": max(8, make_divisible(tokens * s.choice([0.5, 1, 2, 4]))),
        "channel_hidden": dim * s.choice([1, 2, 4], [0.2, 0.3, 0.5]),
        "depth": s.knob(u, 1, 8, jitter=0.4),
        "classes": sample_classes(s),
    }


def build_mixer(hp: dict[str, Any]) -> nn.Module:
    return _Mixer(hp)
