"""Batched constant folding gives the module TVM's FoldConstant gives, constants included."""

from __future__ import annotations

import pytest
import tvm
from tvm import relax

from gnnperf import zoo
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.constant_folding import _CALL_TIR, fold_constant_calls, with_batched_folding
from gnnperf.lowering.pipeline import _as_target, _backend


def _legalized(family: str, batched: bool) -> tvm.IRModule:
    target = _as_target(HardwareSpec.from_id("local/x86-64-v3/2t"))
    backend = _backend(target)
    passes = backend.legalize_passes(target)
    with target:
        mod = tvm.transform.Sequential(backend.library_dispatch_passes(target))(
            import_to_relax(load_onnx(zoo.export_onnx(zoo.tiny_spec(family)))))
        return tvm.transform.Sequential(with_batched_folding(passes) if batched else passes)(mod)


def _constant_calls(mod: tvm.IRModule) -> int:
    """call_tir bindings whose arguments are all constants (what folding should leave: 0)."""
    count = 0
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            call = binding.value
            if (isinstance(call, relax.Call) and call.op.same_as(_CALL_TIR)
                    and all(isinstance(a, tvm.ir.expr.Constant) for a in call.args[1].fields)):
                count += 1
    return count


@pytest.mark.parametrize("family", ["mobilenet", "resnet", "vit", "efficientnet"])
def test_batched_folding_gives_foldconstants_module(family: str) -> None:
    tvm.ir.assert_structural_equal(_legalized(family, batched=True),
                                   _legalized(family, batched=False))


def test_every_constant_call_is_folded_chains_included() -> None:
    """mobilenet's clip lowers to isnan(constant) feeding further calls: a chain that only
    folds over several rounds."""
    target = _as_target(HardwareSpec.from_id("local/x86-64-v3/2t"))
    backend = _backend(target)
    with target:
        mod = tvm.transform.Sequential(backend.library_dispatch_passes(target)
                                       + [relax.transform.LegalizeOps()])(
            import_to_relax(load_onnx(zoo.export_onnx(zoo.tiny_spec("mobilenet")))))
    before = _constant_calls(mod)
    assert before > 0
    folded = fold_constant_calls(mod)
    assert _constant_calls(folded) == 0
