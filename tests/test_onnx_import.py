"""Tests for gnnperf.frontend: loading errors, static shapes, folding, TVM import.

Every model here is tiny (built with onnx.helper or from a transformers config with random
weights), so the whole file stays well under a minute on two cores.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from gnnperf.errors import (
    DynamicShapeError,
    FrontendError,
    ModelLoadError,
    ShapeFoldingError,
    UnsupportedOpError,
)
from gnnperf.frontend import (
    MAX_FOLD_ELEMENTS,
    MAX_FOLD_WEIGHT_ELEMENTS,
    import_to_relax,
    load_onnx,
    onnx_input_shapes,
)

OPSET = 17


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto] | None = None,
    opset: int = OPSET,
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _out(name: str, rank: int, elem_type: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    """A graph output of known rank; the checker insists on a shape for graph outputs."""
    return helper.make_tensor_value_info(name, elem_type, [f"{name}_{i}" for i in range(rank)])


def _const(name: str, values: Any, dtype: Any = np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def _relu_model(shape: list[int | str | None]) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_out("y", len(shape))])


def _shape_arith_model() -> onnx.ModelProto:
    """The run-time shape patterns of TorchScript transformer exports, in one small graph.

    x: [batch, seq, 8] -> reshape to [batch, seq, 2, 4] via Shape/Gather/Unsqueeze/Concat,
    add a causal mask built from Range/Unsqueeze/LessOrEqual/Where, an Expand to a run-time
    shape, a ConstantOfShape, and a Slice whose end comes from Shape.
    """
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    inits = [
        _const("i0", 0),
        _const("i1", 1),
        _const("ax0", [0]),
        _const("heads", [2]),
        _const("hdim", [4]),
        _const("one", 1),
        _const("zero_f", 0.0, np.float32),
        _const("neg_f", -1e4, np.float32),
        _const("w", np.linspace(-1, 1, 8 * 8).reshape(8, 8), np.float32),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["shp", "i1"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "heads", "hdim"], ["target"], axis=0),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Reshape", ["xw", "target"], ["r"]),
        helper.make_node("Transpose", ["r"], ["rt"], perm=[0, 2, 1, 3]),  # [b, 2, s, 4]
        helper.make_node("MatMul", ["rt", "rtT"], ["scores"]),  # [b, 2, s, s]
        helper.make_node("Transpose", ["rt"], ["rtT"], perm=[0, 1, 3, 2]),
        # causal mask [s, s] from Range
        helper.make_node("Range", ["i0", "s", "one"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "ax0"], ["row"]),
        helper.make_node("Unsqueeze", ["pos", "i1_1d"], ["col"]),
        helper.make_node("Constant", [], ["i1_1d"], value_ints=[1]),
        helper.make_node("LessOrEqual", ["row", "col"], ["keep"]),
        helper.make_node("Where", ["keep", "zero_f", "neg_f"], ["mask"]),
        helper.make_node("Add", ["scores", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("ReduceSum", ["probs", "ax0"], ["y"], keepdims=0),
        # ConstantOfShape + Expand to a run-time shape, Slice with a Shape-derived end
        helper.make_node(
            "ConstantOfShape",
            ["target"],
            ["ones"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
        ),
        helper.make_node("Expand", ["xw", "shp"], ["xe"]),
        helper.make_node("Slice", ["xe", "ax0", "s1", "i1_1d"], ["xs"]),
        helper.make_node("Reshape", ["ones", "shp_flat"], ["ones_flat"]),
        helper.make_node("Size", ["xw"], ["n"]),
        helper.make_node("Div", ["n", "heads_s"], ["half"]),
        helper.make_node("Constant", [], ["heads_s"], value_int=2),
        helper.make_node("Unsqueeze", ["half", "ax0"], ["half1"]),
        helper.make_node("Concat", ["heads", "half1"], ["shp_flat_raw"], axis=0),
        helper.make_node("Identity", ["shp_flat_raw"], ["shp_flat"]),
        helper.make_node("ReduceSum", ["ones_flat", "ax0"], ["ones_sum"], keepdims=1),
        helper.make_node("ReduceMean", ["xs"], ["xs_mean"], keepdims=0),
        helper.make_node("Mul", ["ones_sum", "xs_mean"], ["z"]),
    ]
    # onnx.helper does not sort; put nodes in a valid topological order.
    return _model(_toposort(nodes, inits, ["x"]), [x], [_out("y", 3), _out("z", 2)], inits)


def _toposort(
    nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], inputs: list[str]
) -> list[onnx.NodeProto]:
    known = {init.name for init in inits} | set(inputs)
    ordered: list[onnx.NodeProto] = []
    pending = list(nodes)
    while pending:
        ready = [n for n in pending if all(i in known for i in n.input if i)]
        assert ready, "cycle in test graph"
        for node in ready:
            ordered.append(node)
            known.update(node.output)
            pending.remove(node)
    return ordered


# ------------------------------------------------------------------------------------------
# File errors
# ------------------------------------------------------------------------------------------


def _write_half_model(path: Path) -> None:
    data = _shape_arith_model().SerializeToString()
    path.write_bytes(data[: len(data) // 2])


_BAD_FILES: dict[str, Callable[[Path], Path]] = {
    "missing": lambda d: d / "nope.onnx",
    "directory": lambda d: d,
    "empty": lambda d: (d / "empty.onnx", (d / "empty.onnx").write_bytes(b""))[0],
    "truncated": lambda d: (d / "half.onnx", _write_half_model(d / "half.onnx"))[0],
    "text": lambda d: (
        d / "readme.onnx",
        (d / "readme.onnx").write_text("This is not a model.\nJust some text.\n"),
    )[0],
    # Bytes that protobuf parses happily (ir_version=7, producer_name) but that hold no graph.
    "no_graph": lambda d: (
        d / "nograph.onnx",
        (d / "nograph.onnx").write_bytes(b"\x08\x07\x12\x05notes"),
    )[0],
    "random": lambda d: (
        d / "rand.onnx",
        (d / "rand.onnx").write_bytes(np.random.default_rng(0).bytes(4096)),
    )[0],
}


@pytest.mark.parametrize("kind", sorted(_BAD_FILES))
def test_bad_files_raise_model_load_error(tmp_path: Path, kind: str) -> None:
    path = _BAD_FILES[kind](tmp_path)
    with pytest.raises(ModelLoadError) as info:
        load_onnx(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message


def test_checker_failure_is_model_load_error() -> None:
    model = _relu_model([1, 4])
    model.graph.node[0].input[0] = "undefined_tensor"
    with pytest.raises(ModelLoadError, match="checker"):
        load_onnx(model)


def test_loads_from_path_and_does_not_mutate_proto(tmp_path: Path) -> None:
    model = _relu_model(["n", 4])
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    before = model.SerializeToString()
    assert onnx_input_shapes(load_onnx(model, {"x": [3, 4]})) == {"x": ((3, 4), "float32")}
    assert model.SerializeToString() == before
    assert onnx_input_shapes(load_onnx(str(path), {"x": [2, 4]})) == {"x": ((2, 4), "float32")}


# ------------------------------------------------------------------------------------------
# Unsupported operators
# ------------------------------------------------------------------------------------------


def _rnn_model(op_type: str) -> onnx.ModelProto:
    seq, batch, feat, hidden = 5, 1, 3, 4
    gates = {"LSTM": 4, "GRU": 3}[op_type]
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, feat])
    inits = [
        numpy_helper.from_array(rng.standard_normal((1, gates * hidden, feat), np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, gates * hidden, hidden), np.float32), "R"),
    ]
    node = helper.make_node(op_type, ["x", "W", "R"], ["y"], hidden_size=hidden, name="rnn")
    return _model([node], [x], [_out("y", 4)], inits)


@pytest.mark.parametrize("op_type", ["LSTM", "GRU"])
def test_recurrent_ops_are_unsupported(tmp_path: Path, op_type: str) -> None:
    path = tmp_path / f"{op_type}.onnx"
    onnx.save(_rnn_model(op_type), path)
    model = load_onnx(path)
    with pytest.raises(UnsupportedOpError, match=op_type) as info:
        import_to_relax(model)
    assert info.value.op_type == op_type
    assert "node 'rnn'" in str(info.value)


# ------------------------------------------------------------------------------------------
# Static shapes
# ------------------------------------------------------------------------------------------


def _ids_model(shape: list[int | str]) -> onnx.ModelProto:
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, shape)
    out = _out("h", 3)
    emb = numpy_helper.from_array(np.arange(20 * 4, dtype=np.float32).reshape(20, 4), "emb")
    node = helper.make_node("Gather", ["emb", "input_ids"], ["h"], axis=0)
    return _model([node], [ids], [out], [emb])


def test_dynamic_dims_need_overrides() -> None:
    with pytest.raises(DynamicShapeError) as info:
        load_onnx(_ids_model([1, "sequence"]))
    message = str(info.value)
    assert "'input_ids'" in message and "dimension 1" in message and "'sequence'" in message
    assert "input_shapes=" in message

    with pytest.raises(DynamicShapeError, match="dimension 0 .'batch'."):
        load_onnx(_ids_model(["batch", "sequence"]))


def test_overrides_make_model_static_and_importable() -> None:
    model = load_onnx(_ids_model(["batch", "sequence"]), {"input_ids": [2, 7]})
    assert onnx_input_shapes(model) == {"input_ids": ((2, 7), "int64")}
    out_dims = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert out_dims == [2, 7, 4]
    mod = import_to_relax(model)
    assert "main" in [gv.name_hint for gv in mod.get_global_vars()]


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        ({"input_ids": [2, 7], "mask": [2, 7]}, "'mask', which is not a graph input"),
        ({"emb": [20, 4]}, "'emb', which is a weight"),
        ({"input_ids": [2, 7, 1]}, "rank 3 but input 'input_ids' has rank 2"),
        ({"input_ids": [3, 7]}, "fixes it to 1"),
        ({"input_ids": [1, 0]}, "positive"),
        ({"input_ids": [1, 2.5]}, "integers"),
    ],
)
def test_bad_overrides(overrides: dict[str, list[Any]], pattern: str) -> None:
    with pytest.raises(DynamicShapeError, match=pattern):
        load_onnx(_ids_model([1, "sequence"]), overrides)


def test_onnx_input_shapes_refuses_dynamic_inputs() -> None:
    with pytest.raises(DynamicShapeError, match="'input_ids'"):
        onnx_input_shapes(_ids_model(["batch", 3]))


# ------------------------------------------------------------------------------------------
# Folding
# ------------------------------------------------------------------------------------------


def test_folding_removes_shape_arithmetic_and_keeps_semantics() -> None:
    raw = _shape_arith_model()
    folded = load_onnx(raw, {"x": [2, 5, 8]})
    ops = {node.op_type for node in folded.graph.node}
    assert not ops & {"Shape", "Size", "Gather", "Concat", "Range", "ConstantOfShape", "Where"}
    assert ops >= {"MatMul", "Reshape", "Softmax"}
    assert len(folded.graph.node) < len(raw.graph.node) // 2

    x = np.random.default_rng(1).standard_normal((2, 5, 8)).astype(np.float32)
    want = ReferenceEvaluator(raw).run(None, {"x": x})
    got = ReferenceEvaluator(folded).run(None, {"x": x})
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_raw_frontend_fails_on_shape_arithmetic_but_folded_imports() -> None:
    raw = _shape_arith_model()
    with pytest.raises(ShapeFoldingError, match="input_shapes"):
        import_to_relax(raw)
    import_to_relax(load_onnx(raw, {"x": [2, 5, 8]}))


def test_folding_is_bounded() -> None:
    """Huge outputs and big weights stay in the graph; If is left alone."""
    big = int(MAX_FOLD_ELEMENTS) + 1
    side = int(np.ceil(np.sqrt(MAX_FOLD_WEIGHT_ELEMENTS + 1)))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    outs = [_out(name, 1) for name in ("y", "t", "c")]
    inits = [
        _const("big_shape", [big]),
        numpy_helper.from_array(np.ones((side, side), np.float32), "w"),
        _const("cond", True, np.bool_),
        _const("small_shape", [3]),
    ]
    then_g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["a"])],
        "then",
        [],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["b"])],
        "else",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])],
    )
    nodes = [
        helper.make_node("ConstantOfShape", ["big_shape"], ["huge"]),
        helper.make_node("Cast", ["huge"], ["huge_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["huge_f"], ["hs"], keepdims=1),
        helper.make_node("Add", ["x", "hs"], ["y"]),
        helper.make_node("Transpose", ["w"], ["wt"]),
        helper.make_node("ReduceMax", ["wt"], ["wm"], keepdims=0),
        helper.make_node("Add", ["x", "wm"], ["t"]),
        helper.make_node("If", ["cond"], ["c_if"], then_branch=then_g, else_branch=else_g),
        helper.make_node(
            "ConstantOfShape",
            ["small_shape"],
            ["zeros"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]),
        ),
        helper.make_node("ReduceSum", ["zeros"], ["zs"], keepdims=1),
        helper.make_node("Add", ["c_if", "zs"], ["c"]),
    ]
    folded = load_onnx(_model(nodes, [x], outs, inits))
    ops = [node.op_type for node in folded.graph.node]
    assert "ConstantOfShape" in ops  # 1M+ elements: not materialised
    assert "Transpose" in ops  # weight above the limit: left to TVM
    assert "If" in ops
    assert ops.count("ConstantOfShape") == 1  # the small one was folded
    assert all(
        numpy_helper.to_array(init).size <= MAX_FOLD_ELEMENTS for init in folded.graph.initializer
    )


def test_frontend_error_names_node() -> None:
    """A non-shape frontend failure becomes FrontendError naming the node."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = _out("y", 2)
    # A 3-D Gemm operand violates the spec at run time but passes the checker.
    w = numpy_helper.from_array(np.ones((3, 4, 1), np.float32), "w")
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="bad_gemm")
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y], [w]),
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    with pytest.raises(FrontendError, match="node 'bad_gemm' .Gemm.") as info:
        import_to_relax(model)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------------
