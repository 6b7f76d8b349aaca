"""Lowering, build configurations and the kernel graph against real VM execution."""

from __future__ import annotations

from pathlib import Path

import pytest
import tvm

from gnnperf.errors import BuildConfigError
from gnnperf.features import KernelGraph, extract_graph, node_feature_names, node_feature_vector
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.lowering.pipeline import compile_lowered, lower_onnx
from gnnperf.lowering.schedules import kernel_hash
from gnnperf.measure import capture_kernel_calls, make_inputs

TARGET = {"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2}


def _executed_names(lowered) -> list[str]:
    ex = compile_lowered(lowered)
    lib = ex.mod
    arrays = make_inputs(lowered.inputs)
    return [name for name, _ in capture_kernel_calls(lib, tvm.cpu(), arrays)]


@pytest.mark.parametrize("fixture", ["cnn_onnx", "transformer_onnx", "branchy_onnx"])
@pytest.mark.parametrize("build", ["default", "sampled:0"])
def test_graph_nodes_are_the_executed_kernel_calls(fixture: str, build: str,
                                                   request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    lowered = lower_onnx(path, TARGET, build)
    graph = extract_graph(lowered, ms_features=False)
    executed = _executed_names(lowered)
    assert len(executed) > 0
    assert [n.name for n in graph.nodes] == executed
    assert all(0 <= a < b < len(graph.nodes) for a, b, _ in graph.edges)


def test_branchy_graph_has_fan_in_and_fan_out(branchy_onnx: Path) -> None:
    graph = extract_graph(lower_onnx(branchy_onnx, TARGET, "default"), ms_features=False)
    fan_in = {}
    for _, dst, nbytes in graph.edges:
        fan_in[dst] = fan_in.get(dst, 0) + 1
        assert nbytes > 0
    assert max(fan_in.values()) >= 2
    # the input feeds several branches: it is read by more than one kernel
    assert sum(n.input_bytes > 0 for n in graph.nodes) >= 2


def test_kernel_features_describe_the_work(cnn_onnx: Path) -> None:
    graph = extract_graph(lower_onnx(cnn_onnx, TARGET, "sampled:0"))
    conv = [n for n in graph.nodes if "conv2d" in n.ops]
    assert conv and all(n.flops > 0 and n.param_bytes > 0 for n in conv)
    assert all(len(n.ms_features) == 164 for n in graph.nodes if n.kind == "tir")
    # sampled schedules are parallel somewhere
    assert max(n.loops.get("parallel_extent", 1) for n in graph.nodes) > 1
    names = node_feature_names()
    assert all(len(node_feature_vector(n, len(graph.nodes))) == len(names) for n in graph.nodes)
    again = KernelGraph.from_dict(graph.to_dict())
    assert again.to_dict() == graph.to_dict()


def test_a_graph_stores_each_functions_candidates_once(cnn_onnx: Path) -> None:
    """A searched graph's calls of one function share its candidates: stored once per name
    (a BERT-base best-of graph went from 8.9 MB to a fraction), read back as one shared
    list; a call whose list differs keeps its own, and graphs written before still load."""
    from dataclasses import replace

    graph = extract_graph(lower_onnx(cnn_onnx, TARGET, "sampled:0"), ms_features=False)
    tir = next(n for n in graph.nodes if n.kind == "tir")
    same = [{"trace": [tir.name, s], "features": {"flops": 1.0}} for s in range(3)]
    calls = [replace(tir, index=0, candidates=same),
             replace(tir, index=1, candidates=[dict(c) for c in same]),  # equal, not shared
             replace(tir, index=2, candidates=same[:1])]  # differs: kept with its call
    searched = replace(graph, nodes=calls, edges=[(0, 1, 4), (1, 2, 4)], build="best-of:3")
    data = searched.to_dict()
    assert data["candidates"] == {tir.name: same}
    assert ["candidates" in n for n in data["nodes"]] == [False, False, True]
    again = KernelGraph.from_dict(data)
    assert [n.candidates for n in again.nodes] == [same, same, same[:1]]
    assert again.nodes[0].candidates is again.nodes[1].candidates
    assert again.to_dict() == data
    # the format before: every node its own list, none at the top
    old = {**data, "nodes": [{**n, "candidates": c.candidates}
                             for n, c in zip(data["nodes"], calls, strict=True)]}
    del old["candidates"]
    assert KernelGraph.from_dict(old).to_dict() == data
    # a call of the name without candidates stays without them
    bare = replace(searched, nodes=[*calls, replace(tir, index=3, candidates=[])])
    assert KernelGraph.from_dict(bare.to_dict()).nodes[3].candidates == []
    assert "candidates" not in graph.to_dict()  # unsearched graphs serialise as before


def test_default_build_is_unscheduled(cnn_onnx: Path) -> None:
    graph = extract_graph(lower_onnx(cnn_onnx, TARGET, "default"), ms_features=False)
    assert all(n.loops.get("parallel_extent", 1) == 1 for n in graph.nodes if n.kind == "tir")


def test_dlight_build_compiles_and_runs(transformer_onnx: Path) -> None:
    lowered = lower_onnx(transformer_onnx, TARGET, "dlight")
    graph = extract_graph(lowered, ms_features=False)
    assert [n.name for n in graph.nodes] == _executed_names(lowered)


def test_sampled_schedules_are_keyed_by_seed_and_kernel(cnn_onnx: Path) -> None:
    def hashes(build: str) -> dict[str, int]:
        lowered = lower_onnx(cnn_onnx, TARGET, build)
        return {name: kernel_hash(f) for name, f in lowered.primfuncs().items()}

    a, b, c = hashes("sampled:3"), hashes("sampled:3"), hashes("sampled:4")
    assert a == b
    assert a != c


@pytest.mark.parametrize("text", ["fast", "sampled:x", "sampled:-1", "default:3", "dlight:1",
                                  "tuned:0", "tuned:x", "best-of:0", "default:"])
def test_bad_build_strings_are_rejected(text: str) -> None:
    with pytest.raises(BuildConfigError):
        BuildConfig.parse(text)


def test_build_strings_round_trip() -> None:
    for text in ["default", "dlight", "sampled:0", "sampled:17", "best-of:16", "best-of:3",
                 "tuned:64", "tuned:256"]:
        assert str(BuildConfig.parse(text)) == text
    assert str(BuildConfig.parse("sampled")) == "sampled:0"
    assert str(BuildConfig.parse("best-of")) == "best-of:16"
    assert BuildConfig.parse("tuned:64").trials == 64 and BuildConfig.parse("tuned:64").searched
    assert not BuildConfig.parse("sampled:3").searched


def test_tuned_names_its_budget_and_says_what_the_old_tuned_build_is_now() -> None:
    """``tuned`` was the best of 16 sampled schedules; it now means MetaSchedule's
    evolutionary search, whose result depends on its trial budget, so the bare name is
    refused with both meanings spelled out."""
    with pytest.raises(BuildConfigError, match="needs its budget") as err:
        BuildConfig.parse("tuned")
    assert "best-of:16" in str(err.value) and "tuned:N" in str(err.value)


def test_onnx_operator_graph_counts_operators_and_flops(cnn_onnx: Path) -> None:
    from gnnperf.features import extract_onnx_graph
    from gnnperf.frontend import load_onnx

    model = load_onnx(cnn_onnx)
    graph = extract_onnx_graph(model)
    assert [n.name for n in graph.nodes] == [n.name for n in model.graph.node]
    convs = [n for n in graph.nodes if n.ops == ["conv2d"]]
    assert len(convs) == 3
    # first conv: 3->8 channels, 3x3, 16x16 output: 2 * 8*16*16 * 3*3*3 FLOPs
    assert convs[0].flops == 2 * 8 * 16 * 16 * 27
    assert all(0 <= a < b for a, b, _ in graph.edges)
    kernels = extract_graph(lower_onnx(cnn_onnx, TARGET, "default"), ms_features=False)
    assert len(graph.nodes) > len(kernels.nodes)  # fusion merged operators


def test_a_compilation_that_outlasts_its_timeout_is_killed_and_says_so(
        cnn_onnx: Path, tmp_path: Path) -> None:
    """The collector compiles in a child it can kill: LLVM can take an hour on one
    unrolled schedule, and that must be a recorded failure, not a hung collector."""
    from gnnperf.errors import LoweringError
    from gnnperf.lowering.pipeline import compile_to_files

    lowered = lower_onnx(cnn_onnx, HardwareSpec.from_id("local/x86-64-v3/1t"), "sampled:0")
    lib = compile_to_files(lowered, tmp_path / "model.so", tmp_path / "kernels.so",
                           timeout_s=300)
    assert lowered.timings["compile_s"] > 0
    vm = tvm.relax.VirtualMachine(tvm.runtime.load_module(str(lib)), tvm.cpu())
    assert vm is not None and (tmp_path / "kernels.so").stat().st_size > 0
    with pytest.raises(LoweringError, match="longer than 0.01 s"):
        compile_to_files(lowered, tmp_path / "slow.so", timeout_s=0.01)
    assert not (tmp_path / "slow.so").exists()
