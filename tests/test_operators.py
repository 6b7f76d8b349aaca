"""The operator sweep: configurations inside the budget, spread over each operator's space,
lowering to the kernels they stand for, and a measuring budget split by error."""

from __future__ import annotations

import warnings

import pytest
from conftest import HASTY

from gnnperf import zoo
from gnnperf.cli.common import parse_families
from gnnperf.zoo.operators import MAX_ELEMENTS, MAX_FLOPS, OPERATORS, allocate_sweep

SEEDS = range(40)


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_configurations_are_seeded_within_the_budget_and_round_trip(name: str) -> None:
    specs = [zoo.sample_spec(name, seed) for seed in SEEDS]
    assert [s.hparams for s in specs] == [zoo.sample_spec(name, seed).hparams for seed in SEEDS]
    assert len({str(s.hparams) for s in specs}) >= 0.8 * len(specs)  # draws, not one config
    for spec in specs:
        flops, elements = OPERATORS[name].cost(spec.hparams)
        assert flops <= MAX_FLOPS and elements <= MAX_ELEMENTS
        assert zoo.ModelSpec.from_dict(spec.to_dict()) == spec
        assert spec.model_id.startswith(name)


def test_convolutions_cover_groups_dilation_stride_and_kernel_sizes() -> None:
    for name in ("op-conv1d", "op-conv2d"):
        hps = [zoo.sample_spec(name, seed).hparams for seed in SEEDS]
        assert any(hp["groups"] == hp["cin"] > 1 for hp in hps), name  # depthwise
        assert any(1 < hp["groups"] < hp["cin"] for hp in hps), name
        assert {hp["dilation"] for hp in hps} >= {1, 2}, name
        assert {hp["stride"] for hp in hps} == {1, 2}, name
        assert len({hp["kernel"] for hp in hps}) >= 3, name


def test_each_operator_lowers_to_its_kernel_and_gets_a_prediction() -> None:
    from gnnperf.estimators.gnn.predictor import load_predictor
    from gnnperf.features import extract_graph
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.pipeline import lower

    hw = HardwareSpec.coerce("local/x86-64-v3/2t")
    expected = {"op-conv1d": "conv1d", "op-conv2d": "conv2d", "op-conv3d": "conv3d",
                "op-dense": "matmul", "op-matmul": "matmul", "op-batch-matmul": "matmul",
                "op-pool": "pool", "op-reduce": "", "op-norm": "norm",
                "op-softmax": "softmax", "op-elementwise": "", "op-layout": "",
                "op-gather": "take"}
    assert set(expected) == set(OPERATORS)
    for name, kernel in expected.items():
        mod = import_to_relax(load_onnx(zoo.export_onnx(zoo.sample_spec(name, 0))))
        graph = extract_graph(lower(mod, hw.target(), "sampled:0"))
        names = [n.name for n in graph.nodes if n.kind == "tir"]
        assert 1 <= len(names) <= 3, (name, names)
        assert any(kernel in n for n in names), (name, names)
        assert not [n.schedule_fallback for n in graph.nodes if n.schedule_fallback], name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = load_predictor().predict_graphs([(graph, hw)])[0]
        assert result.latency_ms > 0


def test_the_budget_goes_where_the_kernel_model_errs() -> None:
    errors = {"op-conv1d": 0.8, "op-dense": 0.1, "op-softmax": 0.2}
    counts = allocate_sweep(errors, total=200, floor=2)
    assert sum(counts.values()) == 200 and set(counts) == set(OPERATORS)
    assert min(counts.values()) >= 2
    assert counts["op-conv1d"] > counts["op-softmax"] > counts["op-dense"]
    # nothing known about an operator: it gets what the worst known one gets
    assert abs(counts["op-gather"] - counts["op-conv1d"]) <= 1
    assert allocate_sweep({}, total=len(OPERATORS) * 3) == dict.fromkeys(OPERATORS, 3)
    with pytest.raises(ValueError):
        allocate_sweep(errors, total=5, floor=1)


def test_sweep_expands_to_every_operator() -> None:
    assert parse_families("resnet,sweep") == ["resnet", *zoo.SWEEP]
    assert all(not zoo.corpus.is_real_architecture(f) for f in zoo.SWEEP)
    assert all(zoo.source_family(f) == f for f in zoo.SWEEP)


def test_interleaving_follows_a_plan() -> None:
    from gnnperf.collect.models import interleaved_specs

    specs = list(interleaved_specs(["op-norm", "op-pool"], {"op-norm": 3, "op-pool": 1}))
    assert [(s.family, s.seed) for s in specs] == [
        ("op-norm", 0), ("op-pool", 0), ("op-norm", 1), ("op-norm", 2)]


@pytest.mark.parametrize("text", ["[1, 2]", '{"op-norm": -1}', '{"op-nothing": 2}', "{"])
def test_a_bad_plan_is_one_line(tmp_path, capsys, text: str) -> None:  # noqa: ANN001
    from gnnperf.cli import main

    plan = tmp_path / "plan.json"
    plan.write_text(text)
    assert main(["collect", "--out", str(tmp_path / "ds"), "--plan", str(plan)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plan" in err
    assert not (tmp_path / "ds").exists()


@pytest.mark.slow
def test_a_measured_sweep_plans_its_next_seeds_by_error(tmp_path) -> None:  # noqa: ANN001
    """Collect follows a plan; the next plan scores what was measured and adds seeds."""
    import json
    import subprocess
    import sys

    from gnnperf.collect.sweep import plan_sweep, sweep_errors
    from gnnperf.estimators.gnn.predictor import load_predictor

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"op-elementwise": 2, "op-norm": 1}))
    proc = subprocess.run(
        [sys.executable, "-m", "gnnperf", "collect", "--out", str(tmp_path), "--plan",
         str(plan), "--hw", "x86-64-v3:1", "--build", "sampled:0", "--repeat", "3",
         *HASTY, "--no-per-kernel"], capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = sweep_errors(tmp_path, load_predictor())
    assert set(errors) == {"op-elementwise", "op-norm"}
    assert all(e >= 0 for e in errors.values())
    counts, same = plan_sweep(tmp_path, add=2 * len(OPERATORS), predictor=load_predictor())
    assert same == errors and sum(counts.values()) == 3 + 2 * len(OPERATORS)
    assert counts["op-elementwise"] >= 3 and counts["op-norm"] >= 2