# Tiny transformers models: TorchScript export, raw frontend vs. load_onnx, TVM vs. torch
# ------------------------------------------------------------------------------------------

_TEXT = {"bert", "gpt2", "distilbert", "roberta", "albert", "electra"}


def _hf_config(arch: str) -> Any:
    import transformers as tf

    small = dict(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=100,
    )
    vision = dict(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1])
    return {
        "bert": lambda: tf.BertConfig(**small),
        "roberta": lambda: tf.RobertaConfig(**small),
        "albert": lambda: tf.AlbertConfig(embedding_size=16, **small),
        "electra": lambda: tf.ElectraConfig(embedding_size=16, **small),
        "distilbert": lambda: tf.DistilBertConfig(
            dim=32, n_layers=1, n_heads=2, hidden_dim=64, vocab_size=100
        ),
        "gpt2": lambda: tf.GPT2Config(
            n_embd=32,
            n_layer=1,
            n_head=2,
            vocab_size=100,
            n_positions=64,
            use_cache=False,
            bos_token_id=0,
            eos_token_id=0,
        ),
        "vit": lambda: tf.ViTConfig(
            image_size=32,
            patch_size=8,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
        ),
        "convnext": lambda: tf.ConvNextConfig(num_stages=2, image_size=32, **vision),
        "resnet": lambda: tf.ResNetConfig(embedding_size=8, layer_type="basic", **vision),
    }[arch]()


