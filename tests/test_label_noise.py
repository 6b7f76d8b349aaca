"""Labels weigh by their machine's and build's noise floor (issue 45: a CPU whose A/A floor
is above 5% has its labels' weights follow the floor)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch_geometric.data import Batch, Data

from gnnperf.data.label_noise import MIN_PAIRS, SIGMA_PER_AA_ERROR, LabelNoise
from gnnperf.errors import TrainingConfigError
from gnnperf.estimators.gnn.config import TrainConfig
from gnnperf.estimators.gnn.training import attach_noise_weights, record_weights, train_model


def _pairs(host: str, build: str, ratio: float, n: int) -> list[tuple[Any, Any]]:
    first = {"hw_id": f"{host}/x86-64-v3/1t", "build": build, "whole": {"median_ms": 1.0}}
    second = {"whole": {"median_ms": ratio}}
    return [(first, second)] * n


def test_a_label_reads_its_machine_and_build_floor_or_falls_back() -> None:
    pairs = (_pairs("quiet", "default", 1.02, MIN_PAIRS)
             + _pairs("quiet", "sampled:0", 1.30, MIN_PAIRS - 1)  # too few for its own floor
             + _pairs("noisy", "sampled:3", 1.20, MIN_PAIRS))
    noise = LabelNoise.from_pairs(pairs)
    assert noise.sigma("quiet/x86-64-v2/2t", "default") == pytest.approx(
        0.02 * SIGMA_PER_AA_ERROR)
    # too few sampled pairs on "quiet": the machine's floor over both of its builds
    quiet = (0.02 * MIN_PAIRS + 0.30 * (MIN_PAIRS - 1)) / (2 * MIN_PAIRS - 1)
    assert noise.sigma("quiet/x86-64-v3/1t", "sampled:0") == pytest.approx(
        quiet * SIGMA_PER_AA_ERROR)
    # the build kind counts, not the seed
    assert noise.sigma("noisy/x86-64-v3/2t", "sampled:0") == pytest.approx(
        0.20 * SIGMA_PER_AA_ERROR)
    # a machine never re-measured: the whole dataset's floor
    everything = (0.02 * MIN_PAIRS + 0.30 * (MIN_PAIRS - 1) + 0.2 * MIN_PAIRS) / (
        3 * MIN_PAIRS - 1)
    assert noise.sigma("other/x86-64-v3/1t", "best-of:16") == pytest.approx(
        everything * SIGMA_PER_AA_ERROR)
    assert LabelNoise.from_pairs([]).sigma("quiet/x86-64-v3/1t", "default") is None


def test_the_sigma_of_a_pair_error_is_that_of_gaussian_log_noise() -> None:
    """E|log(a/b)| of two independent draws with log-noise sigma is 2 sigma / sqrt(pi)."""
    gen = torch.Generator().manual_seed(0)
    sigma = 0.05
    a, b = (torch.randn(200_000, generator=gen) * sigma for _ in range(2))
    pair_error = float((a - b).abs().mean())
    assert pair_error * SIGMA_PER_AA_ERROR == pytest.approx(sigma, rel=0.02)


def test_noisier_labels_weigh_less_and_weights_average_one() -> None:
    noise = LabelNoise({"quiet/default": 0.02, "noisy/sampled": 0.2})
    labels = [("quiet/x/1t", "default"), ("noisy/x/1t", "sampled:0"), ("new/x/1t", "best-of:16")]
    w = noise.weights(labels, model_sigma=0.1)
    assert sum(w) == pytest.approx(3.0)
    raw = [1 / (0.01 + 0.02 ** 2), 1 / (0.01 + 0.2 ** 2), 1 / (0.01 + 0.11 ** 2)]
    assert w == pytest.approx([3 * r / sum(raw) for r in raw])
    assert w[0] > w[2] > w[1]
    # a label as noisy as the model is wrong weighs half what a noiseless one does
    half = LabelNoise({"a/default": 0.0, "b/default": 0.1}).weights(
        [("a/x/1t", "default"), ("b/x/1t", "default")], model_sigma=0.1)
    assert half[1] / half[0] == pytest.approx(0.5)
    with pytest.raises(TrainingConfigError, match="model_sigma"):
        TrainConfig(model_sigma=0.0)


def test_noise_weights_multiply_the_other_record_weights() -> None:
    graphs = [Data(y=torch.zeros(1), v2=torch.tensor([flag]), hw_id=hw, build="default")
              for flag, hw in ((True, "quiet/x/1t"), (False, "noisy/x/1t"))]
    attach_noise_weights(graphs, LabelNoise({"quiet": 0.0, "noisy": 0.1}), model_sigma=0.1)
    assert [float(g.noise_weight) for g in graphs] == pytest.approx([4 / 3, 2 / 3])
    got = record_weights(Batch.from_data_list(graphs), TrainConfig(legacy_weight=0.25))
    assert torch.allclose(got, torch.tensor([4 / 3, 2 / 3 * 0.25]))


def test_training_weighs_its_records_by_the_floors_and_says_which_it_followed(
        small_root, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    from gnnperf.data import LatencyDataset
    from gnnperf.estimators.gnn import training

    ds = LatencyDataset(small_root)
    fast = dict(epochs=1, patience=1, hidden=16, layers=1, batch_size=8, ensemble=1,
                val_frac=0.25, test_frac=0.25, kernel_model="none")
    weighed: list[tuple[list[str], LabelNoise]] = []
    real = training.attach_noise_weights

    def spy(train_set, noise, model_sigma):  # noqa: ANN001, ANN202
        weighed.append(([str(d.key) for d in train_set], noise))
        real(train_set, noise, model_sigma)
        # every training graph carries its weight into the loss (record_weights)
        assert all(float(d.noise_weight) > 0 for d in train_set)

    monkeypatch.setattr(training, "attach_noise_weights", spy)
    noise = LabelNoise({"*": 0.05})
    result = train_model(ds, TrainConfig(**fast), progress=False, label_noise=noise)
    assert result.metrics["label_noise"] == {"*": 0.05}
    train_keys = {str(ds[i].key) for i in result.indices["train"]}
    assert len(weighed) == 1 and set(weighed[0][0]) == train_keys and weighed[0][1] is noise
    off = train_model(ds, TrainConfig(**fast, label_noise_weighting=False), progress=False,
                      label_noise=noise)
    assert off.metrics["label_noise"] is None and len(weighed) == 1
    # read from the dataset's folder when not given (this one has no re-measurements)
    auto = train_model(ds, TrainConfig(**fast), progress=False)
    assert weighed[-1][1] == LabelNoise.of(ds.folder)
    assert auto.metrics["label_noise"] == dict(LabelNoise.of(ds.folder).sigmas)
