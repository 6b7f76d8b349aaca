"""Few-shot calibration: measured here, fitted, stored per CPU and checkpoint, applied by
``predict`` to that CPU only, and removable."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from gnnperf import zoo
from gnnperf.calibration import (
    Calibration,
    CalibrationPoint,
    checkpoint_sha256,
    load_calibration,
    save_calibration,
)
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
    measured = {("sampled:0", 2): [2.0, 2.0], ("sampled:0", 1): [1.2, 1.2],
                ("default", 2): [0.5, 0.5], ("default", 1): [0.9]}  # one model: too few
    points = [CalibrationPoint(f"m{i}", 1.0, ms, 0.01, build, threads)
              for (build, threads), values in measured.items()
              for i, ms in enumerate(values)]
    fitted = Calibration.fit(points, cpu_id="cpu", checkpoint_sha256="x", hw_id="h",
                             build="default,sampled:0")
    assert sorted(fitted.cells) == ["default/2t", "sampled/1t", "sampled/2t"]
    assert math.exp(fitted.correction("sampled:0", 2)[0]) == pytest.approx(2.0)
    assert math.exp(fitted.correction("sampled:7", 1)[0]) == pytest.approx(1.2)
    assert math.exp(fitted.correction("default", 2)[0]) == pytest.approx(0.5)
    assert fitted.correction("default", 2)[1] == pytest.approx(0.0)
    # tuned builds, which a new machine cannot measure, take sampled's factor
    assert fitted.correction("tuned", 2) == fitted.correction("sampled:0", 2)
    # a cell measured on fewer than two models falls back to all points together
    assert fitted.correction("default", 1) == (fitted.log_factor, fitted.log_spread)
    assert math.exp(fitted.log_factor) == pytest.approx(1.2)
    # a store written before per-cell factors reads back with one factor for everything
    old = {k: v for k, v in fitted.to_dict().items() if k != "cells"}
    old["points"] = [{k: v for k, v in p.items() if k not in ("build", "threads")}
                     for p in old["points"]]
    assert Calibration.from_dict(old).correction("default", 2) == (fitted.log_factor,
                                                                   fitted.log_spread)
    assert Calibration.from_dict(fitted.to_dict()) == fitted


def test_calibrate_measures_here_and_predict_applies_it_to_this_cpu_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from gnnperf.calibration.run import calibrate
    from gnnperf.cli import main
    from gnnperf.hardware import HardwareSpec
    from gnnperf.measure import MeasureSettings
    from gnnperf.predictor import predict

    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path / "cache"))
    hw = HardwareSpec.from_id("local/x86-64-v3/2t")
    model = tmp_path / "m.onnx"
    zoo.export_onnx(zoo.tiny_spec("resnet"), model)
    one_thread = "local/x86-64-v3/1t"
    configs = [(hw, "sampled:0"), (one_thread, "sampled:0"), (hw, "default"), (hw, "tuned")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zero_shot = [predict(model, h, build=b) for h, b in configs]
        # two tiny models, each in both calibration builds at 1 and 2 threads
        done = calibrate(hw, models=2, max_gflop=0.02,
                         settings=MeasureSettings.waiting_at_most(5, repeat=3))
        calibrated = [predict(model, h, build=b) for h, b in configs]
    assert all(z.calibration == "" for z in zero_shot)
    assert len(done.points) == 8 and all(p.measured_ms > 0 for p in done.points)
    assert sorted(done.cells) == ["default/1t", "default/2t", "sampled/1t", "sampled/2t"]
    stored = load_calibration(hw.cpu_id, checkpoint_sha256())
    assert stored is not None and stored.to_dict() == done.to_dict()
    # each prediction by its cell's factor, tuned by sampled's at the same threads
    for (_, build), cell, zero, fixed in zip(configs, ["sampled/2t", "sampled/1t",
                                                       "default/2t", "sampled/2t"],
                                             zero_shot, calibrated, strict=True):
        factor = math.exp(done.cells[cell].log_factor)
        assert fixed.latency_ms == pytest.approx(zero.latency_ms * factor, rel=1e-6), build
        assert [k.ms for k in fixed.kernels] == pytest.approx(
            [k.ms * factor for k in zero.kernels], rel=1e-6)
        # the interval moves with the factor and widens by the cell's spread
        assert fixed.high_ms / fixed.low_ms >= zero.high_ms / zero.low_ms
        assert fixed.calibration
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
    assert again.calibration == "" and again.latency_ms == pytest.approx(zero_shot.latency_ms)
    assert load_calibration("another-cpu", done.checkpoint_sha256) is not None
    assert main(["calibrate", "--models", "1"]) == 2
    assert "at least 2" in capsys.readouterr().err
    # bad input fails in one line before anything is measured
    assert main(["calibrate", "--threads", "two"]) == 2
    assert "--threads wants counts" in capsys.readouterr().err
    assert main(["calibrate", "--builds", "tuned"]) == 2
    err = capsys.readouterr().err
    assert "untuned" in err and len(err.strip().splitlines()) == 1