def _example(arch: str, batch: int, rng: np.random.Generator) -> np.ndarray:
    if arch in _TEXT:
        return rng.integers(0, 100, size=(batch, 6 if batch > 1 else 8), dtype=np.int64)
    return rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)


def _export(arch: str, path: Path) -> Any:
    """Export with dynamic axes, as users do; returns the torch module for reference outputs."""
    import torch
    import transformers as tf

    class MainTensor(torch.nn.Module):
        """Positional single-input forward returning the main tensor (what export needs).

        Text models also get an all-ones attention mask built from the input at run time:
        GPT-2's mask code otherwise calls torch.diff, which TorchScript export cannot handle,
        and the run-time mask is exactly the kind of subgraph folding must remove.
        """

        def __init__(self, inner: torch.nn.Module, text: bool) -> None:
            super().__init__()
            self.inner = inner
            self.text = text

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.text:
                out = self.inner(input_ids=x, attention_mask=torch.ones_like(x))
            else:
                out = self.inner(pixel_values=x)
            return out[0]

    torch.manual_seed(0)
    # eval() on the wrapper: export restores the wrapper's mode recursively afterwards.
    module = MainTensor(tf.AutoModel.from_config(_hf_config(arch)), arch in _TEXT).eval()
    example = torch.from_numpy(_example(arch, 1, np.random.default_rng(0)))
    axes = {0: "batch", 1: "sequence"} if arch in _TEXT else {0: "batch"}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (example,),
            str(path),
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": axes},
            opset_version=OPSET,
            dynamo=False,
        )
    return module


