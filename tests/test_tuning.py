"""Tuning a workload with MetaSchedule's evolutionary search at a trial budget (issue 47)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gnnperf.collect.kernels.tuning import tune_workload
from gnnperf.collect.kernels.tuning_run import TuningRun
from gnnperf.errors import GnnperfError


@pytest.fixture(scope="module")
def tiny_workloads():  # noqa: ANN201
    """The workload with the most FLOPs of the tiny mixer, lowered for x86-64-v3."""
    from tvm.s_tir.analysis import estimate_tir_flops

    from gnnperf import zoo
    from gnnperf.collect.kernels import model_workloads
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.pipeline import lower

    spec = zoo.tiny_spec("mixer")
    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    lowered = lower(import_to_relax(load_onnx(zoo.export_onnx(spec))), hw.target(), "default")
    return max(model_workloads(lowered), key=lambda w: estimate_tir_flops(w.module()))


def _run(run_ms: list[float]) -> TuningRun:
    return TuningRun("w", "cpu/x86-64-v3/1t", len(run_ms), 0, None, [None] * len(run_ms),
                     run_ms, 0.0)


def test_the_tuning_curve_and_each_budgets_best_come_from_the_trial_order() -> None:
    run = _run([3.0, math.inf, 2.0, 2.5, 1.0])
    assert run.best_so_far() == [3.0, 3.0, 2.0, 2.0, 1.0]
    assert run.best_trial() == 4 and run.best_trial(5) == 4
    assert _run([math.inf, math.inf]).best_trial() is None
    # a 192-trial run (three iterations of 64) holds the 64- and 128-trial searches
    long = _run([5.0] * 10 + [4.0] + [5.0] * 100 + [3.0] + [5.0] * 79 + [1.0])
    assert long.best_trial(64) == 10 and long.best_trial(128) == 111
    assert long.best_trial() == 191 and long.best_so_far()[63] == 4.0
    # a budget inside an iteration is not a prefix of the search: refused
    with pytest.raises(GnnperfError, match="whole search iterations"):
        long.best_trial(100)


def test_a_tuning_budget_is_at_least_one_trial_on_this_machine() -> None:
    import dataclasses

    from gnnperf.hardware.spec import HardwareSpec

    here = HardwareSpec.local("x86-64-v3", 1, measure=False)
    with pytest.raises(GnnperfError, match="at least 1 trial"):
        tune_workload(None, here, 0)  # type: ignore[arg-type]
    elsewhere = dataclasses.replace(here, signature={**here.signature, "family": 99})
    with pytest.raises(GnnperfError, match="on this machine"):
        tune_workload(None, elsewhere, 2)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_two_trial_tuning_is_real_tuning_and_its_database_schedules_the_workload(
        tiny_workloads) -> None:  # noqa: ANN001
    """``tuned:2`` on a tiny model's heaviest kernel: two candidates built and timed by
    MetaSchedule, kept in trial order, and a database whose schedule replays on it."""
    import tvm_ffi

    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.schedules import _database_schedule

    workload = tiny_workloads
    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    run = tune_workload(workload, hw, 2, seed=0)
    assert run.trials == 2 and len(run.records) == len(run.run_ms) == 2
    assert run.hw_id == hw.record_hw_id and run.workload_id == workload.workload_id
    assert all(math.isfinite(ms) and ms > 0 for ms in run.run_ms)
    best = run.best_trial()
    assert best is not None and run.best_so_far()[-1] == run.run_ms[best]
    db = run.database()
    assert len(db.get_all_tuning_records()) == 2
    # the database answers the workload as a build queries it, with a real schedule
    # (loops split, parallel or vectorized), not the workload as fusion left it
    scheduled = _database_schedule(workload.func, hw.target(), db)
    assert not tvm_ffi.structural_equal(scheduled.mod["main"].body, workload.func.body)


# -- stored runs: lines, budgets, keys ------------------------------------------------------

def _stored(workload_id: str, trials: int, run_ms: list[float], minutes: float = 1.0,
            hw_id: str = "cpu/x86-64-v3/1t") -> TuningRun:
    """A run as the shards hold it; its records stand in for MetaSchedule's (not parsed)."""
    return TuningRun(workload_id, hw_id, trials, 0, None, [None] * len(run_ms), run_ms,
                     minutes)


