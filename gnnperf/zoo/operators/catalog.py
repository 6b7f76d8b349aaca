"""The operator sweep (``op-*``): single operators and small fused patterns, each drawn over
its configuration space, nn-Meter's kernel-level idea applied to the kernels TVM runs.

A sweep model is one operator (with its bias and activation where a real network fuses
them) between a model input and its output, so its whole-model latency is the latency of
the one or two kernels TVM makes of it. Seed ``i`` of an operator is a seeded draw of its
configuration: shapes log-uniform over the ranges real networks use, kernel sizes, strides,
dilations and groups from the values they use, inside a work budget a 2-core CPU measures
in well under a second with an unscheduled (``default``) build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gnnperf.zoo.spec import InputSpec, Sampler

PREFIX = "op-"
#: most multiply-adds x 2 a sweep model may have (an unscheduled kernel runs ~1 GFLOP/s)
MAX_FLOPS = 300_000_000
#: most elements any one tensor of a sweep model may hold (16 MiB of float32)
MAX_ELEMENTS = 1 << 22


_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "none": nn.Identity, "relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU,
    "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "hardswish": nn.Hardswish,
}


def _activation(s: Sampler) -> str:
    return s.choice(["none", "relu", "gelu", "silu"], [0.3, 0.35, 0.2, 0.15])


def _groups(s: Sampler, cin: int, cout: int) -> int:
    """1 (dense), depthwise (``cin``, when ``cout`` is a multiple) or a few groups."""
    options = [1]
    if cout % cin == 0:
        options.append(cin)
    options += [g for g in (2, 4, 8, 32) if cin % g == 0 and cout % g == 0 and g < cin]
    return s.choice(options, [3.0] + [1.0] * (len(options) - 1))


class _Conv(nn.Module):
    """A convolution with its bias and activation, as networks fuse them."""

    def __init__(self, dims: int, hp: dict[str, Any]) -> None:
        super().__init__()
        conv = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[dims - 1]
        k, d = int(hp["kernel"]), int(hp["dilation"])
        self.conv = conv(int(hp["cin"]), int(hp["cout"]), k, stride=int(hp["stride"]),
                         padding=d * (k - 1) // 2, dilation=d, groups=int(hp["groups"]),
                         bias=bool(hp["bias"]))
        self.act = _ACTIVATIONS[hp["act"]]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


def _conv_flops(hp: dict[str, Any], out_elements: int) -> int:
    taps = int(hp["kernel"]) ** int(hp["dims"])
    return 2 * out_elements * taps * int(hp["cin"]) // int(hp["groups"])


def _sample_conv(s: Sampler, dims: int) -> dict[str, Any]:
    cin = s.logint(*{1: (4, 512), 2: (3, 512), 3: (3, 64)}[dims])
    cout = s.logint(*{1: (4, 512), 2: (8, 512), 3: (8, 96)}[dims], step=4)
    kernels = {1: [1, 3, 5, 7, 9, 15], 2: [1, 3, 5, 7], 3: [1, 3]}[dims]
    hp: dict[str, Any] = {
        "dims": dims, "cin": cin, "cout": cout,
        "kernel": s.choice(kernels),
        "stride": s.choice([1, 2], [0.75, 0.25]),
        "dilation": s.choice([1, 2, 4, 8], [0.6, 0.2, 0.1, 0.1]) if dims < 3 else 1,
        "groups": _groups(s, cin, cout),
        "bias": s.coin(0.7), "act": _activation(s),
        "batch": s.choice([1, 2, 4], [0.6, 0.25, 0.15]),
    }
    if hp["kernel"] == 1:
        hp["dilation"] = 1
    hp["size"] = s.logint(*{1: (16, 8192), 2: (7, 160), 3: (4, 32)}[dims])
    return hp


def _conv_inputs(hp: dict[str, Any]) -> InputSpec:
    n = int(hp["size"])
    spatial = (n,) * int(hp["dims"])
    return {"x": ((int(hp["batch"]), int(hp["cin"]), *spatial), "float32")}


def _conv_cost(hp: dict[str, Any]) -> tuple[int, int]:
    n, dims = int(hp["size"]), int(hp["dims"])
    out_n = (n - 1) // int(hp["stride"]) + 1
    out = int(hp["batch"]) * int(hp["cout"]) * out_n ** dims
    inp = int(hp["batch"]) * int(hp["cin"]) * n ** dims
    return _conv_flops(hp, out), max(out, inp)


class _Dense(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        self.fc = nn.Linear(int(hp["cin"]), int(hp["cout"]), bias=bool(hp["bias"]))
        self.act = _ACTIVATIONS[hp["act"]]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


def _sample_dense(s: Sampler) -> dict[str, Any]:
    return {"batch": s.choice([1, 2, 4, 8]), "tokens": s.logint(1, 512),
            "cin": s.logint(16, 4096, step=8), "cout": s.logint(16, 4096, step=8),
            "bias": s.coin(0.8), "act": _activation(s)}


def _sample_matmul(s: Sampler) -> dict[str, Any]:
    """Large, often square operands: the shapes where additive models err most."""
    m = s.logint(32, 1024, step=8)
    square = s.coin(0.4)
    return {"batch": 1, "tokens": m, "cin": m if square else s.logint(32, 1024, step=16),
            "cout": m if square else s.logint(32, 1024, step=16), "bias": False, "act": "none"}


def _dense_inputs(hp: dict[str, Any]) -> InputSpec:
    return {"x": ((int(hp["batch"]), int(hp["tokens"]), int(hp["cin"])), "float32")}


def _dense_cost(hp: dict[str, Any]) -> tuple[int, int]:
    rows = int(hp["batch"]) * int(hp["tokens"])
    c_in, c_out = int(hp["cin"]), int(hp["cout"])
    return 2 * rows * c_in * c_out, max(rows * c_in, rows * c_out, c_in * c_out)


class _BatchMatmul(nn.Module):
    """Attention's two batched products: scores ``q @ kᵀ`` then ``p @ v``."""

    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        self.heads, self.second = int(hp["heads"]), bool(hp["second"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q = x.reshape(b, n, self.heads, c // self.heads).transpose(1, 2)
        scores = q @ q.transpose(-1, -2)
        return scores @ q if self.second else scores


def _sample_batch_matmul(s: Sampler) -> dict[str, Any]:
    heads = s.choice([1, 2, 4, 8, 12, 16])
    return {"batch": s.choice([1, 2, 4]), "tokens": s.logint(8, 512), "heads": heads,
            "head_dim": s.choice([16, 32, 64, 128]), "second": s.coin(0.5)}


def _batch_matmul_inputs(hp: dict[str, Any]) -> InputSpec:
    c = int(hp["heads"]) * int(hp["head_dim"])
    return {"x": ((int(hp["batch"]), int(hp["tokens"]), c), "float32")}


def _batch_matmul_cost(hp: dict[str, Any]) -> tuple[int, int]:
    bh = int(hp["batch"]) * int(hp["heads"])
    n, d = int(hp["tokens"]), int(hp["head_dim"])
    return 2 * bh * n * n * d * (2 if hp["second"] else 1), bh * n * max(n, d)


class _Pool(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        k, st = int(hp["kernel"]), int(hp["stride"])
        self.pool: nn.Module = {
            "max": lambda: nn.MaxPool2d(k, st, padding=k // 2),
            "avg": lambda: nn.AvgPool2d(k, st, padding=k // 2),
            "global": lambda: nn.AdaptiveAvgPool2d(1),
        }[hp["kind"]]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def _sample_pool(s: Sampler) -> dict[str, Any]:
    return {"batch": s.choice([1, 2, 4]), "channels": s.logint(8, 512, step=8),
            "size": s.logint(7, 160), "kind": s.choice(["max", "avg", "global"]),
            "kernel": s.choice([2, 3, 5]), "stride": s.choice([1, 2], [0.3, 0.7])}


def _image_inputs(hp: dict[str, Any]) -> InputSpec:
    n = int(hp["size"])
    return {"x": ((int(hp["batch"]), int(hp["channels"]), n, n), "float32")}


def _image_cost(hp: dict[str, Any]) -> tuple[int, int]:
    return 0, int(hp["batch"]) * int(hp["channels"]) * int(hp["size"]) ** 2


class _Reduce(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        self.kind, self.axis = str(hp["kind"]), int(hp["axis"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "max":
            return x.amax(dim=self.axis, keepdim=True)
        if self.kind == "sum":
            return x.sum(dim=self.axis, keepdim=True)
        return x.mean(dim=self.axis, keepdim=True)


def _sample_reduce(s: Sampler) -> dict[str, Any]:
    return {"batch": s.choice([1, 2, 4]), "rows": s.logint(1, 4096),
            "cols": s.logint(4, 8192), "kind": s.choice(["sum", "mean", "max"]),
            "axis": s.choice([1, 2], [0.3, 0.7])}


def _rows_inputs(hp: dict[str, Any]) -> InputSpec:
    return {"x": ((int(hp["batch"]), int(hp["rows"]), int(hp["cols"])), "float32")}


def _rows_cost(hp: dict[str, Any]) -> tuple[int, int]:
    return 0, int(hp["batch"]) * int(hp["rows"]) * int(hp["cols"])


class _Norm(nn.Module):
    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        c = int(hp["channels"])
        self.kind = str(hp["kind"])
        self.norm: nn.Module = {
            "layer": lambda: nn.LayerNorm(c),
            "group": lambda: nn.GroupNorm(int(hp["groups"]), c),
            "instance": lambda: nn.InstanceNorm2d(c, affine=True),
        }[self.kind]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def _sample_norm(s: Sampler) -> dict[str, Any]:
    kind = s.choice(["layer", "group", "instance"], [0.5, 0.3, 0.2])
    channels = s.logint(8, 2048, step=8)
    hp: dict[str, Any] = {"batch": s.choice([1, 2, 4]), "kind": kind, "channels": channels}
    if kind == "layer":
        hp["tokens"] = s.logint(1, 1024)
    else:
        hp["size"] = s.logint(4, 112)
        hp["groups"] = s.choice([g for g in (1, 4, 8, 16, 32) if channels % g == 0])
    return hp


def _norm_inputs(hp: dict[str, Any]) -> InputSpec:
    b, c = int(hp["batch"]), int(hp["channels"])
    if hp["kind"] == "layer":
        return {"x": ((b, int(hp["tokens"]), c), "float32")}
    n = int(hp["size"])
    return {"x": ((b, c, n, n), "float32")}


def _norm_cost(hp: dict[str, Any]) -> tuple[int, int]:
    shape = _norm_inputs(hp)["x"][0]
    return 0, int(torch.Size(shape).numel())


class _Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def _sample_softmax(s: Sampler) -> dict[str, Any]:
    tokens = s.logint(4, 512)
    return {"batch": s.choice([1, 2, 4]), "rows": s.choice([1, 4, 8, 12, 16]) * tokens,
            "cols": tokens if s.coin(0.7) else s.logint(10, 32000)}


_POINTWISE = ("add", "mul", "relu", "gelu", "sigmoid", "tanh", "exp", "silu", "hardswish",
              "div", "sqrt")


class _Elementwise(nn.Module):
    """A chain of elementwise operations, some with a broadcast constant: what FuseOps
    merges into one kernel."""

    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        self.steps = [str(v) for v in hp["chain"]]
        self.const = nn.Parameter(torch.rand(int(hp["cols"])) + 0.5, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for step in self.steps:
            if step == "add":
                x = x + self.const
            elif step == "mul":
                x = x * self.const
            elif step == "div":
                x = x / self.const
            elif step == "sqrt":
                x = torch.sqrt(torch.abs(x) + 1.0)
            elif step == "exp":
                x = torch.exp(-torch.abs(x))
            else:
                x = _ACTIVATIONS[step]()(x)
        return x


def _sample_elementwise(s: Sampler) -> dict[str, Any]:
    length = s.choice([1, 2, 3, 4, 6], [0.3, 0.3, 0.2, 0.1, 0.1])
    return {"batch": s.choice([1, 2, 4]), "rows": s.logint(1, 4096),
            "cols": s.logint(8, 4096), "chain": [s.choice(_POINTWISE) for _ in range(length)]}


class _Layout(nn.Module):
    """Data movement that survives as a kernel: transposes, head splits, pads, concats,
    strided slices."""

    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        self.kind, self.heads = str(hp["kind"]), int(hp["heads"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        if self.kind == "transpose":
            return x.transpose(1, 2).contiguous() + 1.0
        if self.kind == "heads":
            return x.reshape(b, n, self.heads, c // self.heads).permute(0, 2, 1, 3) + 1.0
        if self.kind == "pad":
            return nn.functional.pad(x, (1, 2, 3, 0)) + 1.0
        if self.kind == "concat":
            return torch.cat([x, x * 2.0], dim=1)
        return x[:, ::2, 1::2] + 1.0  # strided slice


def _sample_layout(s: Sampler) -> dict[str, Any]:
    heads = s.choice([2, 4, 8, 12])
    return {"batch": s.choice([1, 2, 4]), "rows": s.logint(4, 2048),
            "cols": heads * s.logint(4, 256), "heads": heads,
            "kind": s.choice(["transpose", "heads", "pad", "concat", "slice"])}


class _Gather(nn.Module):
    """Embedding lookups: a table indexed by token ids (``Gather`` in ONNX)."""

    def __init__(self, hp: dict[str, Any]) -> None:
        super().__init__()
        self.table = nn.Embedding(int(hp["vocab"]), int(hp["dim"]))
        self.scale = bool(hp["scale"])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.table(ids)
        return out * 2.0 if self.scale else out


def _sample_gather(s: Sampler) -> dict[str, Any]:
    return {"batch": s.choice([1, 2, 4, 8]), "tokens": s.logint(1, 1024),
            "vocab": s.logint(64, 50000), "dim": s.logint(16, 1024, step=16),
            "scale": s.coin(0.5)}


def _gather_inputs(hp: dict[str, Any]) -> InputSpec:
    return {"ids": ((int(hp["batch"]), int(hp["tokens"])), "int64")}


def _gather_cost(hp: dict[str, Any]) -> tuple[int, int]:
    rows = int(hp["batch"]) * int(hp["tokens"])
    return 0, max(rows, int(hp["vocab"])) * int(hp["dim"])


@dataclass(frozen=True)
class Operator:
    """One operator of the sweep: how to draw a configuration, build it, feed it and cost it."""

    name: str
    sample: Callable[[Sampler], dict[str, Any]]
    build: Callable[[dict[str, Any]], nn.Module]
    inputs: Callable[[dict[str, Any]], InputSpec]
    #: (multiply-adds x 2, elements of the largest tensor): kept under the sweep's budget
    cost: Callable[[dict[str, Any]], tuple[int, int]]


def _conv(dims: int) -> Operator:
    return Operator(f"{PREFIX}conv{dims}d", lambda s: _sample_conv(s, dims),
                    lambda hp: _Conv(dims, hp), _conv_inputs, _conv_cost)


OPERATORS: dict[str, Operator] = {op.name: op for op in (
    _conv(1), _conv(2), _conv(3),
    Operator(f"{PREFIX}dense", _sample_dense, _Dense, _dense_inputs, _dense_cost),
    Operator(f"{PREFIX}matmul", _sample_matmul, _Dense, _dense_inputs, _dense_cost),
    Operator(f"{PREFIX}batch-matmul", _sample_batch_matmul, _BatchMatmul,
             _batch_matmul_inputs, _batch_matmul_cost),
    Operator(f"{PREFIX}pool", _sample_pool, _Pool, _image_inputs, _image_cost),
    Operator(f"{PREFIX}reduce", _sample_reduce, _Reduce, _rows_inputs, _rows_cost),
    Operator(f"{PREFIX}norm", _sample_norm, _Norm, _norm_inputs, _norm_cost),
    Operator(f"{PREFIX}softmax", _sample_softmax, lambda hp: _Softmax(), _rows_inputs,
             _rows_cost),
    Operator(f"{PREFIX}elementwise", _sample_elementwise, _Elementwise, _rows_inputs,
             _rows_cost),
    Operator(f"{PREFIX}layout", _sample_layout, _Layout, _rows_inputs, _rows_cost),
    Operator(f"{PREFIX}gather", _sample_gather, _Gather, _gather_inputs, _gather_cost),
)}
