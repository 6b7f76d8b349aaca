"""What holds physically holds in the predictions, by construction.

A kernel without a parallel loop runs on one core whatever the thread pool holds, so it
reads the one-thread view of the hardware (:meth:`HardwareSpec.serial_view`); a
``default`` build has no parallel loop at all, so its prediction cannot move with the
thread count. Checked on every zoo family and on corpus architectures of every modality.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from gnnperf import zoo
from gnnperf.data import graph_to_data
from gnnperf.estimators.gnn.predictor import Predictor
from gnnperf.features import extract_graph
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.pipeline import lower

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = ("tf-bert-l2h128", "tf-gpt2-l2h128", "tf-t5-l2h128", "tf-resnet-w25d34",
          "tf-swin-w25d34", "tf-wav2vec2-l2h128", "tf-whisper-l2h128")


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    return Predictor()  # the shipped checkpoint


@pytest.fixture(scope="module")
def two_threads() -> HardwareSpec:
    """A Zen 4 guest at 2 threads, with its one-thread figures (from its 1t records)."""
    return HardwareSpec.coerce(str(FIXTURES / "hw_zen4_v3_2t.json"))


def test_the_serial_view_is_the_cpu_at_one_thread(two_threads: HardwareSpec) -> None:
    one = two_threads.serial_view()
    assert one.threads == 1 and one.serial is None and one.isa == two_threads.isa
    assert one.peak_gflops == two_threads.serial["peak_gflops"]
    assert one.reference_ms == two_threads.serial["reference_ms"]
    assert one.serial_view() is one
    # a spec without one-thread figures derives them per thread
    bare = HardwareSpec.from_dict({**two_threads.to_dict(), "serial": None}).serial_view()
    assert bare.peak_gflops == pytest.approx(two_threads.peak_gflops / 2)


@pytest.mark.slow
@pytest.mark.parametrize("family", zoo.FAMILIES + zoo.REAL_ARCHITECTURES + CORPUS)
def test_default_builds_are_predicted_the_same_at_one_and_two_threads(
        family: str, predictor: Predictor, two_threads: HardwareSpec,
        tiny_graph) -> None:  # noqa: ANN001
    graph = tiny_graph(family, "default")
    one_thread = two_threads.serial_view()
    # every kernel of a default build is serial: the encoded inputs are identical
    a, b = graph_to_data(graph, two_threads), graph_to_data(graph, one_thread)
    assert (a.x == b.x).all() and (a.x_kernel == b.x_kernel).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        two, one = predictor.predict_graphs([(graph, two_threads), (graph, one_thread)],
                                            calibrated=False)
    assert two.latency_ms == pytest.approx(one.latency_ms, rel=0.05)


@pytest.mark.slow
def test_parallel_kernels_still_see_the_thread_count(two_threads: HardwareSpec,
                                                    tiny_graph) -> None:  # noqa: ANN001
    """The construction only pins serial kernels: a sampled build's parallel kernels read
    the hardware at its thread count (or 2 threads could never be predicted faster)."""
    graph = tiny_graph("vgg", "sampled:0")
    parallel = [n.index for n in graph.nodes
                if n.parallel]
    assert parallel, "a sampled build of a conv net has parallel kernels"
    a, b = graph_to_data(graph, two_threads), graph_to_data(graph, two_threads.serial_view())
    assert not (a.x[parallel] == b.x[parallel]).all()


@pytest.mark.slow
@pytest.mark.parametrize("family", zoo.FAMILIES + zoo.REAL_ARCHITECTURES + CORPUS)
def test_more_batch_is_never_predicted_faster_in_a_default_build(
        family: str, predictor: Predictor, two_threads: HardwareSpec) -> None:
    """Serial kernels do proportionally more work at a larger batch. (A ``sampled`` build
    draws other schedules for other shapes, so there a larger batch may really be faster.)"""
    from gnnperf.zoo.registry import inputs_for
    from gnnperf.zoo.spec import ModelSpec

    # its own batch may be any: 1, 2 and 4 are set here (a corpus architecture at its
    # first size)
    base = zoo.tiny_spec(family) if family not in CORPUS else zoo.sample_spec(family, 0)
    graphs = []
    for batch in (1, 2, 4):
        hp = {**base.hparams, "batch": batch}
        spec = ModelSpec(family, base.seed, hp, inputs_for(family, hp))
        graphs.append(extract_graph(lower(import_to_relax(load_onnx(zoo.export_onnx(spec))),
                                          two_threads, "default")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ms = [p.latency_ms for p in predictor.predict_graphs(
            [(g, two_threads) for g in graphs], calibrated=False)]
    assert ms == sorted(ms), ms


def test_one_memo_encodes_shared_nodes_as_a_fresh_encoding_does(
        two_threads: HardwareSpec, cnn_onnx: Path) -> None:
    """``advise`` encodes one lowered graph for every build and thread count with one
    :class:`EncodingMemo`: each item must equal the graph encoded alone, candidate
    schedules included."""
    from dataclasses import replace

    from gnnperf.data.encoding import EncodingMemo
    from gnnperf.prediction.graphs import lower_for_prediction

    graph = lower_for_prediction(cnn_onnx, two_threads, "best-of:16")
    assert any(node.candidates for node in graph.nodes)
    memo = EncodingMemo()
    for hw in (two_threads, two_threads.serial_view(), two_threads):
        for build in ("best-of:16", "default", "tuned:64", "best-of:16"):
            shared = graph_to_data(replace(graph, build=build), hw, memo=memo)
            alone = graph_to_data(replace(graph, build=build), hw)
            for name in ("x", "x_kernel", "x_candidates", "candidates_node_index",
                         "candidates_serial", "edge_index", "edge_attr", "node_serial",
                         "kernel_tuned"):
                assert torch.equal(shared[name], alone[name]), name
            assert len(shared.x_candidates) == (0 if build == "default" else sum(
                len(node.candidates) for node in graph.nodes))
    # features once; kernel rows and candidate rows once per hardware (2)
    assert len(memo.tables) == 5