def test_a_run_is_stored_as_one_line_and_read_back_the_same() -> None:
    from gnnperf.hardware.spec import HardwareSpec

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    run = TuningRun("w1", hw.record_hw_id, 2, 7, {"wl": 1}, [["t0"], ["t1"]],
                    [1.5, math.inf], 0.25)
    line = run.to_line(hw, "mixer-tiny", "fused_dense", {"tvm": "0.27"})
    assert line["kind"] == "kernel_tuning" and line["run_ms"] == [1.5, None]
    assert line["key"] == run.key and line["hw"]["isa"] == "x86-64-v3"
    back = TuningRun.from_line(line)
    assert back == run


def test_which_budgets_a_run_holds() -> None:
    from gnnperf.collect.kernels.tuning_run import tuning_key

    long = _stored("w", 256, [1.0] * 256)
    assert all(long.covers(b) for b in (64, 128, 256)) and not long.covers(16)
    assert not long.covers(512)
    short = _stored("w", 16, [1.0] * 16)
    assert short.covers(16) and not short.covers(64)
    # a search that ran out of candidates after 10 trials holds every larger budget
    exhausted = _stored("w", 64, [1.0] * 9 + [0.5])
    assert exhausted.covers(64) and exhausted.covers(256) and exhausted.covers(16)
    assert exhausted.best_ms(16) == exhausted.best_ms(256) == 0.5  # all of its trials
    # whole-iteration runs share a key (extended), a 16-trial search has its own
    assert tuning_key("w", "h", 64) == tuning_key("w", "h", 256) != tuning_key("w", "h", 16)
    assert long.best_ms(64) == 1.0 and _stored("w", 2, [math.inf] * 2).best_ms() == math.inf


def test_an_extension_continues_a_run_of_the_same_workload_from_whole_iterations() -> None:
    from gnnperf.collect.kernels.workloads import KernelWorkload
    from gnnperf.hardware.spec import HardwareSpec

    here = HardwareSpec.local("x86-64-v3", 1, measure=False)
    workload = KernelWorkload("w", "fused", None)  # type: ignore[arg-type]
    with pytest.raises(GnnperfError, match="is not of workload"):
        tune_workload(workload, here, 128, extend=_stored("other", 64, [1.0] * 64,
                                                          hw_id=here.record_hw_id))
    with pytest.raises(GnnperfError, match="whole search iterations"):
        tune_workload(workload, here, 128, extend=_stored("w", 16, [1.0] * 16,
                                                          hw_id=here.record_hw_id))
    with pytest.raises(GnnperfError, match="whole search iterations"):
        tune_workload(workload, here, 64, extend=_stored("w", 64, [1.0] * 64,
                                                         hw_id=here.record_hw_id))


def test_the_shards_keep_each_keys_longest_run_and_report_cost_and_gain(tmp_path) -> None:  # noqa: ANN001
    from gnnperf.collect.kernels import tuning_runs, tuning_stats
    from gnnperf.collect.kernels.database import stored_tuning
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.store.shards import ShardWriter

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    h = hw.record_hw_id
    runs = [
        _stored("a", 64, [4.0] * 63 + [2.0], minutes=1.0, hw_id=h),
        # a extended to 256 trials: supersedes its 64-trial line, halves its best time
        _stored("a", 256, [4.0] * 63 + [2.0] + [3.0] * 191 + [1.0], minutes=4.0, hw_id=h),
        _stored("a", 16, [8.0] * 16, minutes=0.5, hw_id=h),
        _stored("b", 64, [6.0] * 64, minutes=2.0, hw_id=h),
        _stored("b", 16, [6.0] * 16, minutes=0.5, hw_id=h),
    ]
    writer = ShardWriter(tmp_path / "kernels", "tuning-test")
    for run in runs:
        writer.append(run.to_line(hw, "m", "k", {}))
    writer.append({"kind": "kernel_tuning_failure", "key": "c|x", "workload_id": "c",
                   "hw_id": h, "trials": 64, "stage": "tune", "reason": "r",
                   "created_at": 0.0})
    writer.close()
    # the kernel shards beside them are never opened: a tuning line there is not a run
    stray = ShardWriter(tmp_path / "kernels", "kernels-test")
    stray.append(_stored("z", 64, [1.0] * 64, minutes=1.0, hw_id=h).to_line(hw, "m", "k", {}))
    stray.close()
    kept, failed = stored_tuning(tmp_path / "kernels")
    assert failed == {"c|x|64"}
    assert sorted((o["workload_id"], o["trials"]) for o in kept.values()) == [
        ("a", 16), ("a", 256), ("b", 16), ("b", 64)]
    assert len(tuning_runs(tmp_path, h)) == 4 and tuning_runs(tmp_path, "elsewhere") == []
    stats = tuning_stats(tmp_path)[h]
    assert stats["workloads"] == 2
    by = stats["by_budget"]
    assert by["16"]["workloads"] == 2 and by["16"]["minutes_per_workload"] == 0.5
    # 64 trials: a's first quarter of its 256-trial run (1 min) and b's run (2 min)
    assert by["64"]["workloads"] == 2 and by["64"]["minutes_per_workload"] == 1.5
    assert by["64"]["best_over_16"] == pytest.approx((2.0 / 8.0 + 6.0 / 6.0) / 2)
    assert by["256"] == {"workloads": 1, "minutes_per_workload": 4.0, "best_over_64": 0.5}


