"""Foundation figures: import/lower/compile/measure times and latency per build × ISA × threads.

Models: a ResNet-18 (plain torch, 224 px, batch 1) and a 4-layer BERT-like encoder
(transformers BertModel from a config, hidden 256, 4 heads, sequence 128, random
weights). For each build configuration × ISA × thread count it prints the whole-model
median and spread, the sum of per-kernel medians and their ratio, and the stage times.

    python benchmarks/foundation.py [--builds default,dlight,sampled:0] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch import nn

from gnnperf.atomic import write_text
from gnnperf.features import extract_graph
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.pipeline import compile_lowered, export_executable, lower
from gnnperf.measure import MeasureSettings, make_inputs, measure_library


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


class BertIds(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        cfg = BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                         num_attention_heads=4, intermediate_size=1024)
        self.bert = BertModel(cfg, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids).last_hidden_state


def export(model: nn.Module, example: torch.Tensor, name: str, path: Path) -> Path:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (example,), str(path), opset_version=17, dynamo=False,
                          input_names=[name])
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", default="default,dlight,sampled:0")
    ap.add_argument("--isas", default="x86-64-v2,x86-64-v3")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "resnet18-224": export(ResNet18(), torch.randn(1, 3, 224, 224), "x",
                                   Path(tmp) / "r18.onnx"),
            "bert4-256-seq128": export(BertIds(), torch.randint(0, 100, (1, 128)), "input_ids",
                                       Path(tmp) / "bert.onnx"),
        }
        for name, path in models.items():
            start = time.perf_counter()
            mod = import_to_relax(load_onnx(path))
            import_s = time.perf_counter() - start
            for isa in args.isas.split(","):
                for build in args.builds.split(","):
                    hw = HardwareSpec.local(isa, 1, measure=False)
                    lowered = lower(mod, hw, build)
                    graph = extract_graph(lowered)
                    ex = compile_lowered(lowered)
                    lib = export_executable(ex, Path(tmp) / f"{name}-{isa}-{build}.so")
                    arrays = make_inputs(lowered.inputs)
                    for threads in [int(t) for t in args.threads.split(",")]:
                        m = measure_library(lib, arrays, threads, per_kernel=True,
                                            settings=MeasureSettings(quiet_timeout_s=300))
                        row = {
                            "model": name, "isa": isa, "build": build, "threads": threads,
                            "kernels": len(graph.nodes), "gflops": graph.total_flops / 1e9,
                            "import_s": import_s,
                            "lower_s": sum(v for k, v in lowered.timings.items()
                                           if k in ("fuse_s", "schedule_s", "finalize_s")),
                            "compile_s": lowered.timings["compile_s"],
                            "measure_s": m.duration_s,
                            "median_ms": m.whole.median_ms, "cv": m.whole.cv,
                            "iqr_ms": m.whole.iqr_ms, "kernel_sum_ms": m.kernel_sum_ms,
                            "other_load": m.other_load,
                        }
                        rows.append(row)
                        print(f"{name:<18} {isa:<10} {build:<10} {threads}t "
                              f"median {row['median_ms']:9.3f} ms  CV {row['cv'] * 100:5.1f}%  "
                              f"IQR {row['iqr_ms']:7.3f}  Σkernels {row['kernel_sum_ms']:9.3f} "
                              f"({row['kernel_sum_ms'] / row['median_ms'] * 100:5.1f}%)  "
                              f"import {import_s:.1f}s lower {row['lower_s']:.1f}s "
                              f"compile {row['compile_s']:.1f}s measure {row['measure_s']:.1f}s "
                              f"load {row['other_load'] * 100:.0f}%", flush=True)
    if args.out:
        write_text(args.out, json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
