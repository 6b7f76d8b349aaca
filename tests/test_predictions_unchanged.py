"""Refactors change no behaviour: the shipped checkpoint predicts the zoo's tiny models as it
did when ``tools/freeze_predictions.py`` froze them (same fixed hardware spec)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _freezer():
    spec = importlib.util.spec_from_file_location("freeze_predictions",
                                                  ROOT / "tools" / "freeze_predictions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_tiny_model_predictions_match_the_frozen_ones(tiny_graph) -> None:  # noqa: ANN001
    frozen = json.loads((ROOT / "tests" / "fixtures" / "tiny_predictions.json").read_text())
    now = _freezer().tiny_predictions(tiny_graph)
    assert set(now) == set(frozen)
    for family, builds in frozen.items():
        for build, ms in builds.items():
            assert now[family][build] == pytest.approx(ms, rel=1e-4), (family, build)
