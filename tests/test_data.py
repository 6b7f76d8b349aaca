"""LatencyDataset, splits, feature scaling and dataset statistics on a small real collection."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import HASTY
from torch_geometric.data import Data, InMemoryDataset

from gnnperf.data import (
    FeatureScaler,
    LatencyDataset,
    calibration_mask,
    dataset_stats,
    feature_names,
    split_group,
    split_indices,
)
from gnnperf.errors import DatasetError
from gnnperf.store.shards import ShardWriter


def test_items_carry_features_labels_and_ids(small_root: Path) -> None:
    ds = LatencyDataset(small_root)
    stats = dataset_stats(small_root)
    assert len(ds) == stats["records"] > 0
    d = ds[0]
    assert d.x.shape[1] == len(feature_names())
    assert d.edge_index.shape[0] == 2 and d.edge_attr.shape[1] == 1
    assert d.y.shape == (1,) and math.isfinite(float(d.y))
    assert d.y_kernel.shape == (d.num_nodes,) and bool(d.kernel_mask.all())
    assert d.family in ("squeezenet", "mixer") and d.build == "sampled:0"
    # hardware features are on every node and differ between thread counts
    threads = {int(g.threads) for g in ds}
    assert threads == {1, 2}
    hw_cols = [i for i, n in enumerate(feature_names()) if n == "hw_threads"]
    assert {float(g.x[0, hw_cols[0]]) for g in ds} == {1.0, 2.0}
    # the build kind is a one-hot on every node of kernel and operator graphs alike
    cols = [i for i, n in enumerate(feature_names()) if n.startswith("build_")]
    sampled = feature_names().index("build_sampled")
    for graphs in (ds, LatencyDataset(small_root, graph="onnx")):
        g = graphs[0]
        assert torch.equal(g.x[:, cols].sum(1), torch.ones(g.num_nodes))
        assert bool((g.x[:, sampled] == 1).all())


def test_noise_remeasurements_leave_the_fingerprint_alone(small_root: Path,
                                                          tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(small_root / "shards", root / "shards")
    before = LatencyDataset(root).fingerprint
    ShardWriter(root / "noise", "noise").append({"kind": "remeasure", "key": "x"})
    assert LatencyDataset(root).fingerprint == before


def test_processed_cache_follows_the_shards(small_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(small_root / "shards", root / "shards")
    first = LatencyDataset(root)
    ShardWriter(root / "shards", "extra").append({"kind": "failure", "key": "x"})
    second = LatencyDataset(root)
    assert first.fingerprint != second.fingerprint
    assert len(first) == len(second)


def test_splits_keep_models_together_and_val_off_test(small_root: Path) -> None:
    ds = LatencyDataset(small_root)
    train, val, test = split_indices(ds, "random", seed=0, val_frac=0.25, test_frac=0.25)
    models = [ds[i].model_id for i in range(len(ds))]
    for a, b in [(train, val), (train, test), (val, test)]:
        assert not {models[i] for i in a} & {models[i] for i in b}
    assert sorted(train + val + test) == list(range(len(ds)))
    tr, va, te = split_indices(ds, "leave-family-out", holdout="mixer", val_frac=0.25)
    assert {ds[i].family for i in te} == {"mixer"}
    assert "mixer" not in {ds[i].family for i in tr + va}
    from gnnperf.hardware.spec import HardwareSpec

    # records' hardware ids name the CPU signature that measured them
    held = f"{HardwareSpec.local(measure=False).cpu_id}/x86-64-v3/2t"
    assert held in {ds[i].hw_id for i in range(len(ds))}
    tr, va, te = split_indices(ds, "leave-hw-out", holdout=held, val_frac=0.25)
    assert {ds[i].hw_id for i in te} == {held}
    assert held not in {ds[i].hw_id for i in tr + va}
    with pytest.raises(DatasetError):
        split_indices(ds, "leave-family-out", holdout="nope")
    with pytest.raises(DatasetError):
        split_indices(ds, "real-architectures")  # no hf-* models in this small set


def test_seeds_with_the_same_graph_never_straddle_a_split() -> None:
    """Two hf-* seeds drawing one shape differ only in weights: same group, same set."""
    base = {"model_id": "hf-gpt2-000000", "onnx_sha256": "aaa", "onnx_graph_id": "g1"}
    twin = {"model_id": "hf-gpt2-000001", "onnx_sha256": "bbb", "onnx_graph_id": "g1"}
    assert split_group(base) == split_group(twin) == "g1"
    assert split_group({"model_id": "m", "onnx_sha256": "s"}) == "s"  # older records
    rows = []
    for m in range(40):
        graph = f"g{m // 2}"  # every graph measured from two seeds
        for hw in ("a", "b"):
            rows.append(Data(model_id=f"m{m}", family="f", hw_id=hw,
                             group=split_group({"model_id": f"m{m}", "onnx_sha256": f"s{m}",
                                                "onnx_graph_id": graph})))
    for seed in range(5):
        sets = split_indices(rows, "random", seed=seed, val_frac=0.2, test_frac=0.2)
        owner: dict[str, int] = {}
        for k, part in enumerate(sets):
            for i in part:
                assert owner.setdefault(str(rows[i].group), k) == k


def test_validation_takes_a_real_architecture_whole_and_generated_models_apart() -> None:
    """Intervals are calibrated on validation: for a real architecture it holds whole
    source families (every size of a model type), as users bring architectures that no
    training saw; a generated model is its own unit."""
    from gnnperf.zoo.corpus.spec import CATALOG, source_family

    types: dict[str, list[str]] = {}
    for family in CATALOG:
        types.setdefault(source_family(family), []).append(family)
    real = [fams for fams in types.values() if len(fams) >= 2][:30]
    rows = []
    for fams in real:
        for family in fams[:2]:
            for size in (0, 1):  # two input sizes: two operator graphs
                rows.append(Data(model_id=f"{family}-{size}", family=family, hw_id="a",
                                 group=f"{family}/{size}", v2=True, build="default"))
    for m in range(30):
        rows.append(Data(model_id=f"vgg-{m}", family="vgg", hw_id="a", group=f"vgg/{m}",
                         v2=True, build="default"))
    for seed in range(3):
        train, val, test = split_indices(rows, "random", seed=seed, val_frac=0.2,
                                         test_frac=0.1)
        val_types = {source_family(str(rows[i].family)) for i in val
                     if rows[i].family != "vgg"}
        assert val_types and any(rows[i].family == "vgg" for i in val)
        # a validated model type has no record in training (another size, another config)
        assert not val_types & {source_family(str(rows[i].family)) for i in train}
        vgg_val = [i for i in val if rows[i].family == "vgg"]
        assert 0 < len(vgg_val) < 30  # generated models: drawn one by one, not the family


def test_stats_count_a_graph_drawn_by_two_seeds_once() -> None:
    from gnnperf.data.stats import distinct_by_build

    def record(model: str, graph: str, hw: str, build: str = "best-of:16") -> dict[str, str]:
        return {"model_id": model, "onnx_sha256": model, "onnx_graph_id": graph,
                "hw_id": hw, "build": build}
    records = [record("hf-gpt2-000000", "g1", "cpu/1t"), record("hf-gpt2-000003", "g1", "cpu/1t"),
               record("hf-gpt2-000003", "g1", "cpu/2t"), record("vgg-000000", "g2", "cpu/1t"),
               record("vgg-000000", "g2", "cpu/1t", "default")]
    graphs, distinct = distinct_by_build(records)
    assert graphs == {"best-of:16": 2, "default": 1}
    assert distinct == {"best-of:16": 3, "default": 1}  # the twin's cpu/1t record repeats


def test_corpus_stats_count_architectures_imported_and_failed() -> None:
    """Issue 45 reports the corpus's records, architectures and import success rate; an
    architecture that failed at one size but was measured at another counts as imported,
    and one only skipped by the default budget, or failing only when measured, counts as
    neither."""
    from gnnperf.data.stats import corpus_stats

    def record(family: str, graph: str, build: str) -> dict[str, Any]:
        return {"model": {"family": family}, "model_id": f"{family}-000000",
                "onnx_graph_id": graph, "build": build}

    def failure(family: str, stage: str, reason: str) -> dict[str, Any]:
        return {"model": {"family": family}, "stage": stage, "reason": reason}

    records = [record("tf-bert-l2h128", "g1", "default"), record("tf-bert-l2h128", "g1",
                                                                 "sampled:0"),
               record("tf-vit-l2h128", "g2", "default"), record("vgg", "g3", "default")]
    failures = [failure("tf-vit-l2h128", "compile", "took too long"),
                failure("tf-canine-l2h128", "import", "ShapeFoldingError: x"),
                failure("tf-canine-l2h128", "compile", "later"),
                failure("tf-big-l4h256", "budget", "over the default budget"),
                failure("tf-esm-l2h128", "measure", "timed out")]  # imported and compiled
    stats = corpus_stats(records, failures)
    assert stats["corpus_records"] == 3 and stats["corpus_graphs"] == 2
    assert stats["corpus_records_by_build"] == {"default": 2, "sampled:0": 1}
    assert stats["corpus_architectures"] == 2 and stats["corpus_model_types"] == 2
    assert stats["corpus_failed_architectures"] == {
        "tf-canine-l2h128": "import: ShapeFoldingError: x"}
    assert stats["corpus_failures_by_stage"] == {"import": 1}
    assert stats["corpus_import_success_rate"] == pytest.approx(66.7)


def _mixed_rows() -> list[Data]:
    """40 models on a v2 CPU (even models) and a legacy one (all): pre-v2 labels abound."""
    rows = []
    for m in range(40):
        for hw, v2 in (("new", m % 2 == 0), ("old", False)):
            rows.append(Data(model_id=f"m{m}", family=f"f{m % 4}", hw_id=hw, group=f"g{m}",
                             v2=v2))
    return rows


@pytest.mark.parametrize(("kind", "holdout"), [("random", None), ("leave-family-out", "f0"),
                                               ("leave-hw-out", "new")])
def test_pre_v2_records_are_never_tested_on_and_never_leak(kind: str, holdout: str | None
                                                           ) -> None:
    rows = _mixed_rows()
    for seed in range(5):
        train, val, test = split_indices(rows, kind, seed=seed, holdout=holdout,
                                         val_frac=0.2, test_frac=0.2)
        assert test and all(rows[i].v2 for i in test)
        assert any(not rows[i].v2 for i in train)  # still trained on
        seen = {rows[i].group for i in train + val}
        if kind == "leave-hw-out":  # the held-out hardware, legacy records included
            assert not {rows[i].hw_id for i in train + val} & {holdout}
        else:  # a tested model's legacy records are in no set at all
            assert not seen & {rows[i].group for i in test}
            left_out = set(range(len(rows))) - set(train + val + test)
            assert left_out and all(not rows[i].v2 for i in left_out)
            assert {rows[i].group for i in left_out} <= {rows[i].group for i in test}
    # a legacy-only hardware id has nothing to test on, unless asked for
    with pytest.raises(DatasetError, match="v2"):
        split_indices(rows, "leave-hw-out", holdout="old")
    _, _, test = split_indices(rows, "leave-hw-out", holdout="old", legacy_in_test=True)
    assert {rows[i].hw_id for i in test} == {"old"}


def test_intervals_are_calibrated_on_the_validation_records_of_the_tested_kind() -> None:
    rows = _mixed_rows()
    _, val, _ = split_indices(rows, "random", seed=0, val_frac=0.2, test_frac=0.2)
    val_rows = [rows[i] for i in val]
    mask = calibration_mask(val_rows)
    assert mask.any() and not mask.all()
    assert all(bool(d.v2) == bool(m) for d, m in zip(val_rows, mask, strict=True))
    assert calibration_mask(val_rows, legacy_in_test=True).all()
    # a dataset without v2 labels calibrates on what it has rather than on nothing
    legacy = [Data(v2=False) for _ in range(3)]
    assert calibration_mask(legacy).all()


class _RowsDataset(InMemoryDataset):
    """Rows collated the way :class:`LatencyDataset` stores them (the split reads its store)."""

    def __init__(self, rows: list[Data]) -> None:
        super().__init__(None)
        self._data, self.slices = self.collate(rows)


@pytest.mark.parametrize("in_memory", [False, True])
def test_validation_holds_v2_and_rare_build_records_like_the_test_set(in_memory: bool
                                                                      ) -> None:
    """200 legacy models, 80 v2 ones, 40 of them also tuned: drawn from all groups alike,
    a 10% validation slice would hold no v2 or no tuned group now and then; drawn per
    stratum it holds about 10% of each."""
    rows = []
    for m in range(280):
        v2 = m >= 200
        builds = ["default", "sampled:0"] + (["best-of:16"] if m >= 240 else [])
        rows += [Data(model_id=f"m{m}", family="f", hw_id="h", group=f"g{m}", v2=v2, build=b)
                 for b in builds]
    data = _RowsDataset(rows) if in_memory else rows
    for seed in range(10):
        train, val, test = split_indices(data, "random", seed=seed, val_frac=0.1,
                                         test_frac=0.15)
        val_groups = {rows[i].group for i in val}
        tuned = {rows[i].group for i in val if rows[i].build == "best-of:16"}
        legacy = {rows[i].group for i in val if not rows[i].v2}
        assert 2 <= len(tuned) <= 5  # ~10% of the ~34 tuned groups left after the test split
        assert 2 <= len(val_groups - tuned - legacy) <= 5  # v2 groups without tuned records
        assert len(legacy) == 20  # exactly 10% of the 200 legacy groups
        assert not val_groups & {rows[i].group for i in train + test}
        assert any(rows[i].build == "best-of:16" for i in train)


def test_small_strata_keep_their_groups_for_training() -> None:
    """Two tuned groups among many: 10% of two is no whole group, so neither is taken."""
    rows = [Data(model_id=f"m{m}", family="f", hw_id="h", group=f"g{m}", v2=True,
                 build="best-of:16" if m < 2 else "default") for m in range(40)]
    for seed in range(20):
        _, val, _ = split_indices(rows, "random", seed=seed, val_frac=0.1, test_frac=0.1)
        assert len(val) == 4  # 10% of the 36 groups left after the test split, rounded
        assert not any(rows[i].build == "best-of:16" for i in val)


def test_leave_cpu_out_holds_out_every_hardware_id_of_that_cpu() -> None:
    """Both thread counts (and ISAs) of the held-out CPU leave training; its models stay."""
    rows = []
    for m in range(30):
        for hw, v2 in (("zen4/x86-64-v3/1t", True), ("zen4/x86-64-v3/2t", True),
                       ("xeon/x86-64-v2/2t", False), ("zen4-like/x86-64-v3/2t", False)):
            rows.append(Data(model_id=f"m{m}", family="f", hw_id=hw, group=f"g{m}", v2=v2))
    train, val, test = split_indices(rows, "leave-cpu-out", holdout="zen4", val_frac=0.2)
    assert {rows[i].hw_id for i in test} == {"zen4/x86-64-v3/1t", "zen4/x86-64-v3/2t"}
    # the machine part must match exactly: a CPU whose id merely starts alike is trained on
    assert {rows[i].hw_id for i in train + val} == {"xeon/x86-64-v2/2t",
                                                    "zen4-like/x86-64-v3/2t"}
    assert {rows[i].group for i in train} & {rows[i].group for i in test}  # models may
    with pytest.raises(DatasetError, match="needs a held-out CPU"):
        split_indices(rows, "leave-cpu-out")


def test_v2_records_carry_their_machine_state_as_hardware_features(small_root: Path) -> None:
    from gnnperf.data import record_hardware
    from gnnperf.store.shards import latest_records

    ds = LatencyDataset(small_root)
    assert all(bool(d.v2) for d in ds)
    names = feature_names()
    gemm, missing = names.index("hw_log2_ref_gemm_ms"), names.index("hw_ref_missing")
    records = {r["key"]: r for r in latest_records(small_root / "shards")}
    for d in ds:
        rec = records[d.key]
        assert float(d.x[0, missing]) == 0.0
        # the reference kernels timed beside this very label, not a per-machine constant
        expected = math.log2(rec["reference"]["gemm"]["median_ms"])
        assert float(d.x[0, gemm]) == pytest.approx(expected, rel=1e-5)
        assert record_hardware(rec).reference_ms["gemm"] == rec["reference"]["gemm"][
            "median_ms"]
    legacy = {**rec, "reference": None}
    assert record_hardware(legacy).reference_ms is None


def test_scaler_is_fitted_on_given_graphs_only(small_root: Path) -> None:
    ds = LatencyDataset(small_root)
    train = [ds[i] for i in range(len(ds)) if ds[i].family == "squeezenet"]
    scaler = FeatureScaler.fit(train)
    x = torch.cat([scaler(g).x for g in train])
    assert torch.allclose(x.mean(0), torch.zeros(x.shape[1]), atol=1e-3)
    again = FeatureScaler.from_state_dict(scaler.state_dict())
    assert torch.equal(again(train[0]).x, scaler(train[0]).x)


def test_stats_and_noise_floor(small_root: Path, tmp_path: Path) -> None:
    stats = dataset_stats(small_root)
    assert stats["families"] == 2 and stats["hw_configs"] == 2 and stats["builds"] == 1
    assert stats["records_with_kernel_labels"] == stats["records"]
    assert stats["noise_floor_mape"] is None
    assert 0 < stats["latency_ms_min"] <= stats["latency_ms_max"]
    root = tmp_path / "noisy"
    shutil.copytree(small_root / "shards", root / "shards")
    from gnnperf.cli import main

    assert main(["dataset", "remeasure", "--root", str(root), "--count", "3", *HASTY,
                 "--min-age-minutes", "0"]) == 0
    stats = dataset_stats(root)
    assert stats["noise_floor_records"] == 3
    assert stats["noise_floor_mape"] is not None and stats["noise_floor_mape"] >= 0
    assert stats["noise_floor_by_build_threads"]
    from gnnperf.hardware.spec import HardwareSpec

    # floors and counts per CPU signature, whose id is also the machine part of the hw ids
    cpu = HardwareSpec.local(measure=False).cpu_id
    floor = stats["noise_floor_by_cpu"][cpu]
    assert floor["pairs"] == 3 and floor["mape"] == pytest.approx(stats["noise_floor_mape"])
    # both sides were measured under v2: the reference-normalised floor exists too
    assert floor["pairs_normalised"] == 3 and floor["mape_normalised"] >= 0
    assert stats["per_cpu"] == {cpu: stats["records"]}
    assert list(stats["cpu_signatures"]) == [cpu]
    assert stats["noise_floor_by_host"] == {cpu: pytest.approx(stats["noise_floor_mape"])}
    # both measurements ran under the speed probe, so they define the current floor
    assert stats["noise_floor_protocol"] == "speed-probe"
    assert stats["records_probed"] == stats["records"]


def test_missing_dataset_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError):
        LatencyDataset(tmp_path)
    with pytest.raises(DatasetError):
        dataset_stats(tmp_path)


def test_onnx_operator_graphs_line_up_with_kernel_records(small_root: Path) -> None:
    kernel = LatencyDataset(small_root)
    onnx_ds = LatencyDataset(small_root, graph="onnx")
    assert len(onnx_ds) == len(kernel)
    for a, b in zip(kernel, onnx_ds, strict=True):
        assert a.key == b.key and torch.equal(a.y, b.y)
        assert not bool(b.kernel_mask.any())
        assert b.x.shape[1] == a.x.shape[1]
    # unfused: at least as many operators as fused kernels somewhere
    assert any(b.num_nodes > a.num_nodes for a, b in zip(kernel, onnx_ds, strict=True))
    with pytest.raises(DatasetError):
        LatencyDataset(small_root, graph="relay")


def test_processed_cache_is_pruned_and_rebuilt_when_unreadable(small_root: Path,
                                                              tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(small_root / "shards", root / "shards")
    first = LatencyDataset(root)
    stale = Path(first.processed_paths[0])
    ShardWriter(root / "shards", "extra").append({"kind": "failure", "key": "x"})
    second = LatencyDataset(root)
    current = Path(second.processed_paths[0])
    assert not stale.exists() and current.exists()  # the old cache was pruned
    current.write_bytes(b"not a torch file")
    third = LatencyDataset(root)  # a corrupt cache is rebuilt, not an opaque error
    assert len(third) == len(second)
    assert [p.name for p in current.parent.glob("data-*.pt")] == [current.name]


def _same_items(a: LatencyDataset, b: LatencyDataset) -> None:
    assert [d.key for d in a] == [d.key for d in b]
    for x, y in zip(a, b, strict=True):
        assert x.hw_id == y.hw_id and x.group == y.group and x.digest == y.digest
        for attr in ("x", "x_kernel", "x_candidates", "edge_index", "edge_attr", "y",
                     "y_kernel", "kernel_mask", "node_serial", "candidates_serial"):
            assert torch.equal(getattr(x, attr), getattr(y, attr)), (x.key, attr)


def test_packs_spare_a_fresh_clone_the_encoding_and_give_the_same_items(
        small_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gnnperf.data.dataset as dataset_module
    from gnnperf.cli import main
    from gnnperf.data.pack import pack
    from gnnperf.store.shards import latest_records

    root = tmp_path / "here"
    shutil.copytree(small_root / "shards", root / "shards")
    source = LatencyDataset(root)
    summary = pack(source)
    assert summary.records == len(source) and summary.path is not None
    assert all(distinct <= rows for rows, distinct in summary.rows.values())
    assert pack(LatencyDataset(root)).path is None  # nothing new: no second file
    # a fresh clone: shards and packs, nothing processed; nothing may be encoded there
    clone = tmp_path / "clone"
    shutil.copytree(root / "shards", clone / "shards")
    shutil.copytree(root / "packs", clone / "packs")
    encoded: list[str] = []
    real = dataset_module.record_to_data

    def counting(record, *args, **kwargs):  # type: ignore[no-untyped-def]
        encoded.append(record["key"])
        return real(record, *args, **kwargs)

    monkeypatch.setattr(dataset_module, "record_to_data", counting)
    _same_items(source, LatencyDataset(clone))
    assert encoded == []

    # a new one-thread record of the same CPU moves the one-thread medians that every
    # two-thread record's serial kernels read: only it is encoded, and every item is the
    # one a full encoding gives
    one_thread = next(r for r in latest_records(clone / "shards") if r["hw"]["threads"] == 1)
    extra = {k: v for k, v in one_thread.items() if k not in ("crc", "schema")}
    extra["key"] = extra["key"] + "-again"
    extra["hw"] = {**extra["hw"], "peak_gflops": extra["hw"]["peak_gflops"] * 3}
    extra["reference"] = {k: {**v, "median_ms": v["median_ms"] / 3}
                          for k, v in extra["reference"].items()}
    with ShardWriter(clone / "shards", "extra") as w:
        w.append(extra)
    full = tmp_path / "full"
    shutil.copytree(clone / "shards", full / "shards")
    _same_items(LatencyDataset(full), LatencyDataset(clone))
    assert encoded[-1] == extra["key"] and encoded.count(extra["key"]) == 2
    assert len(encoded) == (len(source) + 1) + 1  # the full folder encodes them all
    # the pack of the one new item only: earlier packs stay as they are
    before = {p: p.read_bytes() for p in (clone / "packs").iterdir()}
    assert main(["dataset", "pack", "--root", str(clone)]) == 0
    assert {p: p.read_bytes() for p in before} == before
    assert len(list((clone / "packs").iterdir())) == len(before) + 1
    # a file that is not a pack: named in a warning, its records encoded, and replaced
    # by the next pack (it must not stop training, nor the packing that mends it)
    (clone / "packs" / "pack-0009.pack").write_bytes(b"not a pack")
    encoded.clear()
    with pytest.warns(UserWarning, match="pack-0009.pack is not a readable dataset pack"):
        _same_items(LatencyDataset(full), LatencyDataset(clone, force_reload=True))
    assert encoded == []  # the readable packs hold every record
    with pytest.warns(UserWarning, match="pack-0009.pack"):
        assert main(["dataset", "pack", "--root", str(clone)]) == 0
    assert not (clone / "packs" / "pack-0009.pack").exists()


# -- one convention for dataset folders -----------------------------------------------------


def test_dataset_folder_spellings(tmp_path: Path) -> None:
    from gnnperf.store.folder import DatasetFolder

    fresh = DatasetFolder.resolve(tmp_path / "new")
    assert fresh.root == tmp_path / "new" and fresh.shards == tmp_path / "new" / "shards"
    assert fresh.noise == tmp_path / "new" / "noise" and not fresh.has_shards()
    ShardWriter(tmp_path / "std" / "shards", "s").append({"kind": "failure", "key": "k"})
    for spelling in (tmp_path / "std", tmp_path / "std" / "shards"):
        folder = DatasetFolder.resolve(spelling)
        assert (folder.root, folder.shards) == (tmp_path / "std", tmp_path / "std" / "shards")
        assert folder.has_shards()
    ShardWriter(tmp_path / "flat", "s").append({"kind": "failure", "key": "k"})
    flat = DatasetFolder.resolve(tmp_path / "flat")
    assert flat.root == flat.shards == tmp_path / "flat"
    assert flat.noise == tmp_path / "flat" / "noise"


def test_every_command_reads_the_folder_collect_wrote(
        small_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``small_root`` was written by ``gnnperf collect --out DIR`` (conftest): stats, train
    and the dataset read that same DIR; the benchmark does too (test_bench)."""
    from gnnperf.cli import main

    assert (small_root / "shards").is_dir()
    records = dataset_stats(small_root)["records"]
    assert records > 0 and len(LatencyDataset(small_root)) == records
    assert main(["dataset", "stats", "--root", str(small_root)]) == 0
    assert capsys.readouterr().out.startswith(f"{records} records")
    assert main(["train", "--root", str(small_root), "--epochs", "2", "--patience", "2",
                 "--ensemble", "1", "--hidden", "16", "--layers", "1",
                 "--out", str(tmp_path / "ckpt")]) == 0
    assert (tmp_path / "ckpt" / "gnnperf.pt").is_file()
    assert "training capped" not in capsys.readouterr().out
    # a whole-run budget that reading the dataset already spent: training gets its floor
    assert main(["train", "--root", str(small_root), "--epochs", "2", "--patience", "2",
                 "--ensemble", "1", "--hidden", "16", "--layers", "1", "--total-minutes",
                 "0.5", "--out", str(tmp_path / "capped")]) == 0
    from gnnperf.estimators.gnn.config import TrainConfig
    from gnnperf.hardware.spec import HardwareSpec

    default_cap = TrainConfig().max_minutes
    assert f"training capped at 1.0 min (not {default_cap:g})" in capsys.readouterr().out
    saved = json.loads((tmp_path / "capped" / "metrics.json").read_text())
    assert saved["train_config"]["max_minutes"] == 1.0
    assert saved["total_minutes"] == 0.5 and saved["dataset_read_minutes"] >= 0
    assert main(["train", "--root", str(small_root), "--total-minutes", "0", "--epochs", "1",
                 "--out", str(tmp_path / "never")]) == 2
    assert not (tmp_path / "never").exists()
    # the CPUs it trained on, by signature id: predict treats any other as unseen
    payload = torch.load(tmp_path / "ckpt" / "gnnperf.pt", weights_only=False)
    assert payload["hosts"] == [HardwareSpec.local(measure=False).cpu_id]


