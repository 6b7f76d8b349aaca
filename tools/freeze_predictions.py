"""Freeze the shipped checkpoint's predictions on the zoo's tiny models, so a refactor can
prove it changed no behaviour (``tests/test_predictions_unchanged.py`` compares).

    python tools/freeze_predictions.py [--out tests/fixtures/tiny_predictions.json]

Run it again only when a change is *meant* to move predictions (a new checkpoint, new
features), and say so in the commit. The hardware is a fixed spec (a Zen 4 record's, in
``tests/fixtures/hw_zen4_v3_2t.json``), so the figures do not depend on this machine.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnperf.atomic import write_text

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
HW_FILE = FIXTURES / "hw_zen4_v3_2t.json"
BUILDS = ("default", "sampled:0")


def _lower(family: str, build: str) -> Any:
    from gnnperf import zoo
    from gnnperf.features import extract_graph
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.lowering.pipeline import lower

    mod = import_to_relax(load_onnx(zoo.export_onnx(zoo.tiny_spec(family))))
    return extract_graph(lower(mod, {"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2},
                               build))


def tiny_predictions(graph_of: Callable[[str, str], Any] = _lower
                     ) -> dict[str, dict[str, float]]:
    """{family: {build: predicted ms}} for every zoo family's tiny model, uncalibrated;
    ``graph_of(family, build)`` lowers it (tests pass their session's shared graphs)."""
    from gnnperf import zoo
    from gnnperf.estimators.gnn.predictor import Predictor
    from gnnperf.hardware.spec import HardwareSpec

    hw = HardwareSpec.coerce(str(HW_FILE))
    predictor = Predictor()
    out: dict[str, dict[str, float]] = {}
    for family in zoo.FAMILIES + zoo.REAL_ARCHITECTURES:
        graphs = [(graph_of(family, build), hw) for build in BUILDS]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = predictor.predict_graphs(graphs, calibrated=False)
        out[family] = {b: r.latency_ms for b, r in zip(BUILDS, results, strict=True)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURES / "tiny_predictions.json")
    args = parser.parse_args()
    write_text(args.out, json.dumps(tiny_predictions(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
