"""Shared fixtures: tiny ONNX models exported from plain torch, one per graph shape."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from gnnperf.measure import MeasureSettings


class TinyCNN(nn.Module):
    """Conv-BN-ReLU stack with a residual add and a linear head."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width),
                                  nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(width, width, 3, padding=1))
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = torch.relu(y + self.body(y))
        return self.head(y.mean((2, 3)))


class TinyTransformerBlock(nn.Module):
    """One pre-norm encoder block: attention with softmax, GELU MLP, residuals."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class TinyBranchy(nn.Module):
    """Parallel branches joined by concat and add (Inception-like)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 4, 1)
        self.b = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
        self.c = nn.MaxPool2d(3, 1, 1)
        self.merge = nn.Conv2d(12, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([self.a(x), self.b(x), self.c(x)], dim=1)
        return self.merge(y) + x


class ConvHeavy(nn.Module):
    """Enough convolution work that two threads visibly beat one (sampled schedules)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(64, 64, 3, padding=1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def export(model: nn.Module, shape: tuple[int, ...], path: Path,
           dynamic: dict[str, dict[int, str]] | None = None) -> Path:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (torch.randn(*shape),), str(path), opset_version=17,
                          dynamo=False, input_names=["x"], output_names=["y"],
                          dynamic_axes=dynamic)
    return path


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def cnn_onnx(models_dir: Path) -> Path:
    torch.manual_seed(0)
    return export(TinyCNN(), (1, 3, 16, 16), models_dir / "cnn.onnx")


@pytest.fixture(scope="session")
def transformer_onnx(models_dir: Path) -> Path:
    torch.manual_seed(0)
    return export(TinyTransformerBlock(), (1, 8, 16), models_dir / "transformer.onnx")


@pytest.fixture(scope="session")
def branchy_onnx(models_dir: Path) -> Path:
    torch.manual_seed(0)
    return export(TinyBranchy(), (1, 4, 12, 12), models_dir / "branchy.onnx")


@pytest.fixture(scope="session")
def conv_heavy_onnx(models_dir: Path) -> Path:
    torch.manual_seed(0)
    return export(ConvHeavy(), (1, 32, 32, 32), models_dir / "conv_heavy.onnx")


@pytest.fixture(scope="session")
def dynamic_onnx(models_dir: Path) -> Path:
    torch.manual_seed(0)
    return export(TinyCNN(), (1, 3, 16, 16), models_dir / "dynamic.onnx",
                  dynamic={"x": {0: "batch"}})


@pytest.fixture(autouse=True, scope="session")
def _hardware_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep micro-benchmark figures of the test run out of the user's cache, and give the
    session this machine's figures up front.

    A ``local`` hardware spec measures its peak, bandwidth and reference kernels once per
    (ISA, threads), up to half a minute each on a slowed host; the tests that use one check
    what is done with the figures, not the figures. Measuring them is tested where it
    happens (``test_hardware.py``, ``test_measure.py``, each in a cache of its own)."""
    import json
    import os

    from gnnperf.hardware.spec import HardwareSpec, available_cores, supported_isas

    cache = tmp_path_factory.mktemp("cache")
    os.environ["GNNPERF_CACHE_DIR"] = str(cache)
    os.environ["GNNPERF_SERVER"] = "off"  # a user's `gnnperf serve` answers no test
    cpu_id = HardwareSpec.local(supported_isas()[0], 1, measure=False).cpu_id
    hardware, reference = {}, {}
    for level, isa in enumerate(supported_isas()):
        for threads in range(1, available_cores() + 1):
            key = f"{cpu_id}|{isa}|{threads}"
            # figures of the Zen 4 guest's order, scaled by vector width and threads
            hardware[key] = [12.0 * 2 ** min(level, 2) * threads, 20.0 + 6.0 * threads]
            reference[key] = {"gemm": 0.8 / threads, "stream": 6.0, "chain": 0.005}
    (cache / "hardware.json").write_text(json.dumps(hardware))
    (cache / "reference_figures.json").write_text(json.dumps(reference))


#: measurements in tests check behaviour, not labels: they never wait for a slowed host
#: (the Zen 3 guest's speed probe rarely settles within the default 1.15 of its best, and
#: every timing would wait its full quiet timeout)
HASTY_SLOWDOWN = 100.0
#: the command-line form, for the subcommands that measure
HASTY = ["--quiet-timeout", "2", "--max-slowdown", str(HASTY_SLOWDOWN)]

#: tiny kernel-timing settings and hardware of the kernel dataset fixture
KERNEL_SETTINGS = MeasureSettings(kernel_repeat=3, kernel_min_repeat_ms=1, quiet_timeout_s=5,
                                  max_slowdown=HASTY_SLOWDOWN,
                                  kernel_slow_retries=0, slow_wait_s=1.0)
KERNEL_HW = [("x86-64-v3", 1)]


@pytest.fixture(scope="session")
def kernel_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kernel dataset of one tiny model: every workload, 3 schedule seeds, timed."""
    from gnnperf import zoo
    from gnnperf.collect.kernels import collect_kernels

    root = tmp_path_factory.mktemp("kernels")
    summary = collect_kernels(root, [zoo.tiny_spec("mixer")], KERNEL_HW, schedules=3,
                              settings=KERNEL_SETTINGS, progress=False)
    assert summary.failed == 0, summary.line()
    assert summary.done > 0 and summary.measurements > summary.done
    return root


@pytest.fixture(scope="session")
def small_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four models × two thread counts, measured for real (tiny settings)."""
    root = tmp_path_factory.mktemp("ds")
    proc = subprocess.run(
        [sys.executable, "-m", "gnnperf", "collect", "--out", str(root),
         "--families", "squeezenet,mixer", "--count", "2", "--hw", "x86-64-v3:1,x86-64-v3:2",
         "--build", "sampled:0", "--repeat", "3", *HASTY],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


@pytest.fixture(scope="session")
def tiny_graph():
    """``tiny_graph(family, build)``: the kernel graph of ``family``'s tiny model (a corpus
    architecture at its first size) lowered for x86-64-v3 on 2 cores, lowered once per
    session. The graph depends on the target's ISA and cores only, so every test that
    predicts zoo models at any thread count or hardware figures shares it."""
    from gnnperf import zoo
    from gnnperf.features import extract_graph
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.lowering.pipeline import lower

    target = {"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2}
    modules: dict[str, object] = {}
    graphs: dict[tuple[str, str], object] = {}

    def get(family: str, build: str):
        if (family, build) not in graphs:
            if family not in modules:
                spec = (zoo.tiny_spec(family) if family in zoo.FAMILIES + zoo.REAL_ARCHITECTURES
                        else zoo.sample_spec(family, 0))
                modules[family] = load_onnx(zoo.export_onnx(spec))
            # imported afresh per build: lowering changes a Relax module in place, so a
            # module lowered once (dlight, say) would lower differently the next time
            mod = import_to_relax(modules[family])
            graphs[family, build] = extract_graph(lower(mod, target, build))
        return graphs[family, build]

    return get


@pytest.fixture
def measured_reference_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache whose reference-kernel times this machine measures now (its peak figures
    stay the session's, which the session's records were collected with): for the tests
    that compare a local spec's times with those of records measured in this session."""
    import os
    import shutil

    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(Path(os.environ["GNNPERF_CACHE_DIR"]) / "hardware.json", cache)
    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(cache))


@pytest.fixture
def told_predictor():  # noqa: ANN201 - a factory of Predictors (torch loads inside)
    """``told_predictor(counts)``: the shipped checkpoint, told it trained on ``counts``
    records of those builds (the others as it counted them): what the build gate and the
    budget check read. The loaded checkpoint itself is left as it is."""
    import copy
    import dataclasses

    from gnnperf.estimators.gnn.predictor import Predictor, load_predictor

    def told(counts: dict[str, int]) -> Predictor:
        shipped = load_predictor()
        predictor = copy.copy(shipped)
        predictor.checkpoint = dataclasses.replace(
            shipped.checkpoint, build_counts={**shipped.checkpoint.build_counts, **counts})
        return predictor

    return told


@pytest.fixture
def untuned_predictor(told_predictor):  # noqa: ANN001, ANN201 - a Predictor
    """The shipped checkpoint, told it trained on no tuned:N record: what a checkpoint that
    never learned the search does (the build gate refuses it)."""
    from gnnperf.estimators.gnn.predictor import load_predictor

    return told_predictor({b: 0 for b in load_predictor().checkpoint.build_counts
                           if b.startswith("tuned:")})