def test_training_gets_what_reading_the_dataset_left_of_the_run_budget() -> None:
    from gnnperf.estimators.gnn.config import FINISH_MINUTES, MIN_TRAINING_MINUTES, training_minutes

    assert training_minutes(16.0, 19.0, 0.1) == 16.0  # processed already: the full cap
    assert training_minutes(16.0, 19.0, 5.0) == pytest.approx(14.0 - FINISH_MINUTES)
    assert training_minutes(16.0, 19.0, 30.0) == MIN_TRAINING_MINUTES
    assert training_minutes(0.5, 19.0, 30.0) == 0.5  # never above the cap asked for


def test_older_spellings_of_a_dataset_folder_read_the_same(small_root: Path,
                                                          tmp_path: Path) -> None:
    flat = tmp_path / "flat"  # what `collect --out DIR` wrote before the convention
    flat.mkdir()
    for shard in (small_root / "shards").glob("*.jsonl.gz"):
        shutil.copy(shard, flat / shard.name)
    shards_dir = small_root / "shards"  # `--out datasets/shards`, the old README's call
    expected = dataset_stats(small_root)
    for spelling in (flat, shards_dir):
        stats = dataset_stats(spelling)
        assert (stats["records"], stats["per_hw"]) == (expected["records"], expected["per_hw"])
    assert LatencyDataset(flat).fingerprint == LatencyDataset(small_root).fingerprint
    assert len(LatencyDataset(shards_dir)) == expected["records"]
