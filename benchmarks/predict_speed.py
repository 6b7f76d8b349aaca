"""Prediction speed: gnnperf.predict cold and warm against compile + measure, and
predict_many throughput.

Model: the ResNet-18 of ``benchmarks/foundation.py`` (224 px, batch 1). Hardware and
build: this machine at x86-64-v3 with 2 threads, ``sampled:0``.

- **cold**: a fresh Python process that imports gnnperf, loads the checkpoint, lowers
  the ONNX model and predicts (the time a command-line user waits), with an empty feature
  cache; **cold, cached graph**: the same once the cache holds the model's graph;
- **first call**: the first ``predict`` in a process that already imported gnnperf;
- **warm**: later calls (median of 5), the checkpoint already loaded;
- **compile + measure**: what the prediction replaces: lowering, compiling and one
  whole-model measurement with the collector's settings;
- **predict_many**: batches of already-lowered zoo graphs, GNN only, and end to end
  from ONNX (lowering included);
- **stages**: where a warm prediction's time goes without the feature cache (import,
  legalize + fuse, schedule, finalize, TIR analyses + PerStoreFeature, GNN);
- **NAS throughput**: ``--candidates`` distinct models of one generated family (random
  hyperparameters, so kernels repeat as in a NAS space) ranked from ONNX files by
  ``predict_many`` with one lowering process per core: with an empty feature cache
  (cold), with a cache that knows the kernels of as many *other* candidates of the
  family (warm kernels), and a second pass over the same files (warm graphs).

    python benchmarks/predict_speed.py [--checkpoint checkpoints/gnnperf.pt] [--out FILE.json]
        [--candidates 100] [--family mobilenet]

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

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from foundation import ResNet18  # noqa: E402

from gnnperf import zoo  # noqa: E402
from gnnperf.atomic import write_text  # noqa: E402
from gnnperf.hardware.spec import HardwareSpec  # noqa: E402
from gnnperf.lowering.pipeline import compile_lowered, export_executable, lower_onnx  # noqa: E402
from gnnperf.measure import MeasureSettings, make_inputs, measure_library  # noqa: E402
from gnnperf.measure.local import with_reference_figures  # noqa: E402
from gnnperf.prediction.api import lower_for_prediction, predict, predict_many  # noqa: E402

HW = "local/x86-64-v3/2t"
BUILD = "sampled:0"


def _export_resnet18(path: Path) -> None:
    torch.manual_seed(0)
    model = ResNet18().eval()
    torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(path), opset_version=17,
                      input_names=["x"], dynamo=False)


def _cold_seconds(onnx_path: Path, checkpoint: str | None) -> float:
    """Wall time of a fresh interpreter that imports gnnperf and predicts once."""
    code = (
        "import warnings, gnnperf; warnings.simplefilter('ignore'); "
        f"gnnperf.predict({str(onnx_path)!r}, {HW!r}, build={BUILD!r}, "
        f"checkpoint={checkpoint!r})"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return time.perf_counter() - start


def _stages(onnx_path: Path, hw: HardwareSpec, checkpoint: str | None) -> dict[str, float]:
    """Seconds per stage of one prediction without the feature cache (median of 3)."""
    from gnnperf.features import extract_graph
    from gnnperf.prediction.api import _predictor

    os.environ["GNNPERF_FEATURE_CACHE"] = "0"
    runs: list[dict[str, float]] = []
    try:
        for _ in range(3):
            lowered = lower_onnx(onnx_path, hw, BUILD)
            start = time.perf_counter()
            graph = extract_graph(lowered)
            features_s = time.perf_counter() - start
            start = time.perf_counter()
            _predictor(checkpoint).predict_graphs([(graph, hw)])
            runs.append({**{f"stage_{k}": v for k, v in lowered.timings.items()},
                         "stage_features_s": features_s,
                         "stage_gnn_s": time.perf_counter() - start})
    finally:
        os.environ.pop("GNNPERF_FEATURE_CACHE")
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _nas_throughput(tmp: Path, family: str, n: int, checkpoint: str | None
                    ) -> dict[str, float | int | str]:
    """Candidates per second, end to end from ONNX files, cold and warm feature cache."""
    from gnnperf.features.cache import default_cache

    def export(seeds: range, folder: Path) -> list[Path]:
        folder.mkdir()
        paths = [folder / f"{s}.onnx" for s in seeds]
        for seed, path in zip(seeds, paths, strict=True):
            zoo.export_onnx(zoo.sample_spec(family, seed), path)
        return paths

    space = export(range(1000, 1000 + n), tmp / "space")
    others = export(range(5000, 5000 + n), tmp / "others")
    out: dict[str, float | int | str] = {"nas_family": family, "nas_candidates": n}
    cache = default_cache()
    assert cache is not None
    cache.clear()

    def rate(files: list[Path]) -> float:
        start = time.perf_counter()
        predict_many(files, HW, build=BUILD, checkpoint=checkpoint)
        return len(files) / (time.perf_counter() - start)

    out["nas_cold_per_s"] = rate(space)
    cache.clear()
    rate(others)  # the family's kernels, from other candidates
    cache.clear("graph")
    out["nas_warm_kernels_per_s"] = rate(space)
    out["nas_warm_graphs_per_s"] = rate(space)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--graphs", type=int, default=64, help="graphs for predict_many")
    parser.add_argument("--max-slowdown", type=float, default=MeasureSettings.max_slowdown,
                        help="speed-probe limit for the measurement (2.0 on the AMD EPYC "
                             "guest, as its dataset records were collected)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("predict_speed.json"))
    parser.add_argument("--candidates", type=int, default=100, help="NAS candidates")
    parser.add_argument("--family", default="mobilenet", help="NAS candidates' family")
    args = parser.parse_args()
    # every figure below starts from an empty feature cache of its own
    cache_root = Path(tempfile.mkdtemp(prefix="gnnperf-bench-cache-"))
    os.environ["GNNPERF_CACHE_DIR"] = str(cache_root)
    shutil.copytree(Path.home() / ".cache" / "gnnperf", cache_root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("features.sqlite*"))
    warnings.simplefilter("ignore")
    # the machine's one-time figures (peak, bandwidth, reference kernels: what `gnnperf hw`
    # measures once per machine and caches) are not part of any prediction's time
    with_reference_figures(HardwareSpec.coerce(HW))
    figures: dict[str, float | int | str] = {"hw": HW, "build": BUILD, "model": "ResNet-18 224px"}
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = Path(tmp) / "resnet18.onnx"
        _export_resnet18(onnx_path)
        figures["cold_s"] = _cold_seconds(onnx_path, args.checkpoint)
        start = time.perf_counter()
        first = predict(onnx_path, HW, build=BUILD, checkpoint=args.checkpoint)
        figures["first_call_s"] = time.perf_counter() - start
        warm = []
        for _ in range(5):
            start = time.perf_counter()
            predict(onnx_path, HW, build=BUILD, checkpoint=args.checkpoint)
            warm.append(time.perf_counter() - start)
        figures["warm_s"] = statistics.median(warm)
        # a new process again, now that the feature cache holds the model's graph
        figures["cold_cached_graph_s"] = _cold_seconds(onnx_path, args.checkpoint)
        figures["predicted_ms"] = first.latency_ms
        figures["interval_ms"] = f"{first.low_ms:.1f}..{first.high_ms:.1f}"

        hw = HardwareSpec.coerce(HW)
        figures["cpu_model"] = hw.cpu_model
        start = time.perf_counter()
        lowered = lower_onnx(onnx_path, hw, BUILD)
        lib = export_executable(compile_lowered(lowered), Path(tmp) / "model.so")
        figures["compile_s"] = time.perf_counter() - start
        start = time.perf_counter()
        m = measure_library(lib, make_inputs(lowered.inputs), hw.threads,
                            settings=MeasureSettings(quiet_timeout_s=120,
                                                     max_slowdown=args.max_slowdown))
        figures["measure_s"] = time.perf_counter() - start
        figures["measured_ms"] = m.whole.median_ms
        figures["compile_measure_over_warm"] = (
            (figures["compile_s"] + figures["measure_s"]) / figures["warm_s"])

        specs = [zoo.sample_spec(f, s) for s in range(100, 100 + args.graphs)
                 for f in ("mobilenet", "resnet", "vit", "bert")][: args.graphs]
        models = [zoo.export_onnx(spec) for spec in specs]
        start = time.perf_counter()
        graphs = [lower_for_prediction(mod, hw, BUILD) for mod in models]
        lower_s = time.perf_counter() - start
        predict_many(graphs[:2], hw, build=BUILD, checkpoint=args.checkpoint)  # load once
        start = time.perf_counter()
        predict_many(graphs, hw, build=BUILD, checkpoint=args.checkpoint)
        gnn_s = time.perf_counter() - start
        figures["predict_many_graphs"] = len(graphs)
        figures["predict_many_gnn_graphs_per_s"] = len(graphs) / gnn_s
        figures["predict_many_end_to_end_graphs_per_s"] = len(graphs) / (gnn_s + lower_s)
        figures.update(_stages(onnx_path, hw, args.checkpoint))
        figures.update(_nas_throughput(Path(tmp), args.family, args.candidates, args.checkpoint))
    figures["cpu_id"] = HardwareSpec.local(measure=False).cpu_id
    figures["command"] = " ".join([Path(sys.executable).name, *sys.argv])
    for key, value in figures.items():
        print(f"{key:40s} {value:.4g}" if isinstance(value, float) else f"{key:40s} {value}")
    write_text(args.out, json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
