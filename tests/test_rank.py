"""What a person reads: the per-kernel breakdown plot and the ranked table of a search space."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest

from gnnperf import zoo
from gnnperf.cli import main
from gnnperf.prediction.api import predict

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def candidates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("space")
    for family in ("mixer", "resnet", "squeezenet"):
        zoo.export_onnx(zoo.tiny_spec(family), folder / f"{family}.onnx")
    return folder


def test_a_prediction_draws_its_kernel_breakdown(candidates: Path, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = predict(candidates / "resnet.onnx", "local/x86-64-v3/2t", build="sampled:0")
    out = p.plot(tmp_path / "breakdown.png", top=3)
    assert out.read_bytes().startswith(PNG)
    assert p.gflop == pytest.approx(sum(k.flops for k in p.kernels) / 1e9)
    assert not list(tmp_path.glob(".*.tmp"))  # written through a temp file


def test_rank_writes_a_sorted_table_and_a_plot(candidates: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "ranked.csv"
    assert main(["rank", str(candidates), "--hw", "local/x86-64-v3/2t", "--build",
                 "sampled:0", "--out", str(table), "--workers", "2", "--plot",
                 str(tmp_path / "space.png")]) == 0
    rows = list(csv.DictReader(table.open()))
    assert sorted(Path(r["model"]).name for r in rows) == ["mixer.onnx", "resnet.onnx",
                                                           "squeezenet.onnx"]
    latencies = [float(r["latency_ms"]) for r in rows]
    assert latencies == sorted(latencies)
    assert all(float(r["low_ms"]) <= float(r["latency_ms"]) <= float(r["high_ms"])
               for r in rows)
    assert (tmp_path / "space.png").read_bytes().startswith(PNG)
    assert "3 models ranked" in capsys.readouterr().out
    # the same as JSON, from a list of files; the figures match single predictions
    as_json = tmp_path / "ranked.json"
    assert main(["rank", str(candidates / "mixer.onnx"), str(candidates / "resnet.onnx"),
                 "--hw", "local/x86-64-v3/2t", "--build", "sampled:0", "--out",
                 str(as_json)]) == 0
    ranked = {Path(r["model"]).name: r for r in json.loads(as_json.read_text())}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = predict(candidates / "mixer.onnx", "local/x86-64-v3/2t", build="sampled:0")
    assert ranked["mixer.onnx"]["latency_ms"] == pytest.approx(alone.latency_ms, rel=1e-5)


def test_rank_refuses_bad_input_in_one_line(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rank", str(tmp_path / "none.onnx"), "--out", str(tmp_path / "t.csv")]) == 2
    assert "no ONNX file or folder" in capsys.readouterr().err
    assert main(["rank", str(tmp_path), "--out", str(tmp_path / "t.csv")]) == 2
    assert "no .onnx files" in capsys.readouterr().err
    (tmp_path / "m.onnx").write_bytes(b"")
    assert main(["rank", str(tmp_path), "--out", str(tmp_path / "t.txt")]) == 2
    assert ".csv or .json" in capsys.readouterr().err
    assert not (tmp_path / "t.csv").exists()
