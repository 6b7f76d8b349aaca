"""A non-editable install predicts: the shipped checkpoints travel as package data, so
``gnnperf.predict`` works from any folder without the repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_wheel_installed_elsewhere_predicts_with_the_shipped_checkpoint(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, timeout=600)
    env = tmp_path / "venv"
    # the dependencies (TVM, torch) come from this interpreter's site-packages
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env)],
                   check=True, timeout=300)
    python = env / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    *map(str, wheels.glob("*.whl"))], check=True, timeout=600)
    script = f"""
import warnings, gnnperf
from gnnperf import zoo
warnings.simplefilter("ignore")
assert "site-packages" in gnnperf.__file__, gnnperf.__file__
zoo.export_onnx(zoo.tiny_spec("mixer"), "model.onnx")
r = gnnperf.predict("model.onnx", r"{ROOT / 'tests' / 'fixtures' / 'hw_zen4_v3_2t.json'}",
                    build="sampled:0")
assert 0 < r.low_ms <= r.latency_ms <= r.high_ms and r.kernels
print(r.latency_ms)
"""
    out = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.split()[-1]) > 0
