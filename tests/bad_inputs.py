"""A corpus of inputs a user can get wrong, each with the CLI call and API call it breaks.

Kept as data so that one test runs every case through both entry points and checks
the same promises: one line on stderr and exit code 2 from the CLI, a
:class:`gnnperf.errors.GnnperfError` from the API, and no partial file left behind.
"""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from conftest import export
from onnx import TensorProto, helper, numpy_helper
from torch import nn


@dataclass
class BadInput:
    """One bad input: the CLI arguments and the API call it is given to."""

    name: str
    cli: list[str]
    api: Callable[[], Any]
    #: a fragment the one-line message must contain (case-insensitive)
    says: str
    #: files the command was asked to write, which must not exist afterwards
    outputs: list[Path] = field(default_factory=list)


def _conv_model(path: Path, dynamic: bool = False) -> Path:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
    return export(model, (1, 3, 8, 8), path, {"x": {0: "batch"}} if dynamic else None)


def _lstm_model(path: Path) -> Path:
    torch.manual_seed(0)
    return export(nn.LSTM(4, 4, batch_first=True), (1, 3, 4), path)


def _external_data_model(folder: Path) -> Path:
    """A model whose weight lives in a side file, which is then deleted."""
    weight = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "external.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="external.onnx.data", size_threshold=0)
    (folder / "external.onnx.data").unlink()
    return path


