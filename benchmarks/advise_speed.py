"""How long ``gnnperf advise`` makes a user wait (issue 47: <= 5 s warm for a 100-kernel
model, every build and budget from one lowering per target and source).

- **cold**: ``gnnperf advise MODEL`` in a fresh process with an empty feature cache (the
  model's graphs are lowered and analysed, best-of's candidates drawn);
- **warm**: the same command again, a fresh process once the cache holds the graphs
  (imports, checkpoint load, cache reads, encoding and the GNN: what a user who advises
  on a model twice, or on a model whose kernels are known, waits), median of 3;
- **imports**: a fresh process that only imports what a warm ``advise`` imports (PyTorch,
  PyTorch Geometric, the predictor), median of 3: the part of warm no gnnperf code runs;
- **in-process**: ``gnnperf.prediction.advise.advise`` called again in a process that has
  already advised once (median of 3), the import and checkpoint load excluded;
- **served**: the warm command again while ``gnnperf serve`` listens (median of 3): the
  command line hands it to the resident server, which forks a worker that already holds
  the imports and the checkpoint; **serve start** is the server's own start (imports and
  checkpoint load, paid once per server).

    python benchmarks/advise_speed.py [--family hf-bert-base] [--seed 0]
        [--checkpoint checkpoints/gnnperf.pt] [--out benchmarks/advise_speed.json]

Measure on a quiet machine: no collector, tests or training at the same time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from gnnperf import zoo
from gnnperf.atomic import write_text
from gnnperf.hardware.cpu_identity import signature_of_hw
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.measure.local import with_reference_figures
from gnnperf.prediction.advise import advise
from gnnperf.prediction.graphs import lower_for_prediction


def _cli_seconds(onnx_path: Path, checkpoint: str | None,
                 server: str = "off") -> tuple[float, dict[str, Any]]:
    """Wall time of ``gnnperf advise --json`` in a fresh interpreter, and its answer; the
    command goes to the ``gnnperf serve`` listening at ``server`` unless it is ``off``."""
    command = [sys.executable, "-m", "gnnperf", "advise", str(onnx_path), "--json"]
    if checkpoint:
        command += ["--checkpoint", checkpoint]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True,
                          env={**os.environ, "GNNPERF_SERVER": server})
    return time.perf_counter() - start, json.loads(done.stdout)


def _served_seconds(onnx_path: Path, checkpoint: str | None, folder: Path,
                    expected: dict[str, Any]) -> tuple[float, list[float]]:
    """The server's start (until it listens) and the warm command's wall time while it
    listens (3 runs); each served answer must equal the local one."""
    path = folder / "serve.sock"
    command = [sys.executable, "-m", "gnnperf", "serve", "--socket", str(path)]
    if checkpoint:
        command += ["--checkpoint", checkpoint]
    start = time.perf_counter()
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if "serving" not in line:
            raise SystemExit(f"gnnperf serve did not start: {line}{server.stdout.read()}")
        started = time.perf_counter() - start
        runs = []
        for _ in range(3):
            seconds, answer = _cli_seconds(onnx_path, checkpoint, server=str(path))
            if [r["latency_ms"] for r in answer["rows"]] != [
                    r["latency_ms"] for r in expected["rows"]]:
                raise SystemExit("a served answer differs from the local one")
            runs.append(seconds)
    finally:
        server.terminate()
        server.wait(timeout=60)
    return started, runs


#: what a warm ``advise`` process imports before it reads anything
IMPORTS = "import gnnperf.cli, gnnperf.prediction.advise, gnnperf.estimators.gnn.predictor"


def _import_seconds() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="hf-bert-base")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("advise_speed.json"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    # an empty feature cache of its own; the machine's one-time figures (what `gnnperf hw`
    # measures once and caches) are copied, as they are no part of any answer's time
    cache_root = Path(tempfile.mkdtemp(prefix="gnnperf-advise-cache-"))
    os.environ["GNNPERF_CACHE_DIR"] = str(cache_root)
    home = Path.home() / ".cache" / "gnnperf"
    if home.is_dir():
        shutil.copytree(home, cache_root, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("features.sqlite*", "tuning_costs.json"))
    local = HardwareSpec.coerce("local")
    with_reference_figures(local)  # measured and cached now, outside every timed answer
    figures: dict[str, object] = {"model": f"{args.family} seed {args.seed}",
                                  "cpu_model": local.cpu_model,
                                  "cpu_id": signature_of_hw(local.to_dict()).id}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            onnx_path = Path(tmp) / "model.onnx"
            zoo.export_onnx(zoo.sample_spec(args.family, args.seed), onnx_path)
            figures["cold_s"], answer = _cli_seconds(onnx_path, args.checkpoint)
            warm = [_cli_seconds(onnx_path, args.checkpoint)[0] for _ in range(3)]
            figures["warm_s"] = statistics.median(warm)
            figures["warm_runs_s"] = [round(w, 2) for w in warm]
            figures["imports_s"] = statistics.median(_import_seconds() for _ in range(3))
            figures["serve_start_s"], served = _served_seconds(
                onnx_path, args.checkpoint, Path(tmp), answer)
            figures["served_s"] = statistics.median(served)
            figures["served_runs_s"] = [round(s, 2) for s in served]
            figures["rows"] = len(answer["rows"])
            figures["builds"] = sorted({r["build"] for r in answer["rows"]})
            figures["skipped"] = sorted(answer["skipped"])
            graph = lower_for_prediction(onnx_path, local, "default")
            figures["kernels"] = sum(n.kind == "tir" for n in graph.nodes)
            advise(onnx_path, checkpoint=args.checkpoint)  # loads the checkpoint
            runs = []
            for _ in range(3):
                start = time.perf_counter()
                advise(onnx_path, checkpoint=args.checkpoint)
                runs.append(time.perf_counter() - start)
            figures["in_process_s"] = statistics.median(runs)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    figures["command"] = "python benchmarks/advise_speed.py " + " ".join(sys.argv[1:])
    for key, value in figures.items():
        print(f"{key:14s} {value}")
    write_text(args.out, json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
