"""The kernel dataset: schedules drawn, timed alone on real inputs, stored as MetaSchedule's."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from gnnperf import zoo
from gnnperf.hardware import HardwareSpec
from gnnperf.kernel_dataset import (
    collect_kernels,
    export_database,
    kernel_records,
    kernel_stats,
)
from gnnperf.measure import MeasureSettings
from gnnperf.shards import iter_lines

TINY = MeasureSettings(kernel_repeat=3, kernel_min_repeat_ms=1, quiet_timeout_s=5,
                       kernel_slow_retries=0, slow_wait_s=1.0)
HW = [("x86-64-v3", 1)]


@pytest.fixture(scope="module")
def kernel_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kernels")
    summary = collect_kernels(root, [zoo.tiny_spec("mixer")], HW, schedules=3,
                              settings=TINY, progress=False)
    assert summary.failed == 0, summary.line()
    assert summary.done > 0 and summary.measurements > summary.done
    return root


def test_each_workload_gets_its_unscheduled_kernel_and_distinct_schedules(
        kernel_root: Path) -> None:
    by_workload: dict[str, list[dict]] = defaultdict(list)
    for rec in kernel_records(kernel_root):
        by_workload[rec["workload_id"]].append(rec)
    cpu = HardwareSpec.local("x86-64-v3", 1, measure=False).cpu_id
    for recs in by_workload.values():
        kinds = Counter(r["schedule"] for r in recs)
        assert kinds["unscheduled"] <= 1 and 1 <= kinds["sampled"] <= 3
        # every seed drew a schedule; two seeds that drew one program share a record
        seeds = sorted(s for r in recs for s in r["seeds"])
        assert seeds == [0, 1, 2]
        assert len({r["key"] for r in recs}) == len(recs)
        for r in recs:
            assert r["hw_id"] == f"{cpu}/x86-64-v3/1t"
            assert r["latency"]["median_ms"] > 0 and len(r["latency"]["samples_ms"]) == 3
            # measurement v2: the machine's state beside every timing
            assert set(r["reference"]) == {"gemm", "stream", "chain"}
            assert 0 <= r["other_load"] and r["attempts"] >= 1
    done = list(iter_lines(kernel_root / "kernels", kinds=("kernel_done",)))
    assert {d["key"].split("|")[0] for d in done} == set(by_workload)
    # every kernel of the model is mapped to its workload, and each workload is timed
    # unless the model never runs it as a kernel (a reshape the VM does as a builtin)
    (model,) = iter_lines(kernel_root / "kernels", kinds=("kernel_model",))
    skipped = {o["workload_id"]: o["stage"]
               for o in iter_lines(kernel_root / "kernels", kinds=("kernel_failure",))}
    assert set(skipped.values()) <= {"not-executed"}
    assert set(model["kernels"].values()) == set(by_workload) | set(skipped)
    assert not set(by_workload) & set(skipped)


def test_records_are_metaschedule_tuning_records_that_replay(kernel_root: Path) -> None:
    """The stored trace, applied to the stored workload, gives the very program timed."""
    import tvm_ffi
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    workloads = {o["workload_id"]: Workload.from_json(o["ms_workload"])
                 for o in iter_lines(kernel_root / "kernels", kinds=("kernel_workload",))}
    for rec in kernel_records(kernel_root):
        tuning = TuningRecord.from_json(rec["ms_record"], workloads[rec["workload_id"]])
        assert [float(s.value) * 1e3 for s in tuning.run_secs] == pytest.approx(
            rec["latency"]["samples_ms"], rel=1e-4)
        sch = tuning.as_measure_candidate().sch
        replayed = int(tvm_ffi.structural_hash(sch.mod["main"])) & 0xFFFFFFFFFFFF
        assert f"{replayed:012x}" == rec["key"].rsplit("|", 1)[-1]


def test_the_collector_resumes_and_reports_the_dataset_size(kernel_root: Path) -> None:
    stats = kernel_stats(kernel_root)
    records = list(kernel_records(kernel_root))
    assert stats["kernel_measurements"] == len(records)
    assert stats["kernel_workloads"] == len({r["workload_id"] for r in records})
    assert 1 <= stats["schedules_per_workload_median"] <= 3
    assert stats["kernel_cpus"] == 1 and stats["kernel_failures"] == 0
    assert stats["kernel_workloads_not_executed"] == len(
        list(iter_lines(kernel_root / "kernels", kinds=("kernel_failure",))))
    again = collect_kernels(kernel_root, [zoo.tiny_spec("mixer")], HW, schedules=3,
                            settings=TINY, progress=False)
    assert again.done == 0 and again.measurements == 0
    assert again.skipped == stats["kernel_workloads"] + stats["kernel_workloads_not_executed"]
    assert kernel_stats(kernel_root)["kernel_measurements"] == len(records)


def test_the_export_is_a_database_metaschedule_applies(kernel_root: Path,
                                                       tmp_path: Path) -> None:
    import tvm
    import tvm_ffi
    from tvm.s_tir.meta_schedule.database import JSONDatabase, Workload

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    records = [r for r in kernel_records(kernel_root) if r["schedule"] == "sampled"]
    out = export_database(kernel_root, records[0]["hw_id"], tmp_path / "db")
    db = JSONDatabase(work_dir=str(out))
    assert len(db.get_all_tuning_records()) == len(records)
    workloads = {o["workload_id"]: Workload.from_json(o["ms_workload"])
                 for o in iter_lines(kernel_root / "kernels", kinds=("kernel_workload",))}
    for wid, workload in workloads.items():
        # MetaSchedule ranks a workload's records by their mean run time
        best = min((r for r in records if r["workload_id"] == wid),
                   key=lambda r: sum(r["latency"]["samples_ms"]) / 3)
        mod = db.query_ir_module(workload.mod, hw.target(), "main")
        assert mod is not None
        got = int(tvm_ffi.structural_hash(mod["main"])) & 0xFFFFFFFFFFFF
        assert f"{got:012x}" == best["key"].rsplit("|", 1)[-1]
        assert isinstance(mod, tvm.IRModule)
