"""Tests of the model zoo: determinism, static specs, size window, round trips.

Kept fast (the whole file runs in well under a minute on 2 cores): FLOPs are counted on the
meta device, forward passes use the smallest of the first ten seeds, and only one spec is
exported to ONNX (twice, to check byte-identical output).
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
import torch

from gnnperf import zoo
from gnnperf.errors import GnnperfError, ModelLoadError

EXPECTED_FAMILIES = {
    "vgg",
    "resnet",
    "mobilenet",
    "efficientnet",
    "densenet",
    "inception",
    "squeezenet",
    "regnet",
    "convnext",
    "vit",
    "bert",
    "gpt",
    "mixer",
    "nb201",
}
EXPECTED_REAL = {
    "hf-resnet18",
    "hf-resnet50",
    "hf-mobilenetv2",
    "hf-efficientnet-b0",
    "hf-convnext-tiny",
    "hf-vit-b16",
    "hf-bert-base",
    "hf-gpt2",
}
TOKEN_FAMILIES = {"bert", "gpt", "hf-bert-base", "hf-gpt2"}
SEEDS = range(10)


def _smallest_seed(family: str) -> int:
    return min(SEEDS, key=lambda s: zoo.estimate_flops(zoo.sample_spec(family, s)))


def test_family_lists() -> None:
    assert set(zoo.FAMILIES) == EXPECTED_FAMILIES
    assert EXPECTED_REAL <= set(zoo.REAL_ARCHITECTURES)
    assert all(name.startswith("hf-") for name in zoo.REAL_ARCHITECTURES)
    assert not set(zoo.FAMILIES) & set(zoo.REAL_ARCHITECTURES)


@pytest.mark.parametrize("family", sorted(EXPECTED_FAMILIES | EXPECTED_REAL))
def test_spec_is_static_and_deterministic(family: str) -> None:
    for seed in (0, 7):
        spec = zoo.sample_spec(family, seed)
        assert spec == zoo.sample_spec(family, seed)
        assert spec.family == family and spec.seed == seed
        assert spec.model_id == f"{family}-{seed:06d}"
        batch = spec.hparams["batch"]
        assert isinstance(batch, int) and 1 <= batch <= 8
        assert spec.inputs, "a model needs at least one input"
        for name, (shape, dtype) in spec.inputs.items():
            assert isinstance(name, str)
            assert all(isinstance(d, int) and d > 0 for d in shape)
            assert shape[0] == batch
            assert dtype == ("int64" if family in TOKEN_FAMILIES else "float32")
        if family in TOKEN_FAMILIES:
            assert list(spec.inputs) == ["input_ids"]
        json.dumps(spec.hparams)  # JSON-serialisable


@pytest.mark.parametrize("family", sorted(EXPECTED_FAMILIES))
def test_generated_flops_in_window(family: str) -> None:
    flops = [zoo.estimate_flops(zoo.sample_spec(family, s)) for s in SEEDS]
    assert all(zoo.FLOP_MIN <= f <= zoo.FLOP_MAX for f in flops), flops
    assert len(set(flops)) > 1


@pytest.mark.parametrize("family", sorted(EXPECTED_FAMILIES))
def test_seeds_differ(family: str) -> None:
    hps = [json.dumps(zoo.sample_spec(family, s).hparams, sort_keys=True) for s in SEEDS]
    assert len(set(hps)) == len(hps)


@pytest.mark.parametrize("family", sorted(EXPECTED_FAMILIES))
def test_forward_runs(family: str) -> None:
    spec = zoo.sample_spec(family, _smallest_seed(family))
    model = zoo.build_model(spec)
    assert not model.training
    args = zoo.example_inputs(spec)
    assert len(args) == len(spec.inputs)
    for arg, (shape, dtype) in zip(args, spec.inputs.values(), strict=True):
        assert tuple(arg.shape) == shape
        assert str(arg.dtype) == f"torch.{dtype}"
        if dtype == "int64":
            assert 0 <= int(arg.min()) and int(arg.max()) < spec.hparams["vocab"]
    with torch.no_grad():
        out = model(*args)
    assert isinstance(out, torch.Tensor)
    assert out.shape[0] == spec.hparams["batch"]
    assert torch.isfinite(out).all()
    assert out.abs().max() > 1e-6  # activations neither vanish nor blow up


def test_build_is_deterministic_and_keeps_caller_rng() -> None:
    spec = zoo.sample_spec("nb201", _smallest_seed("nb201"))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = zoo.build_model(spec).state_dict()
    assert torch.equal(torch.rand(3), expected)
    b = zoo.build_model(spec).state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_export_is_byte_identical_and_static(tmp_path: Path) -> None:
    spec = zoo.sample_spec("gpt", _smallest_seed("gpt"))
    path = tmp_path / "sub" / f"{spec.model_id}.onnx"
    first = zoo.export_onnx(spec, path)
    second = zoo.export_onnx(spec)
    assert zoo.onnx_sha256(first) == zoo.onnx_sha256(second)
    assert len(zoo.onnx_sha256(first)) == 64
    assert zoo.onnx_sha256(onnx.load(str(path))) == zoo.onnx_sha256(first)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left over
    assert {o.domain: o.version for o in first.opset_import}.get("", 0) == zoo.ONNX_OPSET
    graph_inputs = {i.name: i for i in first.graph.input}
    assert list(graph_inputs) == list(spec.inputs)
    for name, (shape, _) in spec.inputs.items():
        dims = graph_inputs[name].type.tensor_type.shape.dim
        assert tuple(d.dim_value for d in dims) == shape
    ops = {n.op_type for n in first.graph.node}
    assert "Shape" not in ops  # reshapes use static sizes, so TVM imports without folding


@pytest.mark.parametrize("bad", ["alexnet", "", "HF-RESNET18", "resnet "])
def test_unknown_family_raises(bad: str) -> None:
    with pytest.raises(ModelLoadError, match="unknown model family"):
        zoo.sample_spec(bad, 0)
    spec = zoo.ModelSpec(family=bad, seed=0, hparams={"batch": 1}, inputs={})
    with pytest.raises(GnnperfError):
        zoo.build_model(spec)


@pytest.mark.parametrize("family", ["resnet", "bert", "nb201", "hf-gpt2"])
def test_spec_round_trip(family: str) -> None:
    spec = zoo.sample_spec(family, 5)
    d = spec.to_dict()
    again = zoo.ModelSpec.from_dict(json.loads(json.dumps(d)))
    assert again == spec
    assert again.model_id == spec.model_id
    assert again.to_dict() == d


def test_the_family_is_read_back_from_a_model_id() -> None:
    for spec in (zoo.sample_spec("resnet", 17), zoo.sample_spec("hf-bert-base", 3),
                 zoo.tiny_spec("hf-gpt2")):
        assert zoo.ModelSpec.family_of(spec.model_id) == spec.family
    with pytest.raises(GnnperfError, match="not a zoo model id"):
        zoo.ModelSpec.family_of("resnet")
