"""``tuned:N`` as an estimator input: its build columns carry the budget, its kernels read
the design space's first draws as candidates, and only a checkpoint that learned it
predicts it."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import pytest
import torch

from gnnperf.data import graph_to_data
from gnnperf.errors import BuildConfigError
from gnnperf.estimators.gnn.predictor import Predictor
from gnnperf.features.schema import BUDGET_COLUMN, build_vector, feature_names
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BEST_OF_SCHEDULES


def test_a_tuned_build_sets_its_own_slot_and_its_budget() -> None:
    names = [n for n in feature_names() if n.startswith("build_")]
    assert names[-1] == BUDGET_COLUMN
    vector = dict(zip(names, build_vector("tuned:64"), strict=True))
    assert vector["build_evolutionary"] == 1.0 and vector[BUDGET_COLUMN] == 6.0
    assert sum(v for k, v in vector.items() if k != BUDGET_COLUMN) == 1.0
    # best-of keeps the column its checkpoints learned, and has no budget
    best_of = dict(zip(names, build_vector("best-of:16"), strict=True))
    assert best_of["build_tuned"] == 1.0 and best_of[BUDGET_COLUMN] == 0.0


@pytest.fixture(scope="module")
def hw() -> HardwareSpec:
    return HardwareSpec.local("x86-64-v3", 2, measure=False)


def test_tuned_graphs_differ_by_their_budget_only(tiny_graph, hw: HardwareSpec  # noqa: ANN001
                                                  ) -> None:
    graph = tiny_graph("resnet", "tuned:64")
    a, b = graph_to_data(graph, hw), graph_to_data(graph, hw, "tuned:256")
    budget = feature_names().index(BUDGET_COLUMN)
    assert bool((a.x[:, budget] == 6.0).all()) and bool((b.x[:, budget] == 8.0).all())
    other = [j for j in range(a.x.shape[1]) if j != budget]
    assert torch.equal(a.x[:, other], b.x[:, other])
    # a searched build: every kernel reads its candidates (or the tuned head)
    assert bool(a.kernel_tuned.all())
    # described by its workloads, as a best-of build is: the same kernel inputs
    best_of = graph_to_data(tiny_graph("resnet", "best-of:16"), hw)
    assert torch.equal(a.x_kernel, best_of.x_kernel)


@pytest.mark.slow
def test_a_tuned_prediction_reads_the_design_spaces_first_draws(hw: HardwareSpec) -> None:
    """Whatever N, the candidates are the BEST_OF_SCHEDULES first draws: the schedules the
    kernel dataset measured for the tuned records it trained on."""
    from gnnperf import zoo
    from gnnperf.features.tuned_candidates import graph_for_prediction
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.lowering.pipeline import lower

    model = load_onnx(zoo.export_onnx(zoo.sample_spec("op-dense", 0)))
    graphs = {b: graph_for_prediction(lower(import_to_relax(model), hw.target(), b))
              for b in ("tuned:256", f"best-of:{BEST_OF_SCHEDULES}")}
    tuned, best_of = (graphs[b] for b in graphs)
    tir = [n for n in tuned.nodes if n.kind == "tir"]
    assert tir and all(0 < len(n.candidates) <= BEST_OF_SCHEDULES for n in tir)
    assert [n.candidates for n in tuned.nodes] == [n.candidates for n in best_of.nodes]


def test_only_a_checkpoint_that_learned_tuned_builds_predicts_them(
        untuned_predictor: Predictor, tiny_graph, hw: HardwareSpec) -> None:  # noqa: ANN001
    graph = tiny_graph("resnet", "tuned:64")
    assert "tuned" not in untuned_predictor.learned_kinds
    with pytest.raises(BuildConfigError, match="has not learned tuned:N builds"):
        untuned_predictor.check_build("tuned:64")
    with pytest.raises(BuildConfigError):
        untuned_predictor.predict_graphs([(graph, hw)])
    # the shipped checkpoint trained on tuned:64 and tuned:256 records: any budget between
    # them is in distribution; outside them, said
    shipped = Predictor()
    assert shipped.check_build("tuned:64") == "tuned:64"
    assert shipped.trained_budgets() == [64, 256]
    assert not [r for r in shipped.check_inputs(hw, "tuned:128") if "budget" in r]
    assert any("tuned budget 512 is outside the trained 64..256" in r
               for r in shipped.check_inputs(hw, "tuned:512"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p64, p256 = shipped.predict_graphs([(graph, hw), (replace(graph, build="tuned:256"), hw)])
    assert p64.build == "tuned:64" and p256.build == "tuned:256"
    assert all(math.isfinite(p.latency_ms) and 0 < p.low_ms < p.latency_ms < p.high_ms
               for p in (p64, p256))
    # the budget is an input the network reads: two budgets, two predictions
    assert p64.latency_ms != p256.latency_ms


def test_a_searched_build_needs_enough_training_records(
        told_predictor, hw: HardwareSpec) -> None:  # noqa: ANN001
    """A budget seen in a handful of training records is refused, not predicted."""
    from gnnperf.estimators.gnn.predictor import MIN_SEARCHED_RECORDS

    few = told_predictor({"tuned:64": MIN_SEARCHED_RECORDS - 1})
    assert few.trained_budgets() == [256]
    assert any("tuned budget 64 is outside the trained 256..256" in r
               for r in few.check_inputs(hw, "tuned:64"))
    # a best-of:S seen a few times is out of distribution, as one never seen
    rare = told_predictor({"best-of:8": MIN_SEARCHED_RECORDS - 1})
    assert "best-of:8" in rare.checkpoint.builds and "best-of:8" not in rare.learned_builds
    assert any("'best-of:8' is not among the builds this checkpoint learned" in r
               for r in rare.check_inputs(hw, "best-of:8"))
    none = told_predictor({"tuned:64": 1, "tuned:256": MIN_SEARCHED_RECORDS - 1})
    assert "tuned" not in none.learned_kinds
    with pytest.raises(BuildConfigError, match="has not learned tuned:N builds"):
        none.check_build("tuned:64")
