"""The public API: ``gnnperf.predict`` stays a function, whatever was imported before."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import gnnperf

README = Path(__file__).resolve().parent.parent / "README.md"


def _readme_snippet() -> str:
    """The README's Python example, exactly as a user copies it."""
    text = README.read_text()
    match = re.search(r"From Python:\s*```python\n(.*?)```", text, re.S)
    assert match, "the README lost its Python example"
    return match.group(1)


def test_readme_snippet_runs_twice_in_one_process(cnn_onnx: Path) -> None:
    snippet = _readme_snippet()
    assert '"model.onnx"' in snippet
    code = snippet.replace('"model.onnx"', repr(str(cnn_onnx)))
    # twice, as a user in a notebook would: the first call must not break the second
    proc = subprocess.run([sys.executable, "-c", f"{code}\n{code}"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first_lines = [ln for ln in proc.stdout.splitlines() if len(ln.split()) == 4]
    assert len(first_lines) == 2 and first_lines[0] == first_lines[1]


def _submodules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(gnnperf.__path__, "gnnperf.")
            if not m.name.endswith(".__main__")]  # entry points run when imported


def test_predict_is_callable_after_importing_every_submodule() -> None:
    for name in _submodules():
        importlib.import_module(name)
    assert inspect.isfunction(gnnperf.predict)
    assert inspect.isfunction(gnnperf.predict_many)
    assert "onnx_path" in inspect.signature(gnnperf.predict).parameters


def test_no_public_name_is_also_a_submodule() -> None:
    """A submodule named like a public function replaces it as soon as it is imported."""
    modules = {name.split(".")[1] for name in _submodules()}
    assert (set(gnnperf.__all__) - {"errors"}) & modules == set()


def test_all_names_resolve_to_what_the_docs_say() -> None:
    from gnnperf import errors
    from gnnperf.features import KernelGraph
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.prediction.api import Prediction, predict, predict_many

    expected = {"HardwareSpec": HardwareSpec, "KernelGraph": KernelGraph,
                "Prediction": Prediction, "errors": errors, "predict": predict,
                "predict_many": predict_many}
    assert set(gnnperf.__all__) == set(expected)
    for name, obj in expected.items():
        assert getattr(gnnperf, name) is obj
    assert inspect.isclass(gnnperf.Prediction) and inspect.ismodule(gnnperf.errors)
    assert issubclass(gnnperf.errors.ModelLoadError, gnnperf.errors.GnnperfError)


def test_import_stays_light() -> None:
    """``import gnnperf`` loads neither TVM nor torch (the names resolve on first use)."""
    proc = subprocess.run([sys.executable, "-c", "import sys, gnnperf; "
                           "print(sorted({'tvm', 'torch'} & set(sys.modules)))"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr
