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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zero_shot = predict(model, hw, build="sampled:0")
        done = calibrate(hw, models=2, settings=MeasureSettings.waiting_at_most(5, repeat=3))
        calibrated = predict(model, hw, build="sampled:0")
        other_threads = predict(model, "local/x86-64-v3/1t", build="sampled:0")
    assert zero_shot.calibration == ""
    assert len(done.points) == 2 and all(p.measured_ms > 0 for p in done.points)
    stored = load_calibration(hw.cpu_id, checkpoint_sha256())
    assert stored is not None and stored.to_dict() == done.to_dict()
    assert calibrated.latency_ms == pytest.approx(zero_shot.latency_ms * done.factor, rel=1e-6)
    assert [k.ms for k in calibrated.kernels] == pytest.approx(
        [k.ms * done.factor for k in zero_shot.kernels], rel=1e-6)
    # the interval moves with the factor and widens by the calibration's spread
    assert calibrated.high_ms / calibrated.low_ms >= zero_shot.high_ms / zero_shot.low_ms
    assert calibrated.calibration and other_threads.calibration  # any hw id of this CPU

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
