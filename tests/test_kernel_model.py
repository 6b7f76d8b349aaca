"""The kernel cost model: schedule features from traces, the table, losses, training."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnperf.cli import main
from gnnperf.collect.kernels import kernel_records
from gnnperf.errors import CheckpointError
from gnnperf.estimators.kernel import (
    KernelCostModel,
    KernelModelConfig,
    KernelTable,
    KernelTrainConfig,
    evaluate,
    fit_tuned_offset,
    group_split,
    load_kernel_model,
    load_kernel_table,
    rank_loss,
    ranking_metrics,
    save_kernel_model,
    train_kernel_model,
)
from gnnperf.estimators.kernel.boosted import booster_to_bytes, fit_booster
from gnnperf.features.schedule import schedule_feature_vector
from gnnperf.features.schema import SCHEDULE as SCHEDULE_FEATURE_NAMES
from gnnperf.store.shards import iter_lines, shard_paths

HW_ARGS = dict(simd_width=8, threads=2, l1d_kb=32, l2_kb=1024)


def _features(trace: list | None, parallel_extent: float = 1.0) -> dict[str, float]:
    vec = schedule_feature_vector(trace, parallel_extent=parallel_extent, **HW_ARGS)
    assert len(vec) == len(SCHEDULE_FEATURE_NAMES)
    return dict(zip(SCHEDULE_FEATURE_NAMES, vec, strict=True))


def test_schedule_features_read_the_decisions_and_meet_the_hardware() -> None:
    insts = [
        ["GetSBlock", [], ["C", "main"], ["b0"]],
        ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
        ["SamplePerfectTile", ["l1"], [4, 64], ["v4", "v5", "v6", "v7"]],
        ["SamplePerfectTile", ["l2"], [4, 64], ["v8", "v9", "v10", "v11"]],
        ["SamplePerfectTile", ["l3"], [2, 64], ["v12", "v13"]],
        ["Annotate", ["b0", 32], ["meta_schedule.parallel"], []],
        ["Annotate", ["b0", 64], ["meta_schedule.vectorize"], []],
        ["SampleCategorical", [], [[0, 16, 64, 512], [0.25] * 4], ["v14"]],
        ["SampleComputeLocation", ["b0"], [], ["l15"]],
        ["ComputeInline", ["b0"], [], []],
        ["Annotate", ["l1", 64], ["pragma_auto_unroll_max_step"], []],
    ]
    decisions = [[2, [2, 4, 2, 1]], [3, [1, 8, 2, 4]], [4, [16, 4]], [7, 2], [8, -2]]
    f = _features([insts, decisions], parallel_extent=3)
    assert f["sched_unscheduled"] == 0
    assert f["sched_n_spatial_tiles"] == 2 and f["sched_n_reduction_tiles"] == 1
    assert f["sched_log2_spatial_level0"] == pytest.approx(1.0)  # 2 * 1
    assert f["sched_log2_spatial_level1"] == pytest.approx(5.0)  # 4 * 8
    assert f["sched_log2_reduction_level0"] == pytest.approx(4.0)
    # the innermost spatial factor 4 fills half of an 8-lane vector
    assert f["sched_log2_inner_spatial"] == pytest.approx(2.0)
    assert f["sched_inner_vector_aligned"] == 0 and f["sched_inner_tail_fraction"] == 0.5
    # output tile of levels 2.. : (2*1)*(2*4) floats = 64 B, against 32 KiB of L1
    assert f["sched_log2_output_tile_over_l1"] == pytest.approx(np.log2(64 / 32768))
    assert f["sched_log2_unroll_max_step"] == pytest.approx(np.log2(65))
    assert f["sched_log2_parallel_annotation"] == 5 and f["sched_log2_vectorize_annotation"] == 6
    assert f["sched_compute_inlined"] == 1 and f["sched_compute_at_root"] == 0
    assert f["sched_n_ComputeInline"] == 1
    # 3 parallel iterations on 2 threads: the second round keeps one thread idle
    assert f["sched_parallel_idle_fraction"] == pytest.approx(0.25)
    assert f["sched_parallel_below_threads"] == 0
    assert _features([insts, decisions], parallel_extent=1)["sched_parallel_below_threads"] == 1


def test_an_unscheduled_kernel_has_only_its_flag() -> None:
    for empty in (None, [[], []]):
        f = _features(empty)
        assert f["sched_unscheduled"] == 1
        assert sum(f.values()) == 1


@pytest.fixture(scope="module")
def table(kernel_root: Path) -> KernelTable:
    return load_kernel_table(kernel_root, progress=False)


def test_the_table_has_a_row_per_measured_schedule(kernel_root: Path,
                                                   table: KernelTable) -> None:
    records = list(kernel_records(kernel_root))
    assert len(table) == len(records)
    assert table.x.shape == (len(records), len(table.feature_names))
    assert np.isfinite(table.x).all()
    col = table.feature_names.index("sched_unscheduled")
    assert (table.x[:, col] == table.unscheduled).all()
    assert table.unscheduled.sum() == len(np.unique(table.group))  # one per (workload, hw)
    by_key = {r["key"]: r for r in records}
    assert sorted(np.exp(table.log_ms)) == pytest.approx(
        sorted(r["latency"]["median_ms"] for r in by_key.values()))
    # sampled schedules of one workload differ in what they decided
    sched = [i for i, n in enumerate(table.feature_names) if n.startswith("sched_")]
    for g in np.unique(table.group):
        rows = (table.group == g) & ~table.unscheduled
        if rows.sum() > 1:
            assert len({tuple(r) for r in table.x[rows][:, sched]}) > 1


def test_the_table_is_cached_per_shard_until_a_shard_changes(kernel_root: Path, tmp_path: Path,
                                                             table: KernelTable) -> None:
    cached = sorted((kernel_root / "processed" / "kernel_rows").glob("*/*.npz"))
    shards = shard_paths(kernel_root / "kernels")
    assert [c.name.split(".jsonl")[0] for c in cached] == [
        s.name.split(".jsonl")[0] for s in shards]
    again = load_kernel_table(kernel_root, progress=False)
    assert np.array_equal(again.x, table.x) and again.feature_names == table.feature_names
    # a grown copy (a second shard) computes the new shard's rows only
    copy = tmp_path / "copy"
    shutil.copytree(kernel_root, copy)
    shutil.copy(shards[0], copy / "kernels" / "kernels-zz-9999.jsonl.gz")
    stamps = {p: p.stat().st_mtime_ns for p in (copy / "processed").rglob("*.npz")}
    grown = load_kernel_table(copy, progress=False)
    assert np.array_equal(grown.x, np.concatenate([table.x, table.x]))
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    assert len(list((copy / "processed" / "kernel_rows").glob("*/*.npz"))) == 2


def test_a_fully_cached_table_is_read_without_parsing_a_shard(
        kernel_root: Path, table: KernelTable, monkeypatch: pytest.MonkeyPatch) -> None:
    from gnnperf.estimators.kernel import dataset

    def parse(*_: object) -> None:
        raise AssertionError("every shard's rows are cached: nothing should be parsed")

    monkeypatch.setattr(dataset, "_read_shards", parse)
    again = load_kernel_table(kernel_root, progress=False)
    assert np.array_equal(again.x, table.x) and np.array_equal(again.group, table.group)


def test_stored_analyses_are_used_only_while_replaying_a_sample_agrees(
        kernel_root: Path, table: KernelTable, monkeypatch: pytest.MonkeyPatch) -> None:
    from gnnperf.estimators.kernel import dataset as kernel_table_module

    workloads = {o["workload_id"]: o["ms_workload"]
                 for o in iter_lines(kernel_root / "kernels", kinds=("kernel_workload",))}
    records = list(kernel_records(kernel_root))
    assert all(r.get("features") for r in records)
    replayed = []
    real = kernel_table_module._replayed_statics
    monkeypatch.setattr(kernel_table_module, "_replayed_statics",
                        lambda rec, w: replayed.append(rec["key"]) or real(rec, w))
    rows = kernel_table_module._shard_rows(records, workloads, {})
    assert np.allclose(rows["x"], table.x)
    # the shard's first record and 1 in VERIFY_EVERY by key are replayed, no more
    sample = kernel_table_module._check_sample(records)
    assert records[0]["key"] in sample and len(sample) < len(records)
    assert sorted(replayed) == sorted(sample)
    # an analysis that no longer agrees with today's code: every program is replayed
    records[0]["features"]["flops"] *= 2
    replayed.clear()
    rows = kernel_table_module._shard_rows(records, workloads, {})
    assert np.allclose(rows["x"], table.x)
    assert len(replayed) == len(records) + 1  # the check stops at the first disagreeing


def test_a_tuned_kernel_is_the_best_of_its_candidates_plus_the_offset() -> None:
    model = KernelCostModel(KernelModelConfig(in_dim=3, hidden=8, embed_dim=4, layers=2))
    model.eval()
    model.tuned_offset.fill_(0.25)
    x = torch.randn(3, 3)
    cands = torch.randn(5, 3)
    owner = torch.tensor([0, 0, 0, 2, 2])  # kernel 1 is tuned but has no candidate
    tuned = torch.tensor([True, True, False])
    with torch.no_grad():
        emb, got = model.node_outputs(x, tuned, cands, owner)
        assert torch.equal(emb, model.embed(x))
        each = model(cands)
        _, plain = model.node_outputs(x, tuned)
        head = float(model.tuned_head(emb[1:2]).squeeze())
        own = float(model(x[2:3]).squeeze())
    assert got[0] == pytest.approx(float(each[:3].min()) + 0.25)
    assert got[1] == pytest.approx(head) and got[1] == plain[1]
    assert got[2] == pytest.approx(own)  # not tuned: its own row


def test_trees_predict_every_schedule_time_and_travel_in_every_state_dict(
        tmp_path: Path) -> None:
    """With a booster, schedule and candidate times are the trees' (the MLP keeps the
    embedding and the tuned head); the trees survive the kernel checkpoint and the GNN's
    state dict; a state dict from before boosters loads as a model without one."""
    from gnnperf.estimators.kernel.boosted import booster_from_bytes, booster_log_ms

    table = _synthetic_table(n_groups=16, per_group=5)
    cfg = KernelTrainConfig(hidden=16, embed_dim=8, layers=2, epochs=3, patience=3,
                            val_frac=0.25, test_frac=0.25, booster_rounds=50)
    result = train_kernel_model(table, cfg, progress=False)
    model = result.model.eval()
    assert model.has_booster
    model.keep_head_for(None)  # the trees for every row (the choice is tested below)
    x = torch.from_numpy(table.x)
    trees = booster_from_bytes(model.booster_raw.numpy().tobytes())
    expected = booster_log_ms(trees, table.x)
    tuned = torch.zeros(len(x), dtype=torch.bool)
    tuned[0] = True
    owner = torch.zeros(3, dtype=torch.long)
    with torch.no_grad():
        assert np.allclose(model.schedule_log_ms(x).numpy(), expected)
        assert not np.allclose(model(x).numpy(), expected)  # not the time head's
        _, got = model.node_outputs(x, tuned, x[5:8], owner)
    assert np.allclose(got[1:].numpy(), expected[1:])
    assert float(got[0]) == pytest.approx(float(expected[5:8].min() + model.tuned_offset))
    # a batch that repeats rows (a model's layers, advise's builds), whose distinct rows
    # the trees predict once, gives every row what the trees give it alone
    order = np.random.default_rng(1).integers(0, len(table.x), size=3 * len(table.x))
    repeated = table.x[order]
    alone = np.asarray(trees.inplace_predict(repeated), dtype=np.float32)
    assert np.array_equal(booster_log_ms(trees, repeated), alone)
    assert np.array_equal(booster_log_ms(trees, repeated[:1]), alone[:1])
    val = result.metrics["val"]
    assert val["time_head"]["schedules"]["mape"] != val["schedules"]["mape"]
    # the kernel checkpoint
    path = save_kernel_model(result, cfg, table, tmp_path / "k.pt")
    loaded, _ = load_kernel_model(path)
    with torch.no_grad():
        assert torch.equal(loaded.schedule_log_ms(x), model.schedule_log_ms(x))
    # the state dict of a model that holds it, and one from before boosters
    state = model.state_dict()
    fresh, twin = KernelCostModel(model.cfg).eval(), KernelCostModel(model.cfg).eval()
    fresh.load_state_dict(state)
    twin.load_state_dict(state)
    assert torch.equal(fresh.booster_raw, model.booster_raw)
    # an ensemble's members share one copy of the bytes, so its checkpoint holds one
    assert fresh.booster_raw.data_ptr() == twin.booster_raw.data_ptr()
    old_state = {k: v for k, v in model.state_dict().items() if k != "booster_raw"}
    fresh.load_state_dict(old_state)
    assert not fresh.has_booster
    with torch.no_grad():
        assert torch.equal(fresh.schedule_log_ms(x), model(x))
    # the time head alone, when asked for
    plain = train_kernel_model(table, KernelTrainConfig(**{**cfg.__dict__, "booster": False}),
                               progress=False, scored=("val",))
    assert not plain.model.has_booster and "time_head" not in plain.metrics["val"]


def test_unscheduled_kernels_keep_the_time_head_where_it_predicts_them_better(
        tmp_path: Path) -> None:
    """Beside trees, the rows of unscheduled kernels take the time head's time when it errs
    less on them on validation workloads; the choice survives a checkpoint, and a state
    dict from before it loads as trees for every row."""
    from gnnperf.estimators.kernel.training import UNSCHEDULED_COLUMN, choose_head_rows

    table = _synthetic_table(n_groups=16, per_group=5)
    column = table.feature_names.index(UNSCHEDULED_COLUMN)
    cfg = KernelTrainConfig(hidden=16, embed_dim=8, layers=2, epochs=3, patience=3,
                            val_frac=0.25, test_frac=0.25, booster_rounds=50)
    result = train_kernel_model(table, cfg, progress=False)
    model = result.model.eval()
    val = result.indices["val"]
    choice = result.metrics["unscheduled_choice"]
    assert choice["rows"] == int(table.unscheduled[val].sum())
    assert choice["predicted_by"] == ("time_head" if choice["time_head_mape"]
                                      < choice["trees_mape"] else "trees")
    assert set(result.metrics["val"]["by_kind"]) == {"unscheduled", "scheduled"}
    # trees fitted 5 (log ms) off the truth: the network wins the unscheduled rows ...
    all_rows = np.arange(len(table))
    bad = fit_booster(table.x, table.log_ms + 5.0, all_rows, all_rows, 0, max_rounds=30)
    model.set_booster(booster_to_bytes(bad))
    assert choose_head_rows(model, table, val, np.ones(4, np.float32))["predicted_by"] \
        == "time_head"
    assert model.head_rows == column
    x = torch.from_numpy(table.x)
    with torch.no_grad():
        got, head = model.schedule_log_ms(x), model(x)
    mine = torch.from_numpy(table.unscheduled)
    assert torch.allclose(got[mine], head[mine])
    assert bool((got[~mine] > head[~mine] + 2.0).all())  # the bad trees elsewhere
    # ... and a choice a state dict carries; one saved before it means trees everywhere
    fresh = KernelCostModel(model.cfg).eval()
    fresh.load_state_dict(model.state_dict())
    assert fresh.head_rows == column
    fresh.load_state_dict({k: v for k, v in model.state_dict().items()
                           if k != "head_rows_column"})
    assert fresh.head_rows is None
    path = save_kernel_model(result, cfg, table, tmp_path / "k.pt")
    assert load_kernel_model(path)[0].head_rows == column
    # without the flag column (an ablation drops it) there is nothing to choose, and an
    # earlier choice does not survive
    assert choose_head_rows(model, table, val, np.asarray([1, 1, 0, 1], np.float32)) == {}
    assert model.head_rows is None
    # good trees against an untrained network: the trees keep every row, and a choice
    # made before is undone
    good = fit_booster(table.x, table.log_ms, all_rows, all_rows, 0, max_rounds=50)
    untrained = KernelCostModel(model.cfg).eval()
    untrained.set_booster(booster_to_bytes(good))
    untrained.keep_head_for(column)
    assert choose_head_rows(untrained, table, val, np.ones(4, np.float32))["predicted_by"] \
        == "trees"
    assert untrained.head_rows is None


def test_the_tuned_offset_is_fitted_on_validation_and_scored(table: KernelTable) -> None:
    result = train_kernel_model(table, KernelTrainConfig(epochs=3, patience=3, seed=0,
                                                         val_frac=0.3, test_frac=0.3),
                                progress=False)
    keep = np.ones(table.x.shape[1], dtype=np.float32)
    offset = float(result.model.tuned_offset)
    assert offset == pytest.approx(fit_tuned_offset(result.model, table,
                                                    result.indices["val"], keep), abs=1e-5)
    assert offset != 0.0
    val = result.metrics["val"]
    assert val["tuned_from_candidates"]["n"] == val["tuned"]["n"]


def test_tree_settings_can_be_overridden_and_the_shipped_ones_stay_otherwise() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3)).astype(np.float32)
    y = (x[:, 0] * x[:, 1] + np.sin(3 * x[:, 2])).astype(np.float32)
    train, val = np.arange(150), np.arange(150, 200)
    shipped = fit_booster(x, y, train, val, 0, max_rounds=40)
    again = fit_booster(x, y, train, val, 0, max_rounds=40, overrides={})
    stumps = fit_booster(x, y, train, val, 0, max_rounds=40, overrides={"max_depth": 1})
    assert np.array_equal(shipped.inplace_predict(x), again.inplace_predict(x))
    # stumps cannot fit the product term: they err more on their own training rows
    fit_error = {name: float(np.mean((b.inplace_predict(x[train]) - y[train]) ** 2))
                 for name, b in (("shipped", shipped), ("stumps", stumps))}
    assert fit_error["stumps"] > 1.5 * fit_error["shipped"]


def test_group_split_keeps_groups_whole() -> None:
    groups = np.repeat([f"w{i}" for i in range(20)], 3)
    train, val, test = group_split(groups, (0.2, 0.2), seed=1)
    assert len(train) + len(val) + len(test) == len(groups)
    sides = [set(groups[s]) for s in (train, val, test)]
    assert not (sides[0] & sides[1] or sides[0] & sides[2] or sides[1] & sides[2])
    assert len(sides[1]) == len(sides[2]) == 4


def test_rank_loss_rewards_the_right_order_within_a_group_only() -> None:
    true = torch.tensor([0.0, 1.0, 0.0, 1.0])
    group = torch.tensor([0, 0, 1, 1])
    right = rank_loss(torch.tensor([0.0, 1.0, 0.0, 1.0]), true, group)
    wrong = rank_loss(torch.tensor([1.0, 0.0, 1.0, 0.0]), true, group)
    assert right < wrong
    # the order across groups does not count
    across = rank_loss(torch.tensor([5.0, 6.0, -5.0, -4.0]), true, group)
    assert across == pytest.approx(float(right))
    # ties within the noise margin are not ranked
    assert float(rank_loss(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.01]),
                           torch.tensor([0, 0]))) == 0.0


def test_rank_loss_is_the_mean_over_every_ranked_pair_of_a_group() -> None:
    """Checked against the definition, pair by pair (the loss builds each group's pairs,
    not a batch's N x N matrix)."""
    gen = torch.Generator().manual_seed(0)
    group = torch.randint(0, 6, (60,), generator=gen)
    true, pred = torch.randn(60, generator=gen), torch.randn(60, generator=gen)
    terms = [torch.nn.functional.softplus(pred[i] - pred[j])
             for i in range(60) for j in range(60)
             if group[i] == group[j] and true[j] - true[i] > 0.05]
    assert float(rank_loss(pred, true, group)) == pytest.approx(float(torch.stack(terms).mean()),
                                                                rel=1e-6)


def test_ranking_metrics() -> None:
    true = np.log(np.array([1.0, 2.0, 4.0, 1.0, 3.0, 2.0]))
    groups = np.array(["a"] * 3 + ["b"] * 3)
    perfect = ranking_metrics(true, true, groups)
    assert perfect["group_spearman"] == pytest.approx(1.0) and perfect["top1_regret_pct"] == 0
    # group b predicts its 2-ms schedule fastest: 100% slower than the best
    pred = np.log(np.array([1.0, 2.0, 4.0, 3.0, 9.0, 1.0]))
    assert ranking_metrics(pred, true, groups)["top1_regret_pct"] == pytest.approx(50.0)


def _synthetic_table(n_groups: int = 40, per_group: int = 8, seed: int = 0) -> KernelTable:
    """Times that follow a known law of a size feature and a schedule feature."""
    rng = np.random.default_rng(seed)
    size = np.repeat(rng.uniform(0, 6, n_groups), per_group)
    tile = rng.uniform(0, 3, n_groups * per_group)
    unscheduled = np.tile(np.arange(per_group) == 0, n_groups)
    tile[unscheduled] = 0.0
    log_ms = 0.8 * size - 0.5 * tile + 0.3 * np.sin(2 * tile)
    x = np.stack([size, tile, unscheduled.astype(float), rng.normal(size=len(size))], 1)
    return KernelTable(
        x=x.astype(np.float32), log_ms=log_ms,
        workload=np.repeat([f"w{i}" for i in range(n_groups)], per_group),
        hw_id=np.asarray(["cpu/x86-64-v3/2t"] * len(size)), unscheduled=unscheduled,
        feature_names=["size", "sched_tile", "sched_unscheduled", "noise"])


def test_training_learns_times_rankings_and_the_best_schedule() -> None:
    table = _synthetic_table()
    cfg = KernelTrainConfig(hidden=64, embed_dim=16, layers=2, epochs=150, patience=40,
                            groups_per_batch=8, dropout=0.0, val_frac=0.2, test_frac=0.2,
                            booster=False)
    result = train_kernel_model(table, cfg, progress=False)
    test = result.metrics["test"]
    assert set(result.metrics) >= {"train", "val", "test"}
    assert test["schedules"]["mape"] < 25
    assert test["group_spearman"] > 0.8 and test["top1_regret_pct"] < 10
    assert test["tuned"]["mape"] < 30
    # without the schedule's own features nothing tells siblings apart
    blind = train_kernel_model(table, KernelTrainConfig(
        **{**cfg.__dict__, "drop_prefixes": ("sched_tile",)}), progress=False,
        scored=("test",))
    assert "train" not in blind.metrics and "val" not in blind.metrics
    assert blind.metrics["test"]["group_spearman"] < test["group_spearman"] - 0.3
    assert blind.metrics["test"]["schedules"]["mape"] > 2 * test["schedules"]["mape"]
    # trees fitted after the same network leave it as it was and rank the schedules too;
    # on 24 training workloads of a smooth law their steps are coarser than the network
    # (the kernel dataset has thousands of workloads, where they err less)
    trees = train_kernel_model(table, KernelTrainConfig(**{**cfg.__dict__, "booster": True}),
                               progress=False, scored=("test",)).metrics["test"]
    assert trees["time_head"]["schedules"] == test["schedules"]
    assert trees["schedules"] != test["schedules"]
    assert trees["schedules"]["mape"] < 40
    assert trees["group_spearman"] > 0.8 and trees["top1_regret_pct"] < 10


def test_the_checkpoint_round_trips(table: KernelTable, tmp_path: Path) -> None:
    cfg = KernelTrainConfig(hidden=32, embed_dim=8, layers=2, epochs=3, patience=3,
                            val_frac=0.25, test_frac=0.25)
    result = train_kernel_model(table, cfg, progress=False)
    path = save_kernel_model(result, cfg, table, tmp_path / "k.pt")
    model, payload = load_kernel_model(path)
    assert payload["feature_names"] == table.feature_names
    x = torch.from_numpy(table.x)
    with torch.no_grad():
        assert torch.allclose(model(x), result.model(x))
        assert model.embed(x).shape == (len(table), cfg.embed_dim)
    assert evaluate(model, table, result.indices["test"]) == result.metrics["test"]
    with pytest.raises(CheckpointError, match="not found"):
        load_kernel_model(tmp_path / "none.pt")
    torch.save({"kind": "other"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a gnnperf kernel model"):
        load_kernel_model(tmp_path / "other.pt")


def test_a_column_constant_in_training_cannot_saturate_a_prediction(tmp_path: Path) -> None:
    """A kernel with a feature no training row had (an operator class the kernel dataset
    never measured) is scaled like any other input, not millions of deviations away."""
    table = _synthetic_table(n_groups=12, per_group=4)
    table.x[:, 3] = 0.0  # the "noise" column is constant in training
    cfg = KernelTrainConfig(hidden=16, embed_dim=8, layers=2, epochs=2, patience=2,
                            val_frac=0.25, test_frac=0.25)
    result = train_kernel_model(table, cfg, progress=False)
    model = result.model.eval()
    assert float(model.std[3]) == 1.0
    x = torch.from_numpy(table.x[:4].copy())
    unusual = x.clone()
    unusual[:, 3] = 1.0
    with torch.no_grad():
        shift = (model(unusual) - model(x)).abs().max()
        assert shift < 3.0  # log ms: under a factor of 20
        # inputs are clipped, and a checkpoint written before clipping loads without it
        far, edge = x.clone(), x.clone()  # 30 and 10 deviations above the mean
        far[:, 0] = model.mean[0] + 30 * model.std[0]
        edge[:, 0] = model.mean[0] + 10 * model.std[0]
        assert torch.allclose(model.embed(far), model.embed(edge), atol=1e-5)
    path = save_kernel_model(result, cfg, table, tmp_path / "k.pt")
    payload = torch.load(path, weights_only=False)
    payload["format"] = 2
    payload["model_config"].pop("clip_inputs")
    torch.save(payload, tmp_path / "old.pt")
    old, _ = load_kernel_model(tmp_path / "old.pt")
    assert load_kernel_model(path)[0].cfg.clip_inputs and not old.cfg.clip_inputs
    with torch.no_grad():
        assert not torch.allclose(old.embed(far), old.embed(edge), atol=1e-3)


def test_the_cli_trains_and_reports(kernel_root: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "k.pt"
    assert main(["train-kernels", "--root", str(kernel_root), "--out", str(out),
                 "--epochs", "2", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out.split("kernel model:")[0])
    assert {"train", "val", "best_epoch", "workloads"} <= set(figures) and out.exists()
    assert main(["train-kernels", "--root", str(tmp_path / "none")]) == 2
    assert "no kernel dataset" in capsys.readouterr().err


def test_a_sampled_build_keeps_the_traces_the_kernel_dataset_measured(kernel_root: Path
                                                                      ) -> None:
    """Node ``k`` of a ``sampled:s`` graph carries the trace of seed ``s``'s schedule, the
    one the kernel dataset timed for its workload: the kernel model reads the same row."""
    from gnnperf import zoo
    from gnnperf.collect.kernels.workloads import workload_id
    from gnnperf.estimators.kernel import kernel_input_vector
    from gnnperf.features import extract_graph
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.pipeline import lower_onnx

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    lowered = lower_onnx(zoo.export_onnx(zoo.tiny_spec("mixer")), hw, "sampled:1")
    graph = extract_graph(lowered)
    by_seed = {(r["workload_id"], s): r for r in kernel_records(kernel_root)
               for s in r["seeds"]}
    checked = 0
    for node in graph.nodes:
        if node.kind != "tir" or node.schedule_fallback:
            assert node.schedule_trace is None
            continue
        assert node.schedule_trace == lowered.traces[node.name]
        rec = by_seed.get((workload_id(lowered.unscheduled[node.name]), 1))
        if rec is None:
            continue  # a kernel the model never runs as a call of its own
        ms_record = rec["ms_record"]
        ms_record = json.loads(ms_record) if isinstance(ms_record, str) else ms_record
        assert (kernel_input_vector(node, node.schedule_trace, hw)
                == kernel_input_vector(node, ms_record[0], hw))
        checked += 1
    assert checked >= 3
    # the default build schedules nothing: its kernels are the kernel dataset's unscheduled
    default = extract_graph(lower_onnx(zoo.export_onnx(zoo.tiny_spec("mixer")), hw, "default"))
    assert all(n.schedule_trace is None for n in default.nodes)


def test_the_gnn_reads_a_frozen_kernel_model(small_root: Path, tmp_path: Path) -> None:
    """Nodes get the kernel model's embedding and time; the readout its masked sum; its
    weights do not move while the GNN trains, and a checkpoint carries them."""
    from torch_geometric.data import Batch

    from gnnperf.data import LatencyDataset
    from gnnperf.estimators.gnn.checkpoint import Checkpoint
    from gnnperf.estimators.gnn.network import (
        EnsembleGNN,
        LatencyGNN,
        ModelConfig,
        attach_kernel_outputs,
    )
    from gnnperf.estimators.gnn.training import TrainConfig, resolve_kernel_model
    from gnnperf.estimators.kernel import KernelCostModel, KernelModelConfig, kernel_feature_names

    ds = LatencyDataset(small_root)
    batch = Batch.from_data_list([ds[0], ds[1]])
    assert batch.x_kernel.shape == (batch.num_nodes, len(kernel_feature_names()))
    kcfg = KernelModelConfig(in_dim=len(kernel_feature_names()), hidden=16, embed_dim=8,
                             layers=2)
    gnn = LatencyGNN(ModelConfig(in_dim=ds[0].x.shape[1], hw_dim=16, hidden=16, layers=1,
                                 kernel_model=kcfg.to_dict()))
    assert isinstance(gnn.kernel_model, KernelCostModel)
    frozen = {k: v.clone() for k, v in gnn.kernel_model.state_dict().items()}
    opt = torch.optim.AdamW(gnn.parameters(), lr=1e-2)
    gnn.train()
    assert not gnn.kernel_model.training
    for _ in range(3):
        loss = (gnn(batch).mu - batch.y.view(-1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(torch.equal(v, gnn.kernel_model.state_dict()[k]) for k, v in frozen.items())
    # what the kernel model says reaches the output
    gnn.eval()
    with torch.no_grad():
        before = gnn(batch).mu.clone()
        gnn.kernel_model.time_head[1].bias += 1.0
        assert not torch.allclose(gnn(batch).mu, before)
        # its outputs stored on the graphs, as training does, predict the same
        graphs = [ds[0].clone(), ds[1].clone()]
        attach_kernel_outputs(gnn.kernel_model, graphs)
        stored = Batch.from_data_list(graphs)
        assert stored.kernel_emb.shape == (batch.num_nodes, kcfg.embed_dim)
        assert torch.allclose(gnn(stored).mu, gnn(batch).mu, atol=1e-5)
        # trees, where the kernel model has them, give the node times; the GNN's state
        # dict carries them
        rng = np.random.default_rng(0)
        rows = rng.normal(size=(40, kcfg.in_dim)).astype(np.float32)
        trees = fit_booster(rows, rng.normal(size=40) + 3.0, np.arange(30),
                            np.arange(30, 40), 0, max_rounds=20)
        plain = gnn(batch).mu.clone()
        gnn.kernel_model.set_booster(booster_to_bytes(trees))
        boosted = gnn(batch).mu.clone()
        assert not torch.allclose(boosted, plain)
        copy = LatencyGNN(gnn.config).eval()
        copy.load_state_dict(gnn.state_dict())
        assert copy.kernel_model is not None and copy.kernel_model.has_booster
        assert torch.allclose(copy(batch).mu, boosted, atol=1e-5)
        # an ensemble's checkpoint stores its members' one kernel model (trees and all)
        # once, and predicts with the trees after loading
        pair = EnsembleGNN(gnn.config, [gnn, copy]).eval()
        sizes = {}
        for name, ensemble in (("one", EnsembleGNN(gnn.config, [gnn])), ("two", pair)):
            fields = dict(model_config=gnn.config.to_dict(), train_config={},
                          state_dict=ensemble.state_dict(), scaler={}, sigma_scale=1.0,
                          interval_coverage=0.9, feature_names=[], dataset_fingerprint="",
                          hw_ranges={}, gflop_ranges={}, builds=[], isas=[], hosts=None)
            sizes[name] = Checkpoint(**fields).save(tmp_path / f"{name}.pt").stat().st_size
        nbytes = {"own": 0, "kernel": 0}
        for k, v in gnn.state_dict().items():
            nbytes["kernel" if k.startswith("kernel_model.") else "own"] += \
                v.numel() * v.element_size()
        assert sizes["two"] - sizes["one"] < nbytes["own"] + nbytes["kernel"] / 2
        saved = torch.load(tmp_path / "two.pt", weights_only=False)["state_dict"]
        assert saved["members.1.kernel_model.booster_raw"].data_ptr() == \
            saved["members.0.kernel_model.booster_raw"].data_ptr()
        loaded = EnsembleGNN(gnn.config, [LatencyGNN(gnn.config), LatencyGNN(gnn.config)])
        loaded.load_state_dict(saved)
        assert torch.allclose(loaded.eval()(batch).mu, boosted, atol=1e-5)
    # builtins are left out of the kernel model's sum
    values = torch.tensor([0.0, 5.0, 0.0])
    lse = LatencyGNN.log_sum_exp(values, torch.tensor([0, 0, 0]), 1,
                                 torch.tensor([True, False, True]))
    assert float(lse) == pytest.approx(np.log(2.0), abs=1e-6)
    # a kernel model that reads other features is refused with a one-line error
    other = KernelTable(x=np.zeros((1, 2), np.float32), log_ms=np.zeros(1),
                        workload=np.asarray(["w"]), hw_id=np.asarray(["h"]),
                        unscheduled=np.asarray([True]), feature_names=["a", "b"])
    cfg = KernelTrainConfig(hidden=8, embed_dim=4, layers=2, epochs=1, patience=1)
    from gnnperf.estimators.kernel import KernelTrainResult

    fake = KernelTrainResult(KernelCostModel(KernelModelConfig(2, 8, 4, 2)), {}, {})
    save_kernel_model(fake, cfg, other, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="retrain it"):
        resolve_kernel_model(TrainConfig(kernel_model=str(tmp_path / "other.pt")))
    assert resolve_kernel_model(TrainConfig(kernel_model="none")) is None
    assert resolve_kernel_model(TrainConfig(use_hw=False)) is None


def test_a_residual_kernel_head_starts_from_the_kernel_models_time(small_root: Path) -> None:
    """With ``kernel_residual``, a TIR kernel's predicted time is the kernel model's plus
    the head's correction; a builtin's is the head's own."""
    from torch_geometric.data import Batch

    from gnnperf.data import LatencyDataset
    from gnnperf.estimators.gnn.network import LatencyGNN, ModelConfig
    from gnnperf.estimators.kernel import KernelModelConfig, kernel_feature_names

    ds = LatencyDataset(small_root)
    batch = Batch.from_data_list([ds[0], ds[1]])
    kcfg = KernelModelConfig(in_dim=len(kernel_feature_names()), hidden=16, embed_dim=8,
                             layers=2)
    torch.manual_seed(0)
    gnn = LatencyGNN(ModelConfig(in_dim=ds[0].x.shape[1], hw_dim=16, hidden=16, layers=1,
                                 kernel_model=kcfg.to_dict(), kernel_residual=True)).eval()
    last = gnn.kernel_head[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(0.25)
        out = gnn(batch)
        assert gnn.kernel_model is not None
        _, time = gnn._kernel_model_outputs(batch)
    mask = batch.kernel_model_mask
    assert mask.any()
    expected = torch.where(mask, time + 0.25, torch.full_like(time, 0.25))
    assert torch.allclose(out.kernel_mu, expected, atol=1e-6)
    plain = LatencyGNN(ModelConfig(in_dim=ds[0].x.shape[1], hw_dim=16, hidden=16, layers=1,
                                   kernel_model=kcfg.to_dict()))
    # the residual head also reads whether the kernel model's time counts
    assert gnn.encoder[0].in_features == plain.encoder[0].in_features + 1


def test_the_kernel_model_sum_baseline_sums_tir_kernels_and_scales_per_machine(
        small_root: Path) -> None:
    from gnnperf.data import LatencyDataset
    from gnnperf.estimators.baselines import KernelModelSum
    from gnnperf.estimators.kernel import KernelCostModel, KernelModelConfig, kernel_feature_names

    ds = LatencyDataset(small_root)
    graphs = [ds[i] for i in range(len(ds))]
    torch.manual_seed(0)
    summed = KernelModelSum(KernelCostModel(KernelModelConfig(
        len(kernel_feature_names()), hidden=16, embed_dim=8, layers=2)))
    per_node = summed.kernel_ms(graphs[0])
    assert (per_node[~graphs[0].kernel_model_mask.numpy()] == 0).all()
    assert (per_node[graphs[0].kernel_model_mask.numpy()] > 0).all()
    pred = summed.fit(graphs, graphs).predict(graphs).ms
    log_gap = np.log(pred) - np.array([float(g.y) for g in graphs])
    hw = np.array([g.hw_id for g in graphs])
    for h in set(hw):  # the fitted scale centres each machine's errors
        assert np.median(log_gap[hw == h]) == pytest.approx(0.0, abs=1e-6)
