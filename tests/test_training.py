"""Training, checkpoints and prediction on a small real collection."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from gnnperf.data import LatencyDataset
from gnnperf.errors import BuildConfigError, CheckpointError, TrainingConfigError
from gnnperf.estimators.gnn.checkpoint import CHECKPOINT_FORMAT, Checkpoint, feature_columns
from gnnperf.estimators.gnn.network import (
    OVERHEAD_LOG_MS,
    OVERHEAD_LOG_SPAN,
    EnsembleGNN,
    LatencyGNN,
    ModelConfig,
)
from gnnperf.estimators.gnn.predictor import Predictor
from gnnperf.estimators.gnn.training import (
    TrainConfig,
    breakdown,
    kernel_share_weights,
    metrics,
    save_checkpoint,
    train_model,
)
from gnnperf.features import extract_graph
from gnnperf.hardware.spec import HardwareSpec, host_of
from gnnperf.lowering.pipeline import lower_onnx
from gnnperf.prediction.api import OutOfDistributionWarning, predict, predict_many

FAST = dict(epochs=4, patience=4, hidden=32, layers=2, batch_size=4, val_frac=0.25,
            test_frac=0.25, ensemble=1)


@pytest.fixture(scope="module")
def trained(small_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    ds = LatencyDataset(small_root)
    cfg = TrainConfig(**{**FAST, "ensemble": 2})
    result = train_model(ds, cfg, progress=False)
    assert result.metrics["members"] == 2 and len(result.metrics["best_epochs"]) == 2
    by_host = result.metrics["test_by_host"]
    assert sum(m["n"] for m in by_host.values()) == result.metrics["test"]["n"]
    assert sum(m["n"] for m in result.metrics["test_by_build"].values()) == len(
        result.indices["test"])
    path = save_checkpoint(result, cfg, ds, tmp_path_factory.mktemp("ckpt"))
    # half-precision weights move a prediction by far less than a percent
    model, scaler = Checkpoint.load(path).model()
    batch = Batch.from_data_list([scaler(ds[i]) for i in range(min(4, len(ds)))])
    with torch.no_grad():
        assert torch.allclose(model(batch).mu, result.model.eval()(batch).mu, atol=5e-3)
    return path


def test_metrics_definitions() -> None:
    m = metrics(np.array([1.08, 2.0, 2.91]), np.array([1.0, 2.0, 3.0]))
    assert m["mape"] == pytest.approx((8 + 0 + 3) / 3)
    assert m["rmspe"] == pytest.approx(math.sqrt((0.08**2 + 0 + 0.03**2) / 3) * 100)
    assert m["acc5"] == pytest.approx(200 / 3) and m["acc10"] == pytest.approx(100.0)
    assert m["spearman"] == pytest.approx(1.0) and m["kendall"] == pytest.approx(1.0)


def test_breakdown_scores_each_machine_apart() -> None:
    assert host_of("amd-epyc/x86-64-v3/2t") == "amd-epyc" and host_of("local") == "local"
    pred, true = np.array([1.1, 2.0, 4.0, 3.0]), np.array([1.0, 2.0, 2.0, 3.0])
    by = breakdown(pred, true, ["a", "a", "b", "b"])
    assert by["a"]["mape"] == pytest.approx(5.0) and by["b"]["mape"] == pytest.approx(50.0)
    assert by["a"]["n"] == by["b"]["n"] == 2


def test_model_outputs_per_graph_and_per_node(small_root: Path) -> None:
    ds = LatencyDataset(small_root)

    batch = Batch.from_data_list([ds[0], ds[1]])
    model = LatencyGNN(ModelConfig(in_dim=ds[0].x.shape[1], hw_dim=12, hidden=16, layers=1))
    out = model(batch)
    assert out.mu.shape == (2,) and out.log_sigma.shape == (2,)
    assert out.kernel_mu.shape == (batch.num_nodes,)
    # hiding the hardware really removes it: outputs stop depending on those columns
    blind = LatencyGNN(ModelConfig(in_dim=ds[0].x.shape[1], hw_dim=12, hidden=16, layers=1,
                                   use_hw=False))
    changed = batch.clone()
    changed.x[:, -12:] += 5.0
    assert torch.allclose(blind(batch).mu, blind(changed).mu)
    assert not torch.allclose(model(batch).mu, model(changed).mu)


def test_the_size_safe_head_holds_far_beyond_the_graph_sizes_it_saw(small_root: Path) -> None:
    """n side-by-side copies of a model run n times its kernels: the size-safe head
    predicts n times the time, and stays within its bounds of the kernel sum and the
    per-kernel overheads whatever its weights. The older head (a sum pool and log n read
    by an unbounded correction) does not: an unrolled RWKV of 6,168 kernels, 22x the
    largest training graph, was predicted e^9.5 times its kernel sum."""
    ds = LatencyDataset(small_root)
    one = ds[0]
    big = Batch.from_data_list([one] * 200)
    big.batch = torch.zeros_like(big.batch)  # the 200 copies as one graph (a disjoint union)
    copies = math.log(200)

    def build(size_safe: bool) -> LatencyGNN:
        torch.manual_seed(0)
        config = ModelConfig(in_dim=one.x.shape[1], hw_dim=12, hidden=16, layers=1,
                             size_safe_head=size_safe, ratio_bound=0.5)
        model = LatencyGNN(config)
        for p in model.graph_head.parameters():  # weights far from any trained ones
            p.data.mul_(20.0)
        return model

    safe, older = build(True), build(False)
    with torch.no_grad():
        assert abs(float(safe(big).mu - safe(one).mu) - copies) < 1e-3
        assert abs(float(older(big).mu - older(one).mu) - copies) > 0.5
        out = safe(big)
        summed = float(safe.additive_weight) * LatencyGNN.log_sum_exp(
            out.kernel_mu, torch.zeros(big.num_nodes, dtype=torch.long), 1)
    overhead = math.log(big.num_nodes) + OVERHEAD_LOG_MS
    low = float(summed) - 0.5
    high = float(torch.logaddexp(summed + 0.5, torch.tensor(overhead + OVERHEAD_LOG_SPAN)))
    assert low - 1e-4 <= float(out.mu) <= high + 1e-4


def test_ensemble_adds_member_disagreement_to_its_spread(small_root: Path) -> None:
    ds = LatencyDataset(small_root)
    cfg = ModelConfig(in_dim=ds[0].x.shape[1], hw_dim=12, hidden=16, layers=1, members=2)
    torch.manual_seed(0)
    ens = EnsembleGNN(cfg)
    batch = Batch.from_data_list([ds[0], ds[1]])
    with torch.no_grad():
        a, b = (m(batch) for m in ens.members)
        out = ens(batch)
    assert torch.allclose(out.mu, (a.mu + b.mu) / 2)
    own = ((2 * a.log_sigma).exp() + (2 * b.log_sigma).exp()) / 2
    spread = ((a.mu - b.mu) / 2) ** 2
    assert torch.allclose((2 * out.log_sigma).exp(), own + spread, rtol=1e-4)


def test_training_is_deterministic_and_reports(small_root: Path) -> None:
    from gnnperf.data import FeatureScaler

    ds = LatencyDataset(small_root)
    result = train_model(ds, TrainConfig(**FAST), progress=False)
    # normalisation comes from the training split only
    own = FeatureScaler.fit([ds[i] for i in result.indices["train"]])
    assert torch.allclose(result.scaler.x_mean, own.x_mean)
    everything = FeatureScaler.fit(list(ds))
    assert not torch.allclose(result.scaler.x_mean, everything.x_mean)
    assert not set(result.indices["test"]) & set(result.indices["train"] + result.indices["val"])
    a = result.metrics
    b = train_model(ds, TrainConfig(**FAST), progress=False).metrics
    for key in ("val", "test"):
        assert a[key]["mape"] == pytest.approx(b[key]["mape"])
    assert a["test_graphs"] > 0 and a["val_graphs"] > 0
    assert 0 <= a["test_interval_coverage"] <= 100


def test_checkpoint_round_trip_and_prediction(trained: Path, cnn_onnx: Path) -> None:
    ckpt = Checkpoint.load(trained)
    assert ckpt.dataset_fingerprint and ckpt.metrics["test"]["n"] > 0
    assert json.loads((trained.parent / "metrics.json").read_text())["test"]["mape"] >= 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = predict(cnn_onnx, "local/x86-64-v3/1t", build="sampled:0", checkpoint=trained)
    assert 0 < r.low_ms <= r.latency_ms <= r.high_ms
    assert r.coverage == pytest.approx(0.9)
    assert r.hw_id == "local/x86-64-v3/1t" and r.build == "sampled:0"
    assert r.kernels and all(k.ms > 0 for k in r.kernels)
    assert r.predict_s > 0
    assert ckpt.isas == ["x86-64-v3"] and ckpt.hosts is not None
    # predict_many on an already-lowered graph gives the same answer
    hw = HardwareSpec.from_id("local/x86-64-v3/1t")
    graph = extract_graph(lower_onnx(cnn_onnx, hw, "sampled:0"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        many = predict_many([graph, graph], hw, build="sampled:0", checkpoint=trained)
    assert len(many) == 2
    assert many[0].latency_ms == pytest.approx(r.latency_ms, rel=1e-4)
    with pytest.raises(BuildConfigError, match="lowered for build 'sampled:0'"):
        predict_many([graph], hw, build="default", checkpoint=trained)


@pytest.mark.usefixtures("measured_reference_times")
def test_out_of_distribution_hardware_warns(trained: Path) -> None:
    predictor = Predictor(trained)
    bare = HardwareSpec.from_id("local/x86-64-v3/1t")
    spec = predictor.hardware(bare)  # with this machine's reference-kernel times
    assert predictor.check_inputs(spec, "sampled:0") == []
    # trained on v2 records only: a spec without the times is named once, not per column
    (reason,) = predictor.check_inputs(bare, "sampled:0")
    assert "no reference-kernel times" in reason and "gnnperf hw" in reason
    far = HardwareSpec.from_dict({**spec.to_dict(), "peak_gflops": spec.peak_gflops * 64})
    assert any("peak_gflops" in r for r in predictor.check_inputs(far, "sampled:0"))
    assert any("build 'default'" in r for r in predictor.check_inputs(spec, "default"))
    # a busier or quieter moment on the same machine is not another machine; 8x is
    lo_ms, hi_ms = (2 ** v for v in predictor.checkpoint.hw_ranges["log2_ref_gemm_ms"])
    for ms, flagged in ((hi_ms * 1.8, False), (lo_ms / 1.8, False), (hi_ms * 8, True)):
        drifted = HardwareSpec.from_dict({**spec.to_dict(), "reference_ms": {
            **spec.reference_ms, "gemm": ms}})
        assert any("ref_gemm_ms" in r for r in predictor.check_inputs(
            drifted, "sampled:0")) is flagged, ms
    # an ISA the checkpoint never saw is named, with the in-distribution alternative
    v2 = HardwareSpec.from_dict({**spec.to_dict(), "isa": "x86-64-v2"})
    assert any("ISA x86-64-v2 was not in the training hardware (x86-64-v3); "
               "local/x86-64-v3" in r for r in predictor.check_inputs(v2, "sampled:0"))
    lo, hi = predictor.checkpoint.gflop_ranges["sampled"]
    assert predictor.check_inputs(spec, "sampled:0", gflop=(lo + hi) / 2) == []
    assert any("GFLOP" in r for r in predictor.check_inputs(spec, "sampled:0", gflop=hi * 10))
    # another seed of the sampled build is checked against the same range
    assert any("GFLOP" in r for r in predictor.check_inputs(spec, "sampled:7", gflop=hi * 10))
    # a graph of far more kernels than any training graph: the head holds there by
    # construction, the kernels' own estimates may not
    fewest, most = predictor.checkpoint.kernel_counts
    assert predictor.check_inputs(spec, "sampled:0", kernels=most) == []
    assert any(f"{most * 20} kernels" in r for r in predictor.check_inputs(
        spec, "sampled:0", kernels=most * 20))


def test_out_of_distribution_warning_is_raised(trained: Path, cnn_onnx: Path) -> None:
    spec = HardwareSpec.from_id("local/x86-64-v3/1t")
    far = HardwareSpec.from_dict({**spec.to_dict(), "mem_bw_gbs": spec.mem_bw_gbs * 64})
    with pytest.warns(OutOfDistributionWarning, match="mem_bw"):
        predict(cnn_onnx, far, build="sampled:0", checkpoint=trained)


def test_bad_checkpoints(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not found"):
        Checkpoint.load(tmp_path / "none.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        Checkpoint.load(junk)
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a gnnperf checkpoint"):
        Checkpoint.load(tmp_path / "other.pt")
    torch.save({"format": 99}, tmp_path / "future.pt")
    with pytest.raises(CheckpointError, match="format 99"):
        Checkpoint.load(tmp_path / "future.pt")


def test_an_older_checkpoint_layout_is_converted_on_load(trained: Path, tmp_path: Path) -> None:
    """Before ``isas`` and ``hosts`` were stored, both are derived from what was."""
    payload = torch.load(trained, weights_only=False)
    del payload["isas"], payload["hosts"]
    payload["metrics"] = {**payload["metrics"], "split": "random"}
    torch.save(payload, tmp_path / "old.pt")
    old, new = Checkpoint.load(tmp_path / "old.pt"), Checkpoint.load(trained)
    assert old.isas == new.isas == ["x86-64-v3"]
    assert old.hosts == sorted(new.metrics["test_by_host"])
    # and what save writes, load reads back field for field
    again = Checkpoint.load(new.save(tmp_path / "again.pt"))
    assert again.hw_ranges == new.hw_ranges and again.builds == new.builds
    assert again.state_dict.keys() == new.state_dict.keys()


def test_a_checkpoint_older_than_a_feature_reads_its_own_columns_by_name(
        tmp_path: Path) -> None:
    from gnnperf.data import FeatureScaler, feature_names
    names = feature_names()
    assert feature_columns(names, tmp_path) is None
    older = [n for n in names if not n.startswith("missing_") and n != "schedule_fallback"]
    columns = feature_columns(older, tmp_path)
    assert columns is not None and [names[i] for i in columns] == older
    with pytest.raises(CheckpointError, match="other features"):
        feature_columns([*older, "a_feature_from_the_future"], tmp_path)
    torch.save({"format": CHECKPOINT_FORMAT, "feature_names": ["nope"]}, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match="other features"):
        Checkpoint.load(tmp_path / "x.pt")
    # the scaler picks those columns out of today's encoding before scaling
    x = torch.arange(3 * len(names), dtype=torch.float32).reshape(3, len(names))
    zeros, ones = torch.zeros(len(older)), torch.ones(len(older))
    scaler = FeatureScaler(zeros, ones, torch.zeros(1), torch.ones(1), columns=columns)
    from torch_geometric.data import Data

    out = scaler(Data(x=x, edge_attr=torch.zeros((0, 1))))
    assert torch.equal(out.x, x[:, columns].clamp(-10, 10))
    # the shipped checkpoint, trained before the analysis flags existed, still loads
    shipped = Checkpoint.load(Path(__file__).resolve().parent.parent / "checkpoints")
    picked = shipped.feature_columns()
    assert (picked is None and shipped.feature_names == names) or \
        [names[i] for i in picked] == shipped.feature_names


def test_loss_options_change_the_objective(small_root: Path) -> None:
    from gnnperf.estimators.gnn.training import _loss

    ds = LatencyDataset(small_root)
    torch.manual_seed(0)
    model = LatencyGNN(ModelConfig(in_dim=ds[0].x.shape[1], hw_dim=12, hidden=16, layers=1))
    batch = Batch.from_data_list([ds[i] for i in range(3)])
    with torch.no_grad():
        base = float(_loss(model, batch, TrainConfig()))
        penalised = float(_loss(model, batch, TrainConfig(correction_weight=1.0)))
        huber = float(_loss(model, batch, TrainConfig(loss="huber")))
        correction = model(batch).correction
    assert penalised == pytest.approx(base + float(torch.mean(correction ** 2)), rel=1e-5)
    assert huber < base  # untrained errors are far beyond delta: Huber grows linearly


def test_kernel_share_weights_follow_each_graphs_time_split() -> None:
    # graph 0: kernels of 3 ms and 1 ms; graph 1: 2 ms and an unlabelled node
    y = torch.log(torch.tensor([3.0, 1.0, 2.0, 5.0]))
    batch = torch.tensor([0, 0, 1, 1])
    mask = torch.tensor([True, True, True, False])
    w = kernel_share_weights(y, batch, mask, power=1.0)
    assert torch.allclose(w, torch.tensor([0.75, 0.25, 1.0]))
    assert torch.allclose(kernel_share_weights(y, batch, mask, power=0.5), w.sqrt())
    # weighted: the loss follows the heavy kernel's error
    from gnnperf.estimators.gnn.training import _regression

    pred, target = torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.0])
    light = _regression(pred, target, TrainConfig(), torch.tensor([0.9, 0.1]))
    assert float(light) == pytest.approx(0.1)


def test_pre_v2_labels_weigh_less_in_the_whole_model_loss() -> None:
    from torch_geometric.data import Data

    from gnnperf.estimators.gnn.training import record_weights

    graphs = [Data(y=torch.zeros(1), v2=torch.tensor([flag])) for flag in (True, False, True)]
    batch = Batch.from_data_list(graphs)
    w = record_weights(batch, TrainConfig(legacy_weight=0.25))
    assert torch.equal(w, torch.tensor([1.0, 0.25, 1.0]))
    assert record_weights(batch, TrainConfig(legacy_weight=1.0)) is None
    with pytest.raises(TrainingConfigError, match="legacy_weight"):
        TrainConfig(legacy_weight=-1.0)


def test_build_balance_gives_every_build_kind_equal_weight_at_power_one() -> None:
    from torch_geometric.data import Data

    from gnnperf.estimators.gnn.training import build_balance_weights, record_weights

    builds = ["default"] * 6 + ["sampled:0", "sampled:3"] * 2 + ["best-of:16"]
    w = build_balance_weights(builds, 1.0)
    totals = {k: w[k] * n for k, n in {"default": 6, "sampled": 4, "best-of": 1}.items()}
    assert totals["default"] == pytest.approx(totals["sampled"]) == pytest.approx(
        totals["best-of"])
    assert sum(w[b.split(":")[0]] for b in builds) == pytest.approx(len(builds))  # mean 1
    assert all(v == pytest.approx(1.0) for v in build_balance_weights(builds, 0.0).values())
    # the balance multiplies the pre-v2 weight, graph by graph
    graphs = [Data(y=torch.zeros(1), v2=torch.tensor([flag]), build_weight=torch.tensor([bw]))
              for flag, bw in ((True, 2.0), (False, 0.5))]
    batch = Batch.from_data_list(graphs)
    got = record_weights(batch, TrainConfig(legacy_weight=0.25))
    assert torch.allclose(got, torch.tensor([2.0, 0.125]))
    with pytest.raises(TrainingConfigError, match="build_balance"):
        TrainConfig(build_balance=-1.0)


@pytest.mark.usefixtures("measured_reference_times")
def test_predictions_for_this_machine_see_its_reference_times(trained: Path) -> None:
    """A checkpoint trained on v2 records reads the reference kernels' times; for local
    hardware they are measured once and cached, so training and prediction agree."""
    fresh = Predictor(trained)
    assert fresh.sees_reference
    spec = fresh.hardware("local/x86-64-v3/1t")
    assert set(spec.reference_ms) == {"gemm", "stream", "chain"}
    assert fresh.check_inputs(spec, "sampled:0") == []
    # the shipped checkpoint is trained on v2 records too
    shipped = Predictor(Path(__file__).resolve().parent.parent / "checkpoints" / "gnnperf.pt")
    assert shipped.sees_reference
    # one from before measurement v2 has no reference columns: nothing is measured for it,
    # and the ranges of columns added after it was trained are not its concern
    legacy = Predictor.__new__(Predictor)
    legacy.checkpoint = dataclasses.replace(
        fresh.checkpoint,
        feature_names=[n for n in fresh.checkpoint.feature_names
                       if not n.startswith("hw_log2_ref_")],
        hw_ranges={k: v for k, v in fresh.checkpoint.hw_ranges.items() if "ref_" not in k})
    assert not legacy.sees_reference
    assert legacy.hardware("local/x86-64-v3/1t").reference_ms is None
    assert not any("ref_" in r for r in legacy.check_inputs(spec, "sampled:0"))