@pytest.fixture(scope="module")
def target() -> Any:
    import tvm

    return tvm.target.Target({"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2})


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    "arch",
    ["bert", "gpt2", "distilbert", "roberta", "albert", "electra", "vit", "convnext", "resnet"],
)
def test_transformers_export_folds_imports_and_matches_torch(
    arch: str, tmp_path: Path, target: Any
) -> None:
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    path = tmp_path / f"{arch}.onnx"
    module = _export(arch, path)

    if arch in _TEXT:
        # Why folding exists: the frontend cannot convert the run-time shape/mask arithmetic
        # of these exports (it dies in ConstantOfShape with a broadcast_to rank error), with
        # or without a static shape_dict.
        for shape_dict in (None, {"x": [2, 6]}):
            with (
                pytest.raises(Exception, match="broadcast_to"),
                contextlib.redirect_stdout(io.StringIO()),
            ):
                from_onnx(onnx.load(path), shape_dict=shape_dict, keep_params_in_input=False)

    x = _example(arch, 2, np.random.default_rng(1))  # a different shape from the export's
    model = load_onnx(path, input_shapes={"x": list(x.shape)})
    assert not {n.op_type for n in model.graph.node} & {"Shape", "ConstantOfShape", "Range"}
    mod = import_to_relax(model)
    ex = tvm.compile(mod, target, relax_pipeline=relax.get_default_pipeline(target))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()

    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