def _huge_model(path: Path) -> Path:
    """A MatMul whose output would need 4 × 2^36 bytes (256 GiB)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 18, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1 << 18, 1 << 18])],
        [numpy_helper.from_array(np.ones((8, 1 << 18), np.float32), "w")])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                    str(path))
    return path


def _nan_model(path: Path) -> Path:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
    with torch.no_grad():
        model[0].weight[0, 0, 0, 0] = float("nan")
    return export(model, (1, 3, 8, 8), path)


def _corrupt_one_line(src: Path, dst: Path) -> Path:
    """A copy of a dataset folder whose first shard has one line altered by hand."""
    shutil.copytree(src / "shards", dst / "shards")
    shard = sorted((dst / "shards").glob("*.jsonl.gz"))[0]
    lines = gzip.decompress(shard.read_bytes()).decode().splitlines()
    lines[1] = lines[1].replace('"kind":', '"kind" :', 1).replace("1", "2", 1)
    shard.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return dst


def corpus(folder: Path, good_model: Path, dataset: Path) -> list[BadInput]:
    """Every bad input, written under ``folder``; ``good_model`` and ``dataset`` are valid."""
    import gnnperf
    from gnnperf.bench import QUICK
    from gnnperf.bench import run as bench_run
    from gnnperf.collect.kernels import collect_tuning
    from gnnperf.collect.models import collect
    from gnnperf.data import LatencyDataset, dataset_stats
    from gnnperf.features import extract_graph
    from gnnperf.lowering.pipeline import lower_onnx

    folder.mkdir(parents=True, exist_ok=True)
    empty = folder / "empty.onnx"
    empty.write_bytes(b"")
    noise = folder / "random.onnx"
    noise.write_bytes(np.random.default_rng(0).bytes(4096))
    text = folder / "notes.onnx"
    text.write_text("this is a text file, not an ONNX model\n")
    truncated = folder / "truncated.onnx"
    truncated.write_bytes(good_model.read_bytes()[: good_model.stat().st_size // 2])
    lstm = _lstm_model(folder / "lstm.onnx")
    dynamic = _conv_model(folder / "dynamic.onnx", dynamic=True)
    external = _external_data_model(folder)
    huge = _huge_model(folder / "huge.onnx")
    nan = _nan_model(folder / "nan.onnx")
    bad_hw = folder / "hw.json"
    bad_hw.write_text('{"isa": "x86-64-v3", "threads": ')
    not_checkpoint = folder / "checkpoint.pt"
    not_checkpoint.write_bytes(b"PK\x03\x04 definitely not a torch checkpoint")
    corrupt = _corrupt_one_line(dataset, folder / "corrupt-dataset")

    hw = "local/x86-64-v2/1t"

    def predict(model: Path, **kw: Any) -> Callable[[], Any]:
        return lambda: gnnperf.predict(model, kw.pop("hw", hw), **kw)

    def model_case(name: str, model: Path, says: str) -> list[BadInput]:
        return [
            BadInput(f"predict-{name}", ["predict", str(model), "--hw", hw], predict(model),
                     says),
            BadInput(f"graph-{name}", ["graph", str(model), "--isa", "x86-64-v2"],
                     lambda: extract_graph(lower_onnx(model, gnnperf.HardwareSpec.coerce(hw))),
                     says),
        ]

    cases = [
        *model_case("missing", folder / "absent.onnx", "not found"),
        *model_case("empty", empty, "empty"),
        *model_case("random-bytes", noise, "onnx"),
        *model_case("text", text, "onnx"),
        *model_case("truncated", truncated, "onnx"),
        *model_case("lstm", lstm, "lstm"),
        *model_case("dynamic", dynamic, "dynamic dimension"),
        *model_case("external-data-missing", external, "external"),
        *model_case("huge", huge, "gb"),
        *model_case("nan-weights", nan, "nan"),
        BadInput("wrong-input-shape-name",
                 ["predict", str(dynamic), "--hw", hw, "--input-shape", "nope=1,3,8,8"],
                 lambda: gnnperf.predict(dynamic, hw, input_shapes={"nope": [1, 3, 8, 8]}),
                 "nope"),
        BadInput("wrong-input-shape-rank",
                 ["predict", str(dynamic), "--hw", hw, "--input-shape", "x=1,3,8"],
                 lambda: gnnperf.predict(dynamic, hw, input_shapes={"x": [1, 3, 8]}), "x"),
        BadInput("wrong-input-shape-syntax",
                 ["predict", str(dynamic), "--hw", hw, "--input-shape", "x=1,three"],
                 lambda: gnnperf.predict(dynamic, hw, input_shapes={"x": [1, -3, 8, 8]}),
                 "x"),
        BadInput("unknown-hw-id", ["predict", str(good_model), "--hw", "a-cpu-nobody-has"],
                 predict(good_model, hw="a-cpu-nobody-has"), "a-cpu-nobody-has"),
        BadInput("malformed-hw-json", ["predict", str(good_model), "--hw", str(bad_hw)],
                 predict(good_model, hw=str(bad_hw)), "hw.json"),
        BadInput("unknown-build",
                 ["predict", str(good_model), "--hw", hw, "--build", "turbo"],
                 predict(good_model, build="turbo"), "turbo"),
        BadInput("not-a-checkpoint",
                 ["predict", str(good_model), "--hw", hw, "--checkpoint", str(not_checkpoint)],
                 predict(good_model, checkpoint=not_checkpoint), "checkpoint"),
        BadInput("corrupt-shard-line-stats", ["dataset", "stats", "--root", str(corrupt)],
                 lambda: dataset_stats(corrupt), "line 2"),
        BadInput("corrupt-shard-line-train",
                 ["train", "--root", str(corrupt), "--epochs", "1", "--out",
                  str(folder / "ckpt")],
                 lambda: LatencyDataset(corrupt), "line 2",
                 outputs=[folder / "ckpt" / "gnnperf.pt", folder / "ckpt" / "metrics.json"]),
        BadInput("corrupt-shard-line-bench",
                 ["bench", "--quick", "--root", str(corrupt), "--out", str(folder / "bench")],
                 lambda: bench_run(corrupt, folder / "bench", QUICK, "bench"), "line 2",
                 outputs=[folder / "bench" / "report.json", folder / "bench" / "report.md"]),
        BadInput("corrupt-shard-line-collect",
                 ["collect", "--out", str(corrupt), "--families", "vgg", "--count", "1",
                  "--hw", "x86-64-v2:1", "--build", "default"],
                 lambda: collect(corrupt, ["vgg"], 1, [("x86-64-v2", 1)], ["default"],
                                 progress=False), "line 2"),
        BadInput("collect-searched-build",
                 ["collect", "--out", str(folder / "searched"), "--families", "vgg",
                  "--count", "1", "--hw", "x86-64-v2:1", "--build", "tuned:64"],
                 lambda: collect(folder / "searched", ["vgg"], 1, [("x86-64-v2", 1)],
                                 ["tuned:64"], progress=False), "collect-tuning",
                 outputs=[folder / "searched"]),
        BadInput("tuning-budget-zero",
                 ["collect-tuning", "--out", str(folder / "tuning"), "--families", "vgg",
                  "--trials", "0"],
                 lambda: collect_tuning(folder / "tuning", [], [("x86-64-v2", 1)], 0,
                                        progress=False), "at least 1",
                 outputs=[folder / "tuning"]),
    ]
    return cases


def files_under(folder: Path) -> set[str]:
    """Every file under ``folder`` (relative), to see what a failing command left behind.

    Shard writers' lock files (``.PREFIX.lock``, empty, git-ignored) are not outputs.
    """
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()
            and not (p.name.startswith(".") and p.name.endswith(".lock"))}


__all__ = ["BadInput", "corpus", "files_under"]