def test_tuning_stats_are_read_from_the_summary_while_it_matches_the_shards(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``advise`` reads the summary, not every search's trace; a new run makes it stale,
    and the next reader recomputes and rewrites it."""
    from gnnperf.collect.kernels import database
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.store.shards import ShardWriter
    from gnnperf.store.tuning_summary import TUNING_SUMMARY

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    h = hw.record_hw_id
    writer = ShardWriter(tmp_path / "kernels", "tuning-test")
    writer.append(_stored("a", 64, [4.0] * 64, minutes=1.0, hw_id=h).to_line(hw, "m", "k", {}))
    reads: list[Path] = []
    monkeypatch.setattr(database, "stored_tuning", _counted(database.stored_tuning, reads))
    assert not (tmp_path / "kernels" / TUNING_SUMMARY).exists()
    first = database.tuning_stats(tmp_path)
    assert first[h]["by_budget"]["64"]["minutes_per_workload"] == 1.0 and len(reads) == 1
    assert (tmp_path / "kernels" / TUNING_SUMMARY).exists()
    assert database.tuning_stats(tmp_path) == first and len(reads) == 1  # the summary
    writer.append(_stored("b", 64, [4.0] * 64, minutes=3.0, hw_id=h).to_line(hw, "m", "k", {}))
    writer.close()
    again = database.tuning_stats(tmp_path)
    assert len(reads) == 2 and again[h]["by_budget"]["64"]["minutes_per_workload"] == 2.0
    assert database.tuning_stats(tmp_path) == again and len(reads) == 2
    # a stale summary is read once, then recomputed from the shards without a second read
    writer.append(_stored("c", 64, [4.0] * 64, minutes=5.0, hw_id=h).to_line(hw, "m", "k", {}))
    writer.close()
    summary_reads: list[Path] = []
    monkeypatch.setattr(database, "read_tuning_summary",
                        _counted(database.read_tuning_summary, summary_reads))
    third = database.tuning_stats(tmp_path)
    assert third[h]["by_budget"]["64"]["minutes_per_workload"] == 3.0
    assert len(summary_reads) == 1 and len(reads) == 3
    assert database.tuning_stats(tmp_path) == third and len(reads) == 3


def _counted(function: Callable[[Path], Any], calls: list[Path]) -> Callable[[Path], Any]:
    """``function`` of a folder, recording each folder it is called with in ``calls``."""
    def counting(folder: Path) -> Any:
        calls.append(folder)
        return function(folder)
    return counting


def test_a_collector_measures_its_budget_and_the_smaller_ones_its_runs_hold() -> None:
    from gnnperf.collect.kernels.tuning_collector import record_budgets

    assert record_budgets(64) == [64]
    assert record_budgets(256) == [64, 256]  # 16 is another search, not a prefix
    assert record_budgets(16) == [16] and record_budgets(2) == [2]


@pytest.mark.slow
def test_the_collector_tunes_each_executed_workload_once_resumes_and_extends(
        tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """``collect-tuning`` on a one-matmul model at 2 trials: each kernel its run calls is
    tuned and stored, a second pass has nothing to do, the runs make a ``tuned:2``
    database that schedules the model's kernels, and a larger budget extends the runs.
    A search iteration is 2 trials here (64 in the product), so that extending a run of
    whole iterations is cheap enough to test."""
    from conftest import KERNEL_HW, KERNEL_SETTINGS

    from gnnperf import zoo
    from gnnperf.collect.kernels import (
        collect_tuning,
        model_workloads,
        tuning_collector,
        tuning_database,
        tuning_run,
    )
    from gnnperf.collect.kernels import tuning as tuning_module
    from gnnperf.collect.kernels.database import stored_tuning
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.pipeline import lower
    from gnnperf.lowering.schedules import _database_schedule
    from gnnperf.store.shards import latest_records

    for module in (tuning_run, tuning_module, tuning_collector):  # each reads its own name
        monkeypatch.setattr(module, "TRIALS_PER_ITERATION", 2)
    spec = zoo.sample_spec("op-matmul", 11)  # a 40x40x40 matmul: a large design space
    first = collect_tuning(tmp_path, [spec], KERNEL_HW, 2, settings=KERNEL_SETTINGS,
                           progress=False)
    assert first.failed == 0 and first.done >= 1, first.line()
    # the model, its kernels tuned, measured whole as a tuned:2 build
    assert first.records.done == 1 and first.records.failed == 0, first.line()
    (rec,) = [r for r in latest_records(tmp_path / "shards") if r["build"] == "tuned:2"]
    assert rec["model_id"] == spec.model_id and rec["whole"]["median_ms"] > 0
    assert rec["tuning"]["trials_per_kernel"] == 2 and set(rec["reference"]) == {
        "gemm", "stream", "chain"}
    again = collect_tuning(tmp_path, [spec], KERNEL_HW, 2, settings=KERNEL_SETTINGS,
                           progress=False)
    assert again.done == 0 and again.skipped == 1 and again.records.done == 0, again.line()
    hw = HardwareSpec.local(*KERNEL_HW[0], measure=False)
    db, held = tuning_database(tmp_path, hw.record_hw_id, 2)
    assert len(held) == first.done
    lowered = lower(import_to_relax(load_onnx(zoo.export_onnx(spec))), hw.target(), "default")
    tuned = [w for w in model_workloads(lowered) if w.workload_id in held]
    assert tuned and all(_database_schedule(w.func, hw.target(), db) is not None
                         for w in tuned)
    # a 4-trial budget extends each 2-trial run: its trials first, then the new ones
    before = {o["workload_id"]: o for o in stored_tuning(tmp_path / "kernels")[0].values()}
    extendable = [w for w, o in before.items() if len(o["ms_records"]) == 2]
    longer = collect_tuning(tmp_path, [spec], KERNEL_HW, 4, settings=KERNEL_SETTINGS,
                            progress=False)
    assert longer.done == len(extendable) >= 1, longer.line()
    assert longer.records.done == 1  # tuned:4
    after = {o["workload_id"]: o for o in stored_tuning(tmp_path / "kernels")[0].values()}
    for wid in extendable:
        line = after[wid]
        assert line["trials"] == 4 and len(line["ms_records"]) > 2
        assert line["ms_records"][:2] == before[wid]["ms_records"]
        assert line["minutes"] > before[wid]["minutes"]
    assert tuning_database(tmp_path, hw.record_hw_id, 4)[1] == held
    # the records are estimator inputs: one graph, told apart by their budget column
    from gnnperf.data import LatencyDataset
    from gnnperf.features.schema import BUDGET_COLUMN, feature_names

    budget = feature_names().index(BUDGET_COLUMN)
    items = {str(d.build): d for d in LatencyDataset(tmp_path)}
    assert {b: float(d.x[0, budget]) for b, d in items.items()} == {"tuned:2": 1.0,
                                                                     "tuned:4": 2.0}
    assert all(bool(d.kernel_tuned.all()) for d in items.values())


def test_the_tuning_collector_visits_first_the_models_whose_records_need_fewest_tunings(
        tmp_path) -> None:  # noqa: ANN001
    """``--order cheapest-tuned``: a model whose workloads are tuned already (or never run
    as kernels) costs no search for its ``tuned:N`` record, so it comes before one with
    workloads to tune; a model with a failed tuning can have no record and comes last; a
    model with its record written and nothing to tune is dropped. Judged from the stored
    ``kernel_model`` workloads, the stored runs and failures, without lowering anything."""
    from gnnperf import zoo
    from gnnperf.collect.kernels.progress import CollectorProgress
    from gnnperf.collect.kernels.tuning_collector import TuningCollector
    from gnnperf.collect.kernels.tuning_run import tuning_key
    from gnnperf.collect.models import record_key
    from gnnperf.errors import GnnperfError
    from gnnperf.hardware.spec import HardwareSpec

    isa = "x86-64-v3"
    collector = TuningCollector(tmp_path, [(isa, 1)], 2)
    try:
        hw = collector.hw_specs[(isa, 1)] = HardwareSpec.local(isa, 1, measure=False)
        specs = {f: zoo.sample_spec(f, 0) for f in ("vgg", "mixer", "resnet", "gpt", "bert")}
        ids = {f: s.model_id for f, s in specs.items()}
        collector.progress = CollectorProgress(
            models={(ids["vgg"], isa): {"a", "b", "c"},   # b, c to tune
                    (ids["mixer"], isa): {"a"},           # tuned, record to measure
                    (ids["resnet"], isa): {"a"},          # tuned, record written
                    (ids["gpt"], isa): {"a", "d"},        # d failed: no record can be made
                    (ids["bert"], isa): {"a", "e"}},      # e is a VM builtin, never tuned
            not_executed={"e"})
        records = collector.record_collector(hw, 2)  # before the runs: an empty database
        records.done.add(record_key(ids["resnet"], hw.record_hw_id, "tuned:2"))
        tuned = TuningRun("a", hw.record_hw_id, 2, 0, None, [None, None], [1.0, 2.0], 0.0)
        collector.stored = {tuned.key: tuned}
        collector.failed = {f"{tuning_key('d', hw.record_hw_id, 2)}|2"}
        costs = collector.costs(list(specs.values()))
        assert (costs[ids["mixer"]].records, costs[ids["mixer"]].measure) == (1, 0)
        assert (costs[ids["bert"]].records, costs[ids["bert"]].measure) == (1, 0)
        assert (costs[ids["vgg"]].records, costs[ids["vgg"]].measure) == (1, 2)
        assert (costs[ids["gpt"]].records, costs[ids["gpt"]].measure) == (0, 0)
        order = collector.cheapest_tuned_first(list(specs.values()))
        # gpt has nothing it could still do (its one failure blocks the record): dropped too
        assert [s.model_id for s in order] == [ids["mixer"], ids["bert"], ids["vgg"]]
    finally:
        collector.close()
    # a 128-trial collector measures tuned:64 and tuned:128: a model is done with both only
    longer = TuningCollector(tmp_path, [(isa, 1)], 128)
    try:
        hw = longer.hw_specs[(isa, 1)] = HardwareSpec.local(isa, 1, measure=False)
        longer.progress = CollectorProgress(models={(ids["resnet"], isa): {"a"}})
        for budget in (64, 128):
            longer.record_collector(hw, budget)
        run = TuningRun("a", hw.record_hw_id, 128, 0, None, [None] * 128, [1.0] * 128, 0.0)
        longer.stored = {run.key: run}
        longer.record_collector(hw, 128).done.add(
            record_key(ids["resnet"], hw.record_hw_id, "tuned:128"))
        assert longer.costs([specs["resnet"]])[ids["resnet"]].records == 1  # tuned:64 missing
        longer.record_collector(hw, 64).done.add(
            record_key(ids["resnet"], hw.record_hw_id, "tuned:64"))
        assert longer.costs([specs["resnet"]])[ids["resnet"]].nothing_left
    finally:
        longer.close()
    with pytest.raises(GnnperfError, match="--order must be one of"):
        from gnnperf.collect.kernels import collect_tuning

        collect_tuning(tmp_path, [], [(isa, 1)], 2, order="fastest")
