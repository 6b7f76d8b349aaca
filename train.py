"""Entry point of the main job.

Until the GNN estimator lands (model issue), this runs the measurement pipeline on a
bundled tiny model from the zoo: ONNX export → TVM lowering → kernel graph → compile →
whole-model and per-kernel measurement, and prints what it measured.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from gnnperf import zoo
from gnnperf.features import extract_graph
from gnnperf.hardware import HardwareSpec
from gnnperf.lowering import compile_lowered, export_executable, lower
from gnnperf.measure import MeasureSettings, make_inputs, measure_library
from gnnperf.onnx_import import import_to_relax, load_onnx


def main() -> int:
    spec = zoo.sample_spec("squeezenet", 0)
    hw = HardwareSpec.local("x86-64-v3" if "x86-64-v3" in _isas() else None, measure=False)
    mod = import_to_relax(load_onnx(zoo.export_onnx(spec)))
    for build in ("default", "sampled:0"):
        lowered = lower(mod, hw, build)
        graph = extract_graph(lowered)
        with tempfile.TemporaryDirectory() as tmp:
            lib = export_executable(compile_lowered(lowered), Path(tmp) / "m.so")
            m = measure_library(lib, make_inputs(lowered.inputs), hw.threads, per_kernel=True,
                                settings=MeasureSettings(quiet_timeout_s=30))
        print(f"{spec.model_id} [{hw.isa}/{hw.threads}t, {build}]: {len(graph.nodes)} kernels, "
              f"{graph.total_flops / 1e6:.1f} MFLOP, median {m.whole.median_ms:.3f} ms "
              f"(CV {m.whole.cv * 100:.1f}%), kernel sum {m.kernel_sum_ms:.3f} ms")
    return 0


def _isas() -> list[str]:
    from gnnperf.hardware import supported_isas

    return supported_isas()


if __name__ == "__main__":
    sys.exit(main())
