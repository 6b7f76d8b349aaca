"""``gnnperf serve``: the command line hands served commands to a resident process, whose
answers are those of a local run, errors and exit codes included, and which stops rather
than answer from code or a checkpoint that changed since it started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import run_cli

from gnnperf.estimators.types import default_checkpoint

ARGS = ("predict", "--hw", "local/x86-64-v3/1t", "--build", "sampled:0", "--json")


def _answer(stdout: str) -> dict[str, object]:
    """A ``predict --json`` answer without the seconds it took."""
    answer = json.loads(stdout)
    answer.pop("predict_s")
    return answer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """A server on a checkpoint copied into ``tmp_path`` (so the test may change it), and
    the environment that points a client at it."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(default_checkpoint().parent, folder)
    # a Unix socket's path has a short limit (108 bytes): pytest's tmp_path may exceed it
    sockets = Path(tempfile.mkdtemp(prefix="gnnperf-serve-", dir="/tmp"))
    env = {**os.environ, "GNNPERF_SERVER": str(sockets / "s.sock"),
           "GNNPERF_CHECKPOINT": str(folder / default_checkpoint().name)}
    proc = subprocess.Popen([sys.executable, "-m", "gnnperf", "serve", "--idle-minutes", "5"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once it listens
    assert "serving predict, advise, rank at" in line, line + proc.stdout.read()
    try:
        yield proc, env
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(sockets, ignore_errors=True)


def _client(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gnnperf", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_served_answer_is_the_local_one(
        server: tuple[subprocess.Popen[str], dict[str, str]], cnn_onnx: Path) -> None:
    proc, env = server
    served = _client(env, ARGS[0], str(cnn_onnx), *ARGS[1:])
    assert served.returncode == 0, served.stderr
    local = run_cli(ARGS[0], str(cnn_onnx), *ARGS[1:])
    assert local.returncode == 0, local.stderr
    assert _answer(served.stdout) == _answer(local.stdout)
    # bad input: the same one-line error and exit code 2, from the server's worker
    missing = _client(env, "predict", str(cnn_onnx.with_name("missing.onnx")))
    assert missing.returncode == 2
    assert missing.stderr.startswith("gnnperf: error:") and len(
        missing.stderr.strip().splitlines()) == 1
    # a relative path is the client's: the worker runs in the client's directory
    relative = subprocess.run([sys.executable, "-m", "gnnperf", ARGS[0], cnn_onnx.name,
                               *ARGS[1:]], env=env, cwd=cnn_onnx.parent,
                              capture_output=True, text=True, timeout=300)
    assert relative.returncode == 0, relative.stderr
    assert _answer(relative.stdout) == _answer(local.stdout)
    proc.terminate()
    log = proc.communicate(timeout=60)[0]
    assert log.count("gnnperf: answering predict") == 3, log


def test_a_stale_server_stops_and_the_command_runs_here(
        server: tuple[subprocess.Popen[str], dict[str, str]], cnn_onnx: Path) -> None:
    proc, env = server
    changed = Path(env["GNNPERF_CHECKPOINT"]).with_name("metrics.json")
    time.sleep(0.01)
    changed.write_text(changed.read_text() + "\n")  # a retrained checkpoint, say
    answer = _client(env, ARGS[0], str(cnn_onnx), *ARGS[1:])
    assert answer.returncode == 0, answer.stderr
    assert "ran older code and stopped; running here" in answer.stderr
    assert json.loads(answer.stdout)["build"] == "sampled:0"
    assert proc.wait(timeout=60) == 0
    assert not Path(env["GNNPERF_SERVER"]).exists()
    # nothing listens now: the command runs here without a word about a server
    again = _client(env, ARGS[0], str(cnn_onnx), *ARGS[1:])
    assert again.returncode == 0 and "server" not in again.stderr
