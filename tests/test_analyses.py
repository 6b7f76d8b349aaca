"""The static analyses read what TVM's own schedule API reads, at a fraction of the cost."""

from __future__ import annotations

import pytest
from tvm import s_tir, tirx

from gnnperf import zoo
from gnnperf.features.analyses import _blocks_and_loops, ms_store_features, ms_store_matrix
from gnnperf.features.vocabulary import MS_FEATURE_DIM
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.pipeline import lower_onnx


def _described(pairs: list[tuple[s_tir.SBlock, list[tirx.For]]]) -> list[tuple[str, list[str]]]:
    """Each block by name with its loops (variable, extent, kind, annotations), in a
    canonical order: what the loop figures are computed from."""
    return sorted((block.name_hint, [f"{lp.loop_var.name}:{lp.extent}:{int(lp.kind)}:"
                                     f"{sorted(lp.annotations.items()) if lp.annotations else ''}"
                                     for lp in loops]) for block, loops in pairs)


def _through_the_schedule(func: tirx.PrimFunc) -> list[tuple[s_tir.SBlock, list[tirx.For]]]:
    """Every block under the root with its loops, from ``Schedule.get_child_blocks`` /
    ``get_loops``: the reference the TIR walk replaces."""
    sch = s_tir.Schedule(func)
    found, stack = [], list(sch.get_child_blocks(sch.get_sblock("root")))
    while stack:
        block = stack.pop()
        found.append((sch.get(block), [sch.get(lp) for lp in sch.get_loops(block)]))
        stack.extend(sch.get_child_blocks(block))
    return found


@pytest.mark.parametrize("build", ["default", "sampled:0", "dlight"])
def test_the_tir_walk_finds_the_blocks_and_loops_the_schedule_api_finds(build: str) -> None:
    hw = HardwareSpec.from_id("local/x86-64-v3/2t")
    compared = 0
    for family in ("mobilenet", "vit", "convnext", "hf-roberta-base"):
        lowered = lower_onnx(zoo.export_onnx(zoo.tiny_spec(family)), hw, build)
        for name, func in lowered.primfuncs().items():
            try:
                expected = _through_the_schedule(func)
            except Exception:  # no root block (a scan): the walk must refuse it too
                with pytest.raises(LookupError):
                    _blocks_and_loops(func)
                continue
            assert _described(_blocks_and_loops(func)) == _described(expected), name
            compared += 1
    assert compared > 20


def test_the_store_features_are_the_mean_of_the_per_store_rows() -> None:
    """One row per store (what TVM's cost model scores), and the node's fixed-width row is
    their mean: the benchmark that aggregates stores reads the same extractor."""
    hw = HardwareSpec.from_id("local/x86-64-v3/2t")
    lowered = lower_onnx(zoo.export_onnx(zoo.tiny_spec("mobilenet")), hw, "sampled:0")
    multi_store = 0
    for func in lowered.primfuncs().values():
        stores = ms_store_matrix(func, lowered.target)
        if not stores.size:
            continue
        assert stores.shape[1] >= MS_FEATURE_DIM
        mean = ms_store_features(func, lowered.target)
        assert mean == pytest.approx(stores[:, :MS_FEATURE_DIM].mean(0).tolist(), abs=1e-4)
        # a padded convolution stores its padding and its output: rows that differ
        multi_store += len(stores) > 1 and bool((stores != stores[0]).any())
    assert multi_store >= 3
