"""Relax constant folding that compiles one LLVM module per round, not one per folded call.

TVM's ``FoldConstant`` evaluates every call whose arguments are all constants (a bias
reshaped to broadcast, a weight transposed for a dense layer, ``isnan`` of a constant)
by building that one PrimFunc and JIT-compiling it. Each build costs ~25 ms, almost all
of it fixed LLVM overhead, so a ResNet spends 0.8 s there: half of its whole lowering.

:func:`BatchedFoldConstant` does the same evaluations with the same PrimFuncs on the CPU,
but compiles every call that is foldable in a round into one unoptimised module,
and keeps the compiled functions for the rest of the process (NAS candidates share most
of them). It runs right before ``FoldConstant``, which then finds nothing left to build
and still does its clean-up, so the module is the one ``FoldConstant`` alone gives
(``tests/test_constant_folding.py`` checks structural equality, constants included).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import tvm
import tvm_ffi
from tvm import relax, tirx
from tvm.ir.expr import Constant

#: Compiled evaluators kept per process, by the PrimFunc's structural hash.
_MAX_KEPT = 4096
_BUILT: OrderedDict[int, Callable[..., Any] | None] = OrderedDict()
_CALL_TIR = tvm.ir.Op.get("relax.call_tir")
#: FoldConstant's own evaluation target (``Target{"llvm"}`` in fold_constant.cc), without
#: LLVM's optimisations: a constant is evaluated once, so optimising its code costs more
#: than it saves (40% of the compile time), and unoptimised code computes the same values
#: (data movement and comparisons are exact; the tests compare every constant).
_EVAL_TARGET = {"kind": "llvm", "opt-level": 0}


def _const_shape(ty: Any) -> list[int] | None:
    if not isinstance(ty, relax.TensorType) or not isinstance(ty.shape, relax.ShapeExpr):
        return None
    dims = []
    for value in ty.shape.values:
        if not isinstance(value, tirx.IntImm):
            return None
        dims.append(int(value.value))
    return dims


@relax.expr_functor.mutator
class _ConstantCallFolder(relax.PyExprMutator):
    """Replaces ``call_tir`` of constants by its value where the evaluator is compiled;
    collects the PrimFuncs of the others in ``wanted``."""

    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)
        self.module = mod
        self.wanted: dict[int, tirx.PrimFunc] = {}
        self.folded = 0

    def _constant_or(self, var: relax.Var, fallback: Callable[[relax.Var], relax.Expr]
                     ) -> relax.Expr:
        value = self.lookup_binding(var)
        return value if isinstance(value, Constant) else fallback(var)

    def visit_var_(self, op: relax.Var) -> relax.Expr:
        return self._constant_or(op, super().visit_var_)

    def visit_dataflow_var_(self, op: relax.DataflowVar) -> relax.Expr:
        return self._constant_or(op, super().visit_dataflow_var_)

    def visit_call_(self, op: relax.Call) -> relax.Expr:
        call = self.visit_expr_post_order(op)
        if not isinstance(call, relax.Call) or not call.op.same_as(_CALL_TIR):
            return call
        if len(call.ty_args) != 1 or not isinstance(call.args[1], relax.Tuple):
            return call
        args = list(call.args[1].fields)
        shape = _const_shape(call.ty_args[0])
        func = self.module.functions.get(call.args[0]) if isinstance(
            call.args[0], tvm.ir.GlobalVar) else None
        if shape is None or not isinstance(func, tirx.PrimFunc) or not all(
                isinstance(a, Constant) for a in args):
            return call
        key = int(tvm_ffi.structural_hash(func))
        if key not in _BUILT:
            self.wanted[key] = func
            return call
        evaluate = _BUILT[key]
        _BUILT.move_to_end(key)
        if evaluate is None:  # LLVM cannot build it: FoldConstant would skip it too
            return call
        out = tvm.runtime.empty(shape, call.ty_args[0].dtype)
        evaluate(*[a.value for a in args], out)
        self.folded += 1
        return relax.const(out)


def _compile(funcs: dict[int, tirx.PrimFunc]) -> None:
    """Compile ``funcs`` as one module (each alone if the batch fails) into ``_BUILT``."""
    names = {key: f"fold_{i}" for i, key in enumerate(funcs)}
    target = tvm.target.Target(_EVAL_TARGET)
    try:
        lib = tvm.tirx.build(tvm.IRModule({
            names[k]: f.with_attr("global_symbol", names[k]) for k, f in funcs.items()}),
            target=target)
        for key, name in names.items():
            _BUILT[key] = lib[name]
    except Exception:  # TVM raises C++-side errors; find the one that LLVM refuses
        for key, func in funcs.items():
            try:
                lib = tvm.tirx.build(func.with_attr("global_symbol", "fold"), target=target)
                _BUILT[key] = lib["fold"]
            except Exception:
                _BUILT[key] = None
    while len(_BUILT) > _MAX_KEPT:
        _BUILT.popitem(last=False)


def fold_constant_calls(mod: tvm.IRModule, max_rounds: int = 16) -> tvm.IRModule:
    """Evaluate every ``call_tir`` whose arguments are constants, rounds until none is left
    (a folded result can make its consumer foldable)."""
    for _ in range(max_rounds):
        changed = False
        for gv, func in list(mod.functions.items()):
            if not isinstance(func, relax.Function):
                continue
            folder = _ConstantCallFolder(mod)
            new_func = folder.visit_expr(func)
            if folder.wanted:
                _compile(folder.wanted)
                changed = True
            if folder.folded:
                mod[gv] = new_func
                changed = True
        if not changed:
            break
    return mod


@tvm.transform.module_pass(opt_level=0, name="BatchedFoldConstant")
def BatchedFoldConstant(mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:  # noqa: N802  (a pass, named like TVM's)
    """Constant folding with batched compilation; run it right before ``FoldConstant``."""
    return fold_constant_calls(mod)


def with_batched_folding(passes: list[tvm.transform.Pass]) -> list[tvm.transform.Pass]:
    """``passes`` with :func:`BatchedFoldConstant` before each ``FoldConstant``."""
    out: list[tvm.transform.Pass] = []
    for p in passes:
        if p.info.name == "FoldConstant":
            out.append(BatchedFoldConstant)
        out.append(p)
    return out
