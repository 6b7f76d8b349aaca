"""The command line: graph/measure output and one-line errors with exit code 2."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch
from conftest import HASTY

from gnnperf.cli import main
from gnnperf.hardware.spec import available_cores


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``gnnperf ARGS`` in this process, its stdout, stderr and exit code captured.

    Why not a fresh interpreter each time: importing torch and TVM again cost 6-10 s a
    call, over three minutes of the suite. :func:`run_cli_process` keeps the real entry
    point tested (``test_the_entry_point_runs_in_a_fresh_interpreter``)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # --debug lets the error through, as the interpreter would
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def run_cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gnnperf", *args], capture_output=True,
                          text=True, timeout=300)


def test_the_entry_point_runs_in_a_fresh_interpreter(tmp_path: Path) -> None:
    proc = run_cli_process("graph", str(tmp_path / "missing.onnx"), "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    proc = run_cli_process("graph", str(tmp_path / "missing.onnx"))
    assert proc.returncode == 2 and proc.stderr.startswith("gnnperf: error: ")
    assert len(proc.stderr.strip().splitlines()) == 1 and "not found" in proc.stderr


def test_graph_json_lists_the_executed_kernels(branchy_onnx: Path) -> None:
    proc = run_cli("graph", str(branchy_onnx), "--isa", "x86-64-v3", "--build", "sampled:1",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    import tvm

    from gnnperf.lowering.pipeline import compile_lowered, lower_onnx
    from gnnperf.measure import capture_kernel_calls, make_inputs

    lowered = lower_onnx(branchy_onnx, {"kind": "llvm", "mcpu": "x86-64-v3"}, "sampled:1")
    executed = [n for n, _ in capture_kernel_calls(compile_lowered(lowered).mod, tvm.cpu(),
                                                   make_inputs(lowered.inputs))]
    assert [k["name"] for k in data["kernels"]] == executed
    assert data["build"] == "sampled:1"
    assert data["hardware"]["target"]["mcpu"] == "x86-64-v3"
    assert all({"flops", "bytes_read", "loops", "pattern"} <= set(k) for k in data["kernels"])
    assert all(e["bytes"] > 0 for e in data["edges"])


def test_graph_text_summary(cnn_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(cnn_onnx), "--isa", "x86-64-v2", "--no-ms-features"]) == 0
    out = capsys.readouterr().out
    assert "kernels" in out and "GFLOP" in out and "x86-64-v2" in out


def test_measure_json_with_per_kernel(cnn_onnx: Path) -> None:
    proc = run_cli("measure", str(cnn_onnx), "--isa", "x86-64-v3", "--threads", "1",
                   "--per-kernel", "--repeat", "5", *HASTY, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["threads"] == 1 and data["whole"]["median_ms"] > 0
    assert len(data["kernels"]) > 0 and data["kernel_sum_ms"] > 0


def _lstm_onnx(path: Path) -> Path:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 4, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm(x)[0]

    torch.onnx.export(M().eval(), (torch.randn(1, 3, 4),), str(path), opset_version=17,
                      dynamo=False)
    return path


@pytest.fixture
def bad_inputs(tmp_path: Path, cnn_onnx: Path) -> dict[str, Path]:
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(cnn_onnx.read_bytes()[: cnn_onnx.stat().st_size // 2])
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    return {"missing": tmp_path / "missing.onnx", "empty": empty, "truncated": truncated,
            "text": text, "lstm": _lstm_onnx(tmp_path / "lstm.onnx")}


@pytest.mark.parametrize("case,needle", [
    ("missing", "not found"), ("empty", "empty"), ("truncated", ""), ("text", ""),
    ("lstm", "LSTM"),
])
def test_bad_models_give_one_line_and_exit_2(case: str, needle: str,
                                             bad_inputs: dict[str, Path]) -> None:
    proc = run_cli("graph", str(bad_inputs[case]))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnnperf: error:")
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr


def test_dynamic_dims_need_shapes(dynamic_onnx: Path) -> None:
    proc = run_cli("graph", str(dynamic_onnx))
    assert proc.returncode == 2 and "dynamic dimension 0" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    ok = run_cli("graph", str(dynamic_onnx), "--input-shape", "x=2,3,16,16",
                 "--no-ms-features")
    assert ok.returncode == 0, ok.stderr


TOO_MANY = str(available_cores() + 1)


@pytest.mark.parametrize("args,needle", [
    (["--isa", "x86-64-v9"], "unknown ISA"),
    (["--threads", TOO_MANY], f"thread count {TOO_MANY}"),
    (["--threads", "0"], "thread count 0"),
    (["--build", "turbo"], "unknown build"),
])
def test_bad_targets_give_exit_2(args: list[str], needle: str, cnn_onnx: Path) -> None:
    proc = run_cli("measure", str(cnn_onnx), *args)
    assert proc.returncode == 2
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    proc = run_cli("--debug", "graph", str(tmp_path / "missing.onnx"))
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    # after the subcommand too (and in a fresh interpreter: see the entry-point test)
    proc = run_cli("graph", str(tmp_path / "missing.onnx"), "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    proc = run_cli("dataset", "stats", "--root", str(tmp_path), "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    proc = run_cli("dataset", "stats", "--root", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_predict_command_with_the_shipped_checkpoint(cnn_onnx: Path) -> None:
    proc = run_cli("predict", str(cnn_onnx), "--hw", "local/x86-64-v3/1t", "--build",
                   "sampled:0", "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert 0 < r["low_ms"] <= r["latency_ms"] <= r["high_ms"]
    assert r["hw_id"] == "local/x86-64-v3/1t" and r["build"] == "sampled:0"
    assert len(r["kernels"]) > 0
    text = run_cli("predict", str(cnn_onnx), "--hw", "local/x86-64-v3/1t", "--build",
                   "sampled:0", "--kernels")
    assert text.returncode == 0 and " ms [" in text.stdout
    assert len(text.stdout.strip().splitlines()) == 1 + len(r["kernels"])


def test_hw_command_prints_a_spec_predict_accepts(tmp_path: Path) -> None:
    listed = run_cli("hw", "--list")
    assert listed.returncode == 0 and "x86-64" in listed.stdout.split()
    proc = run_cli("hw", "--isa", "x86-64-v2", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(proc.stdout)
    assert spec["hw_id"] == "local/x86-64-v2/1t" and spec["peak_gflops"] > 0
    path = tmp_path / "hw.json"
    path.write_text(proc.stdout)
    from gnnperf.hardware.spec import HardwareSpec

    loaded = HardwareSpec.coerce(str(path))
    assert loaded.hw_id == "local/x86-64-v2/1t"
    # what the machine does now: the reference kernels' medians, and its CPU signature
    assert set(spec["reference_ms"]) == {"gemm", "stream", "chain"}
    assert all(v > 0 for v in spec["reference_ms"].values())
    assert loaded.reference_ms == spec["reference_ms"]
    assert spec["cpu_id"] == loaded.cpu_id and spec["signature"]["cores"] == loaded.cores


def test_dataset_stats_command(small_root: Path) -> None:
    proc = run_cli("dataset", "stats", "--root", str(small_root), "--json")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["records"] > 0 and stats["families"] == 2 and stats["builds"] == 1
    assert stats["per_family"].keys() == {"squeezenet", "mixer"}
    assert sum(stats["records_by_build"].values()) == stats["records"]
    assert all(0 < stats["models_by_build"][b] <= n for b, n in stats["records_by_build"].items())
    assert all(0 < stats["graphs_by_build"][b] <= stats["models_by_build"][b]
               and stats["distinct_records_by_build"][b] <= n
               for b, n in stats["records_by_build"].items())
    text = run_cli("dataset", "stats", "--root", str(small_root))
    assert text.returncode == 0 and f"{stats['records']} records" in text.stdout


@pytest.mark.parametrize("args,needle", [
    (["--epochs", "0"], "epochs must be positive"),
    (["--hidden", "-4"], "hidden must be positive"),
    (["--loss", "l1"], "invalid choice"),
])
def test_train_rejects_bad_options(args: list[str], needle: str, tmp_path: Path) -> None:
    proc = run_cli("train", "--root", str(tmp_path), "--out", str(tmp_path / "ck"), *args)
    assert proc.returncode == 2 and needle in proc.stderr
    assert not (tmp_path / "ck").exists()
