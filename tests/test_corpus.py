"""The real-architecture corpus (``tf-*``): its size, its sizes, its source families, and
that each modality goes through export, import and lowering to a kernel graph."""

from __future__ import annotations

from collections import Counter

import pytest

from gnnperf import zoo
from gnnperf.cli.common import parse_families
from gnnperf.errors import ModelLoadError
from gnnperf.zoo.corpus import CATALOG, MODEL_TYPES
from gnnperf.zoo.corpus.catalog import SIZES
from gnnperf.zoo.corpus.spec import source_family


def test_the_corpus_spans_the_issue_s_minimum() -> None:
    # >= 300 architectures from >= 60 transformers model types, every modality present
    assert len(zoo.CORPUS) >= 300 and len(MODEL_TYPES) >= 60
    assert set(MODEL_TYPES.values()) == set(SIZES)
    assert all(name.startswith("tf-") for name in zoo.CORPUS)
    assert not set(zoo.CORPUS) & set(zoo.FAMILIES + zoo.REAL_ARCHITECTURES)
    modality_types = Counter(MODEL_TYPES.values())
    assert modality_types["text"] >= 30 and modality_types["vision"] >= 20
    assert modality_types["waveform"] >= 5 and modality_types["seq2seq"] >= 5


def test_each_architecture_is_measured_at_two_or_more_input_sizes() -> None:
    for name in ("tf-bert-l4h256", "tf-resnet-w50d34", "tf-wav2vec2-l2h128", "tf-t5-l2h128"):
        first, second = zoo.sample_spec(name, 0), zoo.sample_spec(name, 1)
        assert first.inputs != second.inputs
        assert first.family == second.family == name
        assert zoo.ModelSpec.from_dict(first.to_dict()) == first  # round trip
    assert all(len(options) >= 2 for options in SIZES.values())


def test_source_families_group_an_architecture_s_sizes() -> None:
    assert source_family("tf-bert-l4h256") == source_family("tf-bert-l12h768") == "tf:bert"
    assert source_family("tf-roberta-l4h256") == "tf:roberta"
    assert source_family("resnet") == "resnet"  # zoo families are their own source
    assert len({source_family(n) for n in zoo.CORPUS}) == len(MODEL_TYPES)


def test_corpus_order_covers_every_model_type_before_a_second_size_rung() -> None:
    order = parse_families("corpus")
    assert sorted(order) == sorted(zoo.CORPUS)
    first = order[:len(MODEL_TYPES)]
    assert {CATALOG[n].model_type for n in first} == set(MODEL_TYPES)
    assert parse_families("vgg,corpus")[0] == "vgg"


def test_an_unknown_architecture_is_a_one_line_error() -> None:
    with pytest.raises(ModelLoadError, match="unknown model family"):
        zoo.sample_spec("tf-no-such-thing", 0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tf-distilbert-l2h128", "tf-llama-l2h128", "tf-t5-l2h128",
                                  "tf-convnext-w25d34", "tf-hubert-l2h128",
                                  "tf-whisper-l2h128"])
def test_each_modality_lowers_to_a_kernel_graph(name: str) -> None:
    from gnnperf.features import extract_graph
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.lowering.pipeline import lower

    spec = zoo.sample_spec(name, 0)
    mod = import_to_relax(load_onnx(zoo.export_onnx(spec)))
    graph = extract_graph(lower(mod, {"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2}))
    assert sum(n.kind == "tir" for n in graph.nodes) >= 5
    assert graph.total_flops > 0


def test_held_out_architecture_folds_hold_out_whole_model_types() -> None:
    from torch_geometric.data import Data

    from gnnperf.data.splits import architecture_fold, split_indices

    families = ["tf-bert-l2h128", "tf-bert-l12h768", "hf-bert-base", "tf-gpt2-l4h256",
                "hf-gpt2", "tf-resnet-w25d34", "tf-t5-l2h128", "tf-whisper-l2h128",
                "resnet", "vgg", "bert"] * 3
    rows = [Data(model_id=f"m{i}", family=f, hw_id="cpu/x86-64-v3/2t", group=f"g{i}",
                 v2=True, build="default") for i, f in enumerate(families)]
    assert architecture_fold("resnet", 5) is None  # generated families always train
    assert architecture_fold("hf-bert-base", 5) == architecture_fold("tf-bert-l2h128", 5)
    seen_test: set[str] = set()
    for k in range(5):
        if not any(architecture_fold(f, 5) == k for f in families):
            continue
        train, val, test = split_indices(rows, "leave-architecture-out", holdout=f"{k}/5")
        held = {source_family(families[i]) for i in test}
        trained = {source_family(families[i]) for i in train + val}
        assert held and not held & trained  # no size of a held-out type trains
        assert {"resnet", "vgg", "bert"} <= trained
        seen_test |= held
    # every real model type is tested in exactly one fold
    assert seen_test == {source_family(f) for f in families if architecture_fold(f, 5) is not None}
    with pytest.raises(Exception, match="fold"):
        split_indices(rows, "leave-architecture-out", holdout="7/5")
