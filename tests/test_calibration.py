"""Few-shot calibration: measured here, fitted, stored per CPU and checkpoint, applied by
``predict`` to that CPU only, and removable."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from gnnperf import zoo
from gnnperf.calibrate import (
    Calibration,
    CalibrationPoint,
    checkpoint_sha256,
    load_calibration,
    save_calibration,
)
from gnnperf.calibrate.prior import PRIOR_FILE, UnseenCpuPrior, load_prior
from gnnperf.errors import GnnperfError


def test_the_fit_is_the_median_log_ratio_and_its_spread() -> None:
    points = [CalibrationPoint(f"m{i}", 1.0, measured, 0.01)
              for i, measured in enumerate([1.5, 2.0, 2.5, 100.0])]  # one odd model
    fitted = Calibration.fit(points, cpu_id="cpu", checkpoint_sha256="x", hw_id="h",
                             build="sampled:0")
    ratios = [math.log(m) for m in (1.5, 2.0, 2.5, 100.0)]
    assert fitted.log_factor == pytest.approx((ratios[1] + ratios[2]) / 2)
    assert fitted.factor < 2.5  # the odd model does not drag the factor
    assert fitted.log_spread == pytest.approx(
        math.sqrt(sum((r - fitted.log_factor) ** 2 for r in ratios) / 3))
    with pytest.raises(GnnperfError):
        Calibration.fit(points[:1], cpu_id="cpu", checkpoint_sha256="x", hw_id="h",
                        build="sampled:0")


def test_each_build_kind_and_thread_count_gets_its_own_factor() -> None:
    measured = {("sampled:0", 2): [2.0, 2.0], ("sampled:0", 1): [1.2],  # one model: too few
                ("default", 2): [0.5, 0.5], ("default", 1): [0.5]}
    points = [CalibrationPoint(f"m{i}", 1.0, ms, 0.01, build, threads)
              for (build, threads), values in measured.items()
              for i, ms in enumerate(values)]
    fitted = Calibration.fit(points, cpu_id="cpu", checkpoint_sha256="x", hw_id="h",
                             build="default,sampled:0")
    # default builds have no parallel loop: one cell for every thread count
    assert sorted(fitted.cells) == ["default/1t", "sampled/2t"]
    assert math.exp(fitted.correction("sampled:0", 2)[0]) == pytest.approx(2.0)
    assert math.exp(fitted.correction("default", 2)[0]) == pytest.approx(0.5)
    assert fitted.correction("default", 1) == fitted.correction("default", 2)
    assert fitted.correction("default", 2)[1] == pytest.approx(0.0)
    # tuned builds, which a new machine cannot measure, take sampled's factor
    assert fitted.correction("best-of:16", 2) == fitted.correction("sampled:0", 2)
    assert fitted.correction("tuned:64", 2) == fitted.correction("sampled:0", 2)
    # a cell measured on fewer than two models falls back to all points together
    assert fitted.correction("sampled:7", 1) == (fitted.log_factor, fitted.log_spread)
    assert math.exp(fitted.log_factor) == pytest.approx(math.sqrt(0.5 * 1.2))  # the median
    # a store written before per-cell factors reads back with one factor for everything
    old = {k: v for k, v in fitted.to_dict().items() if k != "cells"}
    old["points"] = [{k: v for k, v in p.items() if k not in ("build", "threads")}
                     for p in old["points"]]
    assert Calibration.from_dict(old).correction("default", 2) == (fitted.log_factor,
                                                                   fitted.log_spread)
    assert Calibration.from_dict(fitted.to_dict()) == fitted


def test_calibration_models_spread_over_sizes_and_families() -> None:
    from gnnperf.calibrate.selection import Candidate, spread_by_size

    # family a has every size from 1 to 9 MFLOP, family b the middle ones
    candidates = [Candidate(f"a{i}", "a", i / 1000) for i in range(1, 10)]
    candidates += [Candidate(f"b{i}", "b", i / 1000 + 5e-4) for i in (4, 5, 6)]
    # 12 sorted by size, cut into three bins of four: each gives the model nearest its
    # middle from the family chosen least so far, so the middle bin goes to family b
    assert spread_by_size(candidates, 3) == ["a2", "b5", "a7"]
    assert spread_by_size(list(reversed(candidates)), 3) == ["a2", "b5", "a7"]
    # every size band is drawn from, not the largest models only
    picked = spread_by_size(candidates, 6)
    sizes = sorted(c.gflop for c in candidates if c.model_id in picked)
    assert len(set(picked)) == 6 and sizes[0] <= 0.002 and sizes[-1] >= 0.008
    with pytest.raises(GnnperfError, match="only 12 candidate"):
        spread_by_size(candidates, 13)


def test_the_unseen_cpu_prior_is_the_rms_cell_bias_over_held_out_cpus(tmp_path: Path
                                                                      ) -> None:
    # measured / predicted: cpu a x1.5 in sampled 2t, cpu b /1.5 there; both exact in default
    rows = [(cpu, build, 2, ms, 1.0) for cpu, ms in (("a", 1.5), ("b", 1 / 1.5))
            for build in ("sampled:0", "sampled:3")]
    rows += [(cpu, "default", 2, 1.0, 1.0) for cpu in ("a", "b") for _ in range(2)]
    rows += [("c", "default", 2, 9.0, 1.0)]  # one record: too few to say c's bias
    prior = UnseenCpuPrior.from_records(rows, source="test")
    assert prior.cpus == ["a", "b"]
    # the sign of a CPU's bias does not transfer, its size does: log 1.5 from +/- log 1.5
    assert prior.pooled_log_spread == pytest.approx(math.log(1.5) / math.sqrt(2))
    assert prior.cells == {}  # two CPUs per cell: each cell takes the pooled spread
    assert prior.log_spread("best-of:16", 1) == prior.pooled_log_spread
    third = [("d", "sampled:0", 2, 2.0, 1.0)] * 2
    prior3 = UnseenCpuPrior.from_records(rows + third)
    assert prior3.cells == pytest.approx({"sampled/2t": math.sqrt(
        (2 * math.log(1.5) ** 2 + math.log(2.0) ** 2) / 3)})
    assert prior3.log_spread("best-of:16", 2) == prior3.cells["sampled/2t"]
    # stored beside a checkpoint, read back the same; a broken file is a one-line error
    path = prior.save(tmp_path / PRIOR_FILE)
    assert load_prior(path) == prior
    assert load_prior(tmp_path / "missing.json") is None
    path.write_text("{")
    with pytest.raises(GnnperfError, match="unreadable"):
        load_prior(path)
    with pytest.raises(GnnperfError):
        UnseenCpuPrior.from_records(rows[-1:])


@pytest.mark.slow
def test_predict_widens_an_uncalibrated_unseen_cpu_by_the_prior(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cnn_onnx: Path) -> None:
    from gnnperf.estimators.gnn.predictor import load_predictor
    from gnnperf.estimators.gnn.training import INTERVAL_Z
    from gnnperf.estimators.types import default_checkpoint
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.prediction.api import predict

    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "gnnperf.pt").symlink_to(default_checkpoint().resolve())
    UnseenCpuPrior(0.3, {"sampled/2t": 0.5}).save(folder / PRIOR_FILE)
    checkpoint = folder / "gnnperf.pt"
    predictor = load_predictor(checkpoint)
    hw = HardwareSpec.from_id("local/x86-64-v3/2t")

    def run(build: str) -> tuple[float, float, str, str]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = predict(cnn_onnx, hw, build=build, checkpoint=checkpoint)
        return p.latency_ms, math.log(p.high_ms / p.low_ms) / 2, p.unseen_cpu, p.calibration

    predictor.checkpoint.hosts = [hw.cpu_id]  # trained on this CPU: its own interval
    seen = {b: run(b) for b in ("sampled:0", "default")}
    assert all(note == "" for *_, note, _ in seen.values())
    predictor.checkpoint.hosts = ["another-cpu"]  # never trained on this one
    for build, spread in (("sampled:0", 0.5), ("default", 0.3)):
        ms, half, note, calibration = run(build)
        assert predictor.unseen_spread(hw, build) == spread
        assert ms == pytest.approx(seen[build][0], rel=1e-6)
        assert half == pytest.approx(math.hypot(seen[build][1], INTERVAL_Z * spread))
        assert f"x/{math.exp(spread):.2f}" in note and calibration == ""
    # a checkpoint that cannot say which CPUs it trained on (an older one not trained on a
    # random split, Checkpoint.from_dict) is not widened
    predictor.checkpoint.hosts = None
    assert predictor.trained_cpus is None and predictor.unseen_spread(hw, "default") == 0.0


@pytest.mark.slow
def test_calibrate_measures_here_and_predict_applies_it_to_this_cpu_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from gnnperf.calibrate.run import calibrate
    from gnnperf.cli import main
    from gnnperf.estimators.gnn.predictor import load_predictor
    from gnnperf.estimators.gnn.training import INTERVAL_Z
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.measure import MeasureSettings
    from gnnperf.prediction.api import predict

    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path / "cache"))
    hw = HardwareSpec.from_id("local/x86-64-v3/2t")
    model = tmp_path / "m.onnx"
    zoo.export_onnx(zoo.tiny_spec("resnet"), model)
    one_thread = "local/x86-64-v3/1t"
    configs = [(hw, "sampled:0"), (one_thread, "sampled:0"), (hw, "default"), (hw, "best-of:16")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zero_shot = [predict(model, h, build=b) for h, b in configs]
        # two tiny models, each in both calibration builds at 1 and 2 threads
        done = calibrate(hw, models=2, max_gflop=0.02,
                         settings=MeasureSettings.waiting_at_most(5, repeat=3))
        calibrated = [predict(model, h, build=b) for h, b in configs]
    # 0 shots: the checkpoint's own interval, widened by the unseen-CPU prior where this
    # CPU is one the shipped checkpoint did not train on
    predictor = load_predictor()
    unseen = [predictor.unseen_spread(HardwareSpec.coerce(h), b) for h, b in configs]
    assert all(z.calibration == "" for z in zero_shot)
    assert [bool(z.unseen_cpu) for z in zero_shot] == [bool(u) for u in unseen]
    assert len(done.points) == 8 and all(p.measured_ms > 0 for p in done.points)
    assert sorted(done.cells) == ["default/1t", "sampled/1t", "sampled/2t"]
    stored = load_calibration(hw.cpu_id, checkpoint_sha256())
    assert stored is not None and stored.to_dict() == done.to_dict()
    # each prediction by its cell's factor, tuned by sampled's at the same threads
    for (_, build), cell, zero, fixed, spread in zip(
            configs, ["sampled/2t", "sampled/1t", "default/1t", "sampled/2t"], zero_shot,
            calibrated, unseen, strict=True):
        factor = math.exp(done.cells[cell].log_factor)
        assert fixed.latency_ms == pytest.approx(zero.latency_ms * factor, rel=1e-6), build
        assert [k.ms for k in fixed.kernels] == pytest.approx(
            [k.ms * factor for k in zero.kernels], rel=1e-6)
        # the interval moves with the factor; the checkpoint's own width is widened by the
        # cell's spread instead of the prior's
        own = math.sqrt(max((math.log(zero.high_ms / zero.low_ms) / 2) ** 2
                            - (INTERVAL_Z * spread) ** 2, 0.0))
        assert math.log(fixed.high_ms / fixed.low_ms) / 2 == pytest.approx(
            math.hypot(own, INTERVAL_Z * done.cells[cell].log_spread), rel=1e-4)
        assert fixed.calibration.startswith(hw.cpu_id) and fixed.unseen_cpu == ""
    zero_shot, calibrated = zero_shot[0], calibrated[0]

    # a calibration of another CPU, or of another checkpoint, is not applied here
    save_calibration(Calibration.fit(done.points, cpu_id="another-cpu",
                                     checkpoint_sha256=done.checkpoint_sha256,
                                     hw_id="h", build="sampled:0"))
    assert load_calibration("another-cpu", "another-checkpoint") is None

    assert main(["calibrate", "--hw", "local/x86-64-v3/2t", "--show"]) == 0
    assert "from 2 models" in capsys.readouterr().out
    assert main(["calibrate", "--hw", "local/x86-64-v3/2t", "--remove"]) == 0
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = predict(model, hw, build="sampled:0")
    assert again.calibration == "" and again.unseen_cpu == zero_shot.unseen_cpu
    assert again.latency_ms == pytest.approx(zero_shot.latency_ms)
    assert load_calibration("another-cpu", done.checkpoint_sha256) is not None
    assert main(["calibrate", "--models", "1"]) == 2
    assert "at least 2" in capsys.readouterr().err
    # bad input fails in one line before anything is measured
    assert main(["calibrate", "--threads", "two"]) == 2
    assert "--threads wants counts" in capsys.readouterr().err
    assert main(["calibrate", "--builds", "best-of:16"]) == 2
    err = capsys.readouterr().err
    assert "untuned" in err and len(err.strip().splitlines()) == 1
    assert main(["calibrate", "--max-slowdown", "0.5"]) == 2
    assert "--max-slowdown" in capsys.readouterr().err
    # a host whose speed probe never settles near its best (the Zen 3 guests: 1.4-2x)
    # tells calibrate how much slowdown to measure under, as it tells the collectors
    seen: dict[str, MeasureSettings] = {}
    monkeypatch.setattr("gnnperf.calibrate.run.calibrate",
                        lambda spec, **kw: seen.update(kw) or done)
    assert main(["calibrate", "--max-slowdown", "2.0", "--json"]) == 0
    assert seen["settings"].max_slowdown == 2.0
