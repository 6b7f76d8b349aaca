"""A model that TVM compiles gets a graph and a prediction, whatever kernels it has.

Kernels MetaSchedule cannot analyse (scans such as ``cumsum`` and ``topk``) get their
missing analyses flagged; kernels a build cannot schedule stay as they were, and the
graph says so. The sweep covers every family of the zoo at its tiny size under every
build, through the same calls ``gnnperf graph`` and ``gnnperf predict`` make.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
import tvm

from gnnperf import zoo
from gnnperf.cli import main
from gnnperf.data import feature_names, graph_to_data
from gnnperf.estimators.gnn.predictor import Predictor
from gnnperf.features import KernelGraph, extract_graph
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.lowering.pipeline import lower, lower_onnx
from gnnperf.lowering.schedules import apply_build

BUILDS = ("default", "dlight", "sampled:0")
HW = "local/x86-64-v3/2t"
COLUMNS = {name: i for i, name in enumerate(feature_names())}


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    return Predictor()  # the shipped checkpoint


@pytest.fixture(scope="module")
def hw() -> HardwareSpec:
    return HardwareSpec.coerce(HW)


@pytest.fixture(scope="module")
def roberta_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RoBERTa's embeddings count positions with a cumsum over non-padding tokens."""
    path = tmp_path_factory.mktemp("roberta") / "roberta.onnx"
    zoo.export_onnx(zoo.tiny_spec("hf-roberta-base"), path)
    return path


def _check_prediction(predictor: Predictor, graph: KernelGraph, hw: HardwareSpec) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny models lie below the training FLOPs
        result = predictor.predict_graphs([(graph, hw)])[0]
    assert math.isfinite(result.latency_ms) and result.latency_ms > 0
    assert result.low_ms <= result.latency_ms <= result.high_ms
    assert len(result.kernels) == len(graph.nodes)
    assert all(math.isfinite(k.ms) and k.ms > 0 for k in result.kernels)


@pytest.mark.parametrize("family", zoo.FAMILIES + zoo.REAL_ARCHITECTURES)
def test_every_zoo_family_gets_a_graph_and_a_prediction_under_every_build(
        family: str, predictor: Predictor, hw: HardwareSpec, tiny_graph) -> None:  # noqa: ANN001
    assert zoo.tiny_spec(family).model_id.endswith("tiny")
    for build in BUILDS:
        graph = tiny_graph(family, build)
        assert graph.nodes and graph.build == build
        assert any(n.kind == "tir" for n in graph.nodes)
        _check_prediction(predictor, graph, hw)


def test_scan_kernels_are_nodes_with_their_missing_analyses_flagged(
        roberta_onnx: Path, predictor: Predictor, hw: HardwareSpec) -> None:
    for build in BUILDS:
        graph = extract_graph(lower_onnx(roberta_onnx, hw, build))
        cumsum = [n for n in graph.nodes if "cumsum" in n.ops]
        assert len(cumsum) == 1, [n.name for n in graph.nodes]
        node = cumsum[0]
        assert node.missing == ["loops"] and node.loops == {}
        assert node.flops > 0 and len(node.ms_features) > 0  # the other analyses still ran
        x = graph_to_data(graph, hw).x
        assert x[node.index, COLUMNS["missing_loops"]] == 1.0
        assert x[:, COLUMNS["missing_loops"]].sum() == 1.0
        assert x[:, COLUMNS["missing_flops"]].sum() == 0.0
        assert graph.summary()["kernels_missing_analyses"] == 1
        _check_prediction(predictor, graph, hw)


def test_graph_and_predict_commands_take_a_cumsum_model(
        roberta_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(roberta_onnx), "--isa", "x86-64-v3", "--build", "sampled:0",
                 "--json"]) == 0
    kernels = json.loads(capsys.readouterr().out)["kernels"]
    assert [k["missing"] for k in kernels if k["name"].startswith("cumsum")] == [["loops"]]
    assert main(["predict", str(roberta_onnx), "--hw", HW, "--build", "sampled:0",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["latency_ms"] > 0 and len(result["kernels"]) == len(kernels)


def test_a_kernel_the_build_cannot_schedule_stays_unscheduled_and_is_recorded(
        predictor: Predictor, hw: HardwareSpec) -> None:
    # dlight's GEMV rule asserts on one of ConvNeXt's depthwise convolutions (TVM 0.27)
    mod = import_to_relax(load_onnx(zoo.export_onnx(zoo.tiny_spec("hf-convnext-tiny"))))
    lowered = lower(mod, hw, "dlight")
    assert lowered.schedule_fallbacks
    assert all(r.startswith("dlight failed") for r in lowered.schedule_fallbacks.values())
    default = lower(mod, hw, "default").primfuncs()
    for name in lowered.schedule_fallbacks:
        tvm.ir.assert_structural_equal(lowered.primfuncs()[name], default[name])
    graph = extract_graph(lowered)
    flagged = {n.name for n in graph.nodes if n.schedule_fallback}
    assert flagged == set(lowered.schedule_fallbacks)
    x = graph_to_data(graph, hw).x
    assert x[:, COLUMNS["schedule_fallback"]].sum() == sum(
        n.name in flagged for n in graph.nodes)
    _check_prediction(predictor, graph, hw)


def test_sampling_failures_leave_each_kernel_as_it_was(hw: HardwareSpec) -> None:
    """MetaSchedule refuses a target without ``num-cores``: every kernel keeps its form."""
    from tvm.relax.backend.cpu_generic import pipeline

    target = tvm.target.Target({"kind": "llvm", "mcpu": "x86-64-v3"})
    mod = import_to_relax(load_onnx(zoo.export_onnx(zoo.tiny_spec("vgg"))))
    with target:
        fused = tvm.transform.Sequential(pipeline.library_dispatch_passes(target)
                                         + pipeline.legalize_passes(target))(mod)
    before = {gv.name_hint: f for gv, f in fused.functions.items()
              if isinstance(f, tvm.tirx.PrimFunc)}
    out, fallbacks, _ = apply_build(fused, BuildConfig.parse("sampled:3"), target)
    assert set(fallbacks) == set(before)
    assert all("num-cores" in reason for reason in fallbacks.values())
    for name, func in before.items():
        tvm.ir.assert_structural_equal(out[name], func)
