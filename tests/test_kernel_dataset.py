"""The kernel dataset: schedules drawn, timed alone on real inputs, stored as MetaSchedule's."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HASTY
from conftest import KERNEL_HW as HW
from conftest import KERNEL_SETTINGS as TINY

from gnnperf import zoo
from gnnperf.collect.kernels import (
    collect_kernels,
    export_database,
    kernel_records,
    kernel_stats,
)
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.shards import iter_lines


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
            # our features of the program timed, beside MetaSchedule's record of it
            assert r["features"]["loops"] and len(r["features"]["ms_features"]) == 164
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


def test_the_collector_resumes_and_reports_the_dataset_size(
        kernel_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stats = kernel_stats(kernel_root)
    records = list(kernel_records(kernel_root))
    assert stats["kernel_measurements"] == len(records)
    assert stats["kernel_workloads"] == len({r["workload_id"] for r in records})
    assert 1 <= stats["schedules_per_workload_median"] <= 3
    assert stats["kernel_cpus"] == 1 and stats["kernel_failures"] == 0
    assert stats["kernel_workloads_not_executed"] == len(
        list(iter_lines(kernel_root / "kernels", kinds=("kernel_failure",))))
    # a finished model is skipped from its stored lines: neither exported nor lowered again
    import gnnperf.collect.kernels.collector as kernel_collector

    def not_again(*_: object, **__: object) -> None:
        raise AssertionError("a finished model was exported or lowered again")

    monkeypatch.setattr(kernel_collector.zoo, "export_onnx", not_again)
    monkeypatch.setattr(kernel_collector, "lower", not_again)
    again = collect_kernels(kernel_root, [zoo.tiny_spec("mixer")], HW, schedules=3,
                            settings=TINY, progress=False)
    assert again.done == 0 and again.measurements == 0 and again.failed == 0
    assert (again.tuned.done, again.tuned.skipped) == (0, 1)
    assert again.skipped == stats["kernel_workloads"] + stats["kernel_workloads_not_executed"]
    assert kernel_stats(kernel_root)["kernel_measurements"] == len(records)


def test_a_model_that_does_not_compile_in_time_is_recorded_and_not_compiled_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LLVM spent an hour on the sampled schedules of some audio front-ends; the collector
    records the model's compile as a failure and a restart skips the model for that ISA."""
    import gnnperf.collect.kernels.collector as kernel_collector
    from gnnperf.errors import GnnperfError

    spec = zoo.tiny_spec("mixer")
    first = collect_kernels(tmp_path, [spec], HW, schedules=2, settings=TINY, progress=False,
                            compile_timeout_s=0.001)
    assert (first.failed, dict(first.failures), first.measurements) == (
        1, {"model-compile": 1}, 0)
    (failure,) = iter_lines(tmp_path / "kernels", kinds=("kernel_model_failure",))
    assert failure["stage"] == "model-compile" and "longer than 0.001 s" in failure["reason"]
    assert not list(iter_lines(tmp_path / "kernels", kinds=("kernel_done", "kernel_failure")))
    # another ISA compiles: a run with both visits the model for that one only
    (isa, threads), = HW
    both = [*HW, ("x86-64-v2", threads)]
    second = collect_kernels(tmp_path, [spec], both, schedules=2, settings=TINY,
                             progress=False)
    assert second.failed == 0 and second.measurements > 0
    assert {r["hw_id"].split("/")[1] for r in kernel_records(tmp_path)} == {"x86-64-v2"}

    def not_again(*_: object, **__: object) -> None:
        raise AssertionError("a model with nothing left to do was exported or lowered again")

    monkeypatch.setattr(kernel_collector.zoo, "export_onnx", not_again)
    monkeypatch.setattr(kernel_collector, "lower", not_again)
    again = collect_kernels(tmp_path, [spec], both, schedules=2, settings=TINY,
                            progress=False)
    assert (again.failed, again.done, again.measurements) == (0, 0, 0)
    # each ISA's workloads count as skipped, the uncompiled one's too
    stored = [set(m["kernels"].values())
              for m in iter_lines(tmp_path / "kernels", kinds=("kernel_model",))]
    assert len(stored) == 2 and again.skipped == sum(map(len, stored))
    retry = kernel_collector.KernelCollector(tmp_path, HW, retry_failed=True)
    try:
        assert retry.finished(spec) is None  # asked to, it compiles the model again
    finally:
        retry.close()
    with pytest.raises(GnnperfError, match="--compile-timeout must be positive, got 0"):
        kernel_collector.KernelCollector(tmp_path, HW, compile_timeout_s=0)


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


def _apply_as_datasets_readme_says(db_dir: Path, kernel_root: Path) -> None:
    """datasets/README's recipe: TVM's own ``MetaScheduleApplyDatabase`` on a model fused
    by the CPU pipeline gives each measured kernel the database's top-1 schedule."""
    import tvm
    import tvm_ffi
    from tvm import relax
    from tvm.relax.backend.cpu_generic import pipeline
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    from gnnperf.collect.kernels.workloads import workload_id
    from gnnperf.frontend import import_to_relax, load_onnx

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    measured = {r["workload_id"] for r in kernel_records(kernel_root, hw.record_hw_id)
                if r["schedule"] == "sampled"}
    db = JSONDatabase(work_dir=str(db_dir))
    mod = import_to_relax(load_onnx(zoo.export_onnx(zoo.tiny_spec("mixer"))))
    target = hw.target()
    with target:
        fused = tvm.transform.Sequential(pipeline.library_dispatch_passes(target)
                                         + pipeline.legalize_passes(target))(mod)
        applied = relax.transform.MetaScheduleApplyDatabase(work_dir=str(db_dir))(fused)
        final = tvm.transform.Sequential(pipeline.dataflow_lower_passes(target)
                                         + pipeline.finalize_passes(target))(applied)
    ex = tvm.compile(final, target, relax_pipeline=None)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    inputs = [tvm.runtime.tensor(np.zeros([int(d) for d in p.ty.shape], str(p.ty.dtype)))
              for p in mod["main"].params]
    assert np.isfinite(vm["main"](*inputs).numpy()).all()
    scheduled = 0
    for gv, func in fused.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc) or workload_id(func) not in measured:
            continue
        top1 = db.query_ir_module(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                                  target, "main")["main"]
        got = applied[gv.name_hint]
        assert not tvm_ffi.structural_equal(got.body, func.body, map_free_vars=True)
        assert tvm_ffi.structural_equal(got.body, top1.body, map_free_vars=True), gv.name_hint
        scheduled += 1
    assert scheduled == len(measured)


def test_export_db_writes_the_database_and_names_the_stored_ids_on_a_wrong_one(
        kernel_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``gnnperf dataset export-db``: the same database as :func:`export_database`, and a
    hardware id with no records is one line naming the ids there are, exit code 2."""
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    from gnnperf.cli import main

    hw_id = next(kernel_records(kernel_root))["hw_id"]
    sampled = [r for r in kernel_records(kernel_root) if r["schedule"] == "sampled"]
    out = tmp_path / "db"
    assert main(["dataset", "export-db", "--root", str(kernel_root), "--hw-id", hw_id,
                 "--out", str(out)]) == 0
    assert len(JSONDatabase(work_dir=str(out)).get_all_tuning_records()) == len(sampled)
    _apply_as_datasets_readme_says(out, kernel_root)
    capsys.readouterr()
    assert main(["dataset", "export-db", "--root", str(kernel_root), "--hw-id",
                 "no-such-cpu/x86-64-v3/1t", "--out", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and hw_id in err
    assert not (tmp_path / "other").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["db"]


def test_a_covered_model_gets_a_whole_model_tuned_record(kernel_root: Path) -> None:
    """Once every kernel of a zoo model has its schedules, the collector measures the model
    built with the fastest of each (the ``best-of:S`` build) into the record shards."""
    from gnnperf.store.shards import latest_records

    (rec,) = [r for r in latest_records(kernel_root / "shards") if r["build"] == "best-of:3"]
    assert rec["model_id"] == zoo.tiny_spec("mixer").model_id
    assert rec["whole"]["median_ms"] > 0 and rec["kernels_ms"]
    assert rec["best_of"]["schedules_per_workload"] == 3
    assert set(rec["reference"]) == {"gemm", "stream", "chain"}


def test_a_tuned_record_is_measured_again_with_the_schedules_it_was_measured_with(
        kernel_root: Path, tmp_path: Path) -> None:
    """The whole-model A/A of a ``best-of`` record builds the model again from its hardware's
    measured schedules. It used to lower the build with no database, which leaves every
    kernel unscheduled: the pair compared two different programs."""
    import shutil

    from gnnperf.collect.noise import remeasure
    from gnnperf.store.shards import latest_records

    root = tmp_path / "ds"
    shutil.copytree(kernel_root, root)
    (rec,) = [r for r in latest_records(root / "shards") if r["build"] == "best-of:3"]
    summary = remeasure(root, 5, settings=TINY, progress=False)
    assert (summary.done, summary.failed) == (1, 0), summary.line()
    (again,) = iter_lines(root / "noise", kinds=("remeasure",))
    assert again["key"] == rec["key"]
    # every kernel ran with its schedule from the database, as the record's build did
    from gnnperf.collect.kernels import tuned_database
    from gnnperf.lowering.pipeline import lower_onnx

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    built = lower_onnx(zoo.export_onnx(zoo.tiny_spec("mixer")), hw, "best-of:3",
                       database=tuned_database(root, rec["hw_id"]))
    assert built.schedule_fallbacks == {}
    assert again["scheduled_kernels"] == len(built.traces) > 0
    assert again["whole"]["median_ms"] > 0


@pytest.mark.slow
def test_a_model_with_a_kernel_it_never_runs_gets_its_tuned_record_in_the_same_run(
        tmp_path: Path) -> None:
    """Tiny VGG's flatten is a reshape the VM does as a builtin: its workload is never
    executed, which covers it for a ``best-of`` build. The collector used to learn that only
    when it read its shards back, so such a model (most convnets) got its whole-model
    ``best-of`` record from a later run, never the one that timed its kernels."""
    from gnnperf.store.shards import latest_records

    spec = zoo.tiny_spec("vgg")
    summary = collect_kernels(tmp_path, [spec], HW, schedules=1, settings=TINY,
                              progress=False)
    stages = [o["stage"] for o in iter_lines(tmp_path / "kernels", kinds=("kernel_failure",))]
    assert stages and set(stages) == {"not-executed"}
    assert summary.tuned.done == 1
    (rec,) = [r for r in latest_records(tmp_path / "shards") if r["build"] == "best-of:1"]
    assert rec["model_id"] == spec.model_id


def test_the_best_of_build_applies_the_fastest_measured_schedule_of_each_kernel(
        kernel_root: Path) -> None:
    import tvm_ffi

    from gnnperf.collect.kernels import tuned_database
    from gnnperf.collect.kernels.workloads import workload_id
    from gnnperf.features import extract_graph
    from gnnperf.lowering.pipeline import lower_onnx
    from gnnperf.lowering.schedules import _database_schedule

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    onnx_model = zoo.export_onnx(zoo.tiny_spec("mixer"))
    db = tuned_database(kernel_root, hw.record_hw_id)
    sampled = {r["workload_id"] for r in kernel_records(kernel_root, hw.record_hw_id)
               if r["schedule"] == "sampled"}
    assert len(db.get_all_tuning_records()) == len(sampled)  # the fastest of each only
    lowered = lower_onnx(onnx_model, hw, "best-of:3", database=db)
    assert lowered.schedule_fallbacks == {}
    final = lowered.primfuncs()
    records = [r for r in kernel_records(kernel_root) if r["schedule"] == "sampled"]
    for name, func in lowered.unscheduled.items():
        if name not in final:
            continue  # not a kernel of the compiled model (a reshape done by the VM)
        assert final[name].attrs["tirx.is_scheduled"]
        best = min((r for r in records if r["workload_id"] == workload_id(func)),
                   key=lambda r: sum(r["latency"]["samples_ms"]))
        applied = _database_schedule(func, hw.target(), db).mod["main"]
        got = int(tvm_ffi.structural_hash(applied)) & 0xFFFFFFFFFFFF
        assert f"{got:012x}" == best["key"].rsplit("|", 1)[-1], name
    # the graph describes the workloads (what a model never tuned has too), flagged best-of
    plain = extract_graph(lower_onnx(onnx_model, hw, "best-of:3"))
    tuned = extract_graph(lowered)
    assert plain.to_dict()["nodes"] == tuned.to_dict()["nodes"]
    assert plain.build == "best-of:3"


def test_a_best_of_kernel_carries_the_candidates_the_collector_measured(
        kernel_root: Path) -> None:
    """The candidates a prediction draws for a best-of kernel are the schedules the kernel
    dataset measured for its workload, described the same: drawn at prediction time
    (any model) or joined from the kernel shards (a best-of record), one kernel model row."""
    import torch
    from torch_geometric.data import Batch

    from gnnperf.data import LatencyDataset, graph_to_data
    from gnnperf.estimators.kernel.dataset import candidate_rows, tuned_candidates
    from gnnperf.features.tuned_candidates import graph_for_prediction
    from gnnperf.lowering.pipeline import lower_onnx

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    onnx_model = zoo.export_onnx(zoo.tiny_spec("mixer"))
    drawn = graph_for_prediction(lower_onnx(onnx_model, hw, "best-of:3"))
    measured = tuned_candidates(kernel_root)
    tir = [n for n in drawn.nodes if n.kind == "tir"]
    assert tir and all(n.candidates for n in tir)
    memo: dict = {}
    for node in tir:
        stored = measured[(node.struct_hash, hw.record_hw_id)]
        assert len(stored) == len(node.candidates)
        rows = sorted(map(tuple, np.round(candidate_rows(node, hw), 4)))
        joined = replace(node, candidates=stored)
        assert rows == sorted(map(tuple, np.round(candidate_rows(joined, hw), 4)))
        # an encoding pass makes a recurring workload's rows once: the same rows
        assert candidate_rows(joined, hw, memo) == candidate_rows(joined, hw)
        assert candidate_rows(joined, hw, memo) is candidate_rows(joined, hw, memo)
        other_hw = HardwareSpec.local("x86-64-v3", 2, measure=False)
        if node.parallel:  # another thread count is another row set, never a hit
            assert candidate_rows(joined, other_hw, memo) == candidate_rows(joined, other_hw)
    # other builds carry none, and a stored graph never does
    assert not any(n.candidates for n in graph_for_prediction(
        lower_onnx(onnx_model, hw, "sampled:0")).nodes)
    assert all("candidates" not in n for n in
               graph_for_prediction(lower_onnx(onnx_model, hw, "default")).to_dict()["nodes"])
    # the best-of record of the dataset reads them from the kernel shards
    ds = LatencyDataset(kernel_root)
    (tuned,) = [ds[i] for i in range(len(ds)) if ds[i].build == "best-of:3"]
    n_stored = sum(len(measured.get((n.struct_hash, tuned.hw_id), [])) for n in drawn.nodes)
    assert n_stored > 0
    assert tuned.x_candidates.shape == (n_stored, tuned.x_kernel.shape[1])
    assert bool(tuned.kernel_model_mask[tuned.candidates_node_index].all())
    # batched after another graph, each candidate still names its own kernel
    other = graph_to_data(drawn, hw)
    batch = Batch.from_data_list([other, tuned])
    assert torch.equal(batch.candidates_node_index[len(other.candidates_node_index):],
                       tuned.candidates_node_index + other.num_nodes)


def test_the_candidates_can_be_limited_to_the_pairs_a_dataset_uses(kernel_root: Path) -> None:
    """A dataset's tuned records use a fraction of the measured schedules: asking for their
    (workload, hardware) pairs gives exactly those pairs' candidates, the same as in full."""
    from gnnperf.estimators.kernel.dataset import tuned_candidates

    every = tuned_candidates(kernel_root)
    assert len(every) > 1
    key = sorted(every)[0]
    only = tuned_candidates(kernel_root, needed={key, ("0" * 16, key[1])})
    assert list(only) == [key]
    assert only[key] == every[key]
    assert tuned_candidates(kernel_root, needed=set()) == {}


def test_measure_and_predict_a_best_of_build_from_the_command_line(
        kernel_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        untuned_predictor, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    import json

    from gnnperf.cli import main

    model = tmp_path / "mixer.onnx"
    zoo.export_onnx(zoo.tiny_spec("mixer"), model)
    assert main(["measure", str(model), "--isa", "x86-64-v3", "--threads", "1", "--build",
                 "best-of:3", "--root", str(kernel_root), "--repeat", "3", *HASTY,
                 "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["build"] == "best-of:3"
    assert "kernels have a searched schedule" in out.err
    # the prediction needs no database: it reads the workloads
    assert main(["predict", str(model), "--hw", "local/x86-64-v3/1t", "--build", "best-of",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["build"] == "best-of:16"
    # a machine with no measured schedules is told so in one line
    assert main(["measure", str(model), "--build", "best-of", "--root", str(tmp_path)]) == 2
    assert "no kernel records" in capsys.readouterr().err
    # tuned builds name their budget; the shipped checkpoint learned them
    assert main(["predict", str(model), "--build", "tuned"]) == 2
    assert "needs its budget" in capsys.readouterr().err
    assert main(["predict", str(model), "--hw", "local/x86-64-v3/1t", "--build", "tuned:64",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["build"] == "tuned:64"
    # one that never learned them says so in one line, before any lowering
    monkeypatch.setattr("gnnperf.estimators.gnn.predictor.load_predictor",
                        lambda checkpoint=None: untuned_predictor)
    assert main(["predict", str(model), "--build", "tuned:64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "this checkpoint has not learned tuned:N builds" in err[0]


def test_kernel_timings_are_measured_again_for_the_noise_floor(kernel_root: Path,
                                                               tmp_path: Path) -> None:
    import shutil

    from gnnperf.collect.kernels import kernel_noise_floor_by_cpu, remeasure_kernels

    root = tmp_path / "copy"
    shutil.copytree(kernel_root / "kernels", root / "kernels")
    summary = remeasure_kernels(root, 2, min_age_s=0.0, settings=TINY)
    assert summary.failed == 0 and summary.done > 0
    again = list(iter_lines(root / "noise", kinds=("kernel_remeasure",)))
    assert len(again) == summary.done
    keys = {r["key"] for r in kernel_records(root)}
    assert {a["key"] for a in again} <= keys
    assert len({a["key"].rsplit("|", 1)[0] for a in again}) == 2  # two (workload, hw) pairs
    cpu = HardwareSpec.local(measure=False).cpu_id
    floor = kernel_noise_floor_by_cpu(root)
    assert floor[cpu]["pairs"] == summary.done and floor[cpu]["mape"] >= 0
    assert floor[cpu]["mape_normalised"] is not None  # both sides carry the machine state
    assert kernel_stats(root)["kernel_noise_floor_by_cpu"] == floor
    # records younger than the minimum age are left alone
    assert remeasure_kernels(root, 2, min_age_s=3600.0, settings=TINY).done == 0


@pytest.mark.slow
def test_two_workloads_compile_together_and_nothing_compiles_while_a_kernel_is_timed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Code generation uses one core, about a third of the collector's time: two
    workloads' libraries compile at once, and both are finished before either is timed
    (a compile beside a timed kernel would slow it)."""
    from gnnperf.collect.kernels import collector as kc

    events: list[str] = []
    compiles: list[kc.CandidateCompile] = []
    real_time_funcs = kc.time_funcs

    class Watched(kc.CandidateCompile):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            compiles.append(self)
            events.append("compile")

    def timed(*args: Any, **kwargs: Any) -> Any:
        assert not any(c.proc.is_alive() for c in compiles)
        events.append("time")
        return real_time_funcs(*args, **kwargs)

    monkeypatch.setattr(kc, "CandidateCompile", Watched)
    monkeypatch.setattr(kc, "time_funcs", timed)
    summary = collect_kernels(tmp_path, [zoo.tiny_spec("mixer")], HW, schedules=1,
                              settings=TINY, progress=False)
    assert summary.failed == 0 and summary.done >= 2, summary.line()
    assert "compile,compile,time,time" in ",".join(events)
    done = list(iter_lines(tmp_path / "kernels", kinds=("kernel_done",)))
    assert len(done) == summary.done
    assert all(d["compiled_together"] == 2 and d["compile_s"] > 0 for d in done)


@pytest.mark.slow
def test_a_candidate_left_out_mid_list_leaves_the_others_timed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library names each candidate by the index it was drawn at (``cand{j}``): when
    one in the middle is left out, the others keep their names and are all timed
    (session 34 lost a workload to "Cannot find cand7 in the global registry")."""
    from gnnperf.collect.kernels import collector as kc
    from gnnperf.collect.kernels import workloads as kw

    real_compile = kw._compile_forked

    def second_runs_away(mod: Any, target: Any, path: Path, timeout_s: float) -> bool:
        return not path.name.endswith(".1.so") and real_compile(mod, target, path, timeout_s)

    class OneByOne(kc.CandidateCompile):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.batch_timeout_s = 0.0  # as if the batch ran away: compile one by one

    monkeypatch.setattr(kw, "_compile_forked", second_runs_away)
    monkeypatch.setattr(kc, "CandidateCompile", OneByOne)
    summary = collect_kernels(tmp_path, [zoo.tiny_spec("mixer")], HW, schedules=3,
                              settings=TINY, progress=False)
    assert summary.failed == 0, summary.line()
    done = list(iter_lines(tmp_path / "kernels", kinds=("kernel_done",)))
    records = Counter(r["key"].rsplit("|", 1)[0]
                      for r in iter_lines(tmp_path / "kernels", kinds=("kernel_record",)))
    mid = [d for d in done if d["dropped"] and d["candidates"] >= 2]
    assert mid, "no workload had a candidate after the one left out"
    assert all(len(d["dropped"]) <= 1 and records[d["key"]] == d["candidates"] for d in done)


def test_candidates_whose_code_generation_runs_away_are_left_out(tmp_path: Path) -> None:
    """A schedule with a huge unroll can keep LLVM busy for many minutes: the batch is
    compiled in a child that can be stopped, then each candidate alone."""
    from gnnperf.collect.kernels import model_workloads
    from gnnperf.collect.kernels.workloads import candidates, compile_candidates
    from gnnperf.errors import GnnperfError
    from gnnperf.lowering.pipeline import lower_onnx

    hw = HardwareSpec.local("x86-64-v3", 1, measure=False)
    lowered = lower_onnx(zoo.export_onnx(zoo.tiny_spec("mixer")), hw, "sampled:0")
    (workload, *_) = [w for w in model_workloads(lowered) if "matmul" in w.name]
    cands, _ = candidates(workload, hw.target(), 2)
    kept, dropped = compile_candidates(cands, hw.target(), tmp_path / "a.so")
    assert kept == list(range(len(cands))) and dropped == {}
    # the batch "runs away": each candidate is compiled alone and all are kept
    kept, dropped = compile_candidates(cands, hw.target(), tmp_path / "b.so",
                                       batch_timeout_s=0.0)
    assert kept == list(range(len(cands))) and (tmp_path / "b.so").is_file()
    # every candidate runs away: nothing to time, said in one line
    with pytest.raises(GnnperfError, match="did not finish"):
        compile_candidates(cands, hw.target(), tmp_path / "c.so", batch_timeout_s=0.0,
                           each_timeout_s=0.0)


def test_schedules_of_a_shared_workload_are_drawn_on_the_stored_kernel(tmp_path: Path) -> None:
    """Two kernels of one structure (one workload id) may name their blocks differently;
    a trace names the blocks it transforms, so schedules drawn on the kernel at hand
    would not replay on the workload the dataset stored from another model."""
    from tvm import te
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    from gnnperf.collect.kernels.collector import KernelCollector
    from gnnperf.collect.kernels.workloads import KernelWorkload, candidates, workload_id

    def matmul(block: str) -> KernelWorkload:
        a, b = te.placeholder((32, 32), name="A"), te.placeholder((32, 32), name="B")
        k = te.reduce_axis((0, 32), "k")
        c = te.compute((32, 32), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=block)
        func = te.create_prim_func([a, b, c])
        return KernelWorkload(workload_id(func), f"fused_{block}", func)

    first, other = matmul("matmul"), matmul("dense")
    assert first.workload_id == other.workload_id
    target = HardwareSpec.local("x86-64-v3", 1, measure=False).target()
    collector = KernelCollector(tmp_path, [("x86-64-v3", 1)], tuned=False)
    try:
        collector.workloads_written[first.workload_id] = Workload(first.module()).as_json()
        drawn = collector.as_stored(other)
    finally:
        collector.close()
    assert drawn.name == other.name  # its inputs are captured under this model's name
    stored = Workload.from_json(collector.workloads_written[first.workload_id])

    def replay(workload: KernelWorkload) -> None:
        for cand in candidates(workload, target, 2, unscheduled=False)[0]:
            TuningRecord(cand.trace, stored).as_measure_candidate()

    replay(drawn)
    with pytest.raises(Exception, match="dense|not rendered|block"):  # TVM's C++ error
        replay(other)


def test_the_models_whose_tuned_records_cost_fewest_measurements_come_first() -> None:
    """Workloads are shared, so some models' ``tuned`` records cost no kernel timing at
    all; the collector visits them before models with many new workloads."""
    from gnnperf.collect.kernels.ordering import cheapest_tuned_first, family_workloads, tuned_cost
    from gnnperf.collect.models import record_key

    specs = {f: zoo.sample_spec(f, 0) for f in ("vgg", "mixer", "resnet", "gpt", "bert",
                                                  "regnet")}
    ids = {f: s.model_id for f, s in specs.items()}
    hws = {"x86-64-v3": ["cpu/1t", "cpu/2t"]}
    workloads = {(ids["vgg"], "x86-64-v3"): {"a", "b", "c"},      # b, c to time on both
                 (ids["mixer"], "x86-64-v3"): {"a"},              # covered, untuned
                 (ids["resnet"], "x86-64-v3"): {"a"},             # covered, tuned on both
                 (ids["gpt"], "x86-64-v3"): {"a", "d", "e"},      # d failed: no record
                 (ids["bert"], "x86-64-v3"): {"a", "b"}}          # 1t tuned; b on 2t only
    covered = {"a|cpu/1t", "a|cpu/2t", "b|cpu/1t"}
    done = covered | {"d|cpu/1t", "d|cpu/2t"}
    tuned_done = {record_key(ids["resnet"], h, "best-of:16") for h in hws["x86-64-v3"]} | {
        record_key(ids["bert"], "cpu/1t", "best-of:16")}
    # two more seeds never lowered, costed by their family's median workload count
    second = [zoo.sample_spec("vgg", 1), zoo.sample_spec("mixer", 1)]
    sizes = family_workloads(workloads)
    assert sizes == {"vgg": 3.0, "mixer": 1.0, "resnet": 1.0, "gpt": 3.0, "bert": 2.0}
    costs = {m: tuned_cost(m, hws, workloads, done, covered, tuned_done, sizes)
             for m in [*ids.values(), *(s.model_id for s in second)]}
    assert (costs[second[0].model_id].measure, costs[second[0].model_id].known) == (6, False)
    assert (costs[ids["mixer"]].records, costs[ids["mixer"]].measure) == (2, 0)
    assert (costs[ids["vgg"]].records, costs[ids["vgg"]].measure) == (2, 3)
    assert (costs[ids["bert"]].records, costs[ids["bert"]].measure) == (1, 1)
    assert (costs[ids["gpt"]].records, costs[ids["gpt"]].measure) == (0, 2)
    assert not costs[ids["regnet"]].known  # never lowered: its workloads are not stored
    order = cheapest_tuned_first([*specs.values(), *second], costs)
    # per record: mixer 0, bert 1, vgg 1.5; then the unknown, by estimate: regnet's family
    # was never lowered (0), mixer-1 ~1, vgg-1 ~3; the blocked one last; resnet (nothing
    # left to do) is dropped
    assert [s.model_id for s in order] == [
        ids["mixer"], ids["bert"], ids["vgg"], ids["regnet"], second[1].model_id,
        second[0].model_id, ids["gpt"]]
    # a second ISA the model was never lowered for: its workloads are estimated from the
    # ISA it was; a failed tuned record counts as done
    two_isas = {**hws, "x86-64-v2": ["cpu/v2-1t"]}
    tuned_done.add(record_key(ids["mixer"], "cpu/1t", "best-of:16"))
    cost = tuned_cost(ids["mixer"], two_isas, workloads, done, covered, tuned_done)
    assert (cost.records, cost.measure, cost.known) == (2, 1, True)
    # a coverage run skips workloads another CPU covers: vgg's b and c cost nothing, and
    # block its records (uncovered here); bert's b is covered on 1t, so 1t is not blocked
    skipping = {m: tuned_cost(m, hws, workloads, done, covered, tuned_done, skip={"b", "c"})
                for m in (ids["vgg"], ids["bert"])}
    assert (skipping[ids["vgg"]].records, skipping[ids["vgg"]].measure) == (0, 0)
    assert skipping[ids["vgg"]].nothing_left
    assert (skipping[ids["bert"]].records, skipping[ids["bert"]].measure) == (0, 0)
    # a skipped workload covered here blocks nothing: mixer's 2t record is still to make
    cost = tuned_cost(ids["mixer"], hws, workloads, done, covered, tuned_done, skip={"a"})
    assert (cost.records, cost.measure) == (1, 0)


def test_the_collector_skips_a_model_with_nothing_left_and_keeps_an_unknown_one(
        kernel_root: Path) -> None:
    """Ordered from the shards on disk: tiny mixer's workloads are all timed and its
    ``best-of:3`` record written, so only the never-lowered model is left to visit."""
    from gnnperf.collect.kernels.collector import KernelCollector
    from gnnperf.errors import GnnperfError

    collector = KernelCollector(kernel_root, HW, schedules=3)
    try:
        vgg = zoo.tiny_spec("vgg")
        assert collector.cheapest_tuned_first([zoo.tiny_spec("mixer"), vgg]) == [vgg]
        # finished without lowering it: its workloads and its one best-of:3 record
        mixer = zoo.tiny_spec("mixer")
        workloads, records = collector.finished(mixer) or (0, 0)
        assert workloads == len(collector.models_written[(mixer.model_id, HW[0][0])])
        assert workloads > 0 and records == 1
        assert collector.finished(vgg) is None
    finally:
        collector.close()
    # another thread count has pairs to time, another ISA was never lowered, and best-of:4
    # has no record yet (but a collector of kernels alone has nothing to do)
    (isa, threads), = HW
    for hw, schedules, tuned, left in (([(isa, threads), (isa, threads + 1)], 3, True, True),
                                       ([(isa, threads), ("x86-64-v2", threads)], 3, True, True),
                                       (HW, 4, True, True), (HW, 4, False, False)):
        other = KernelCollector(kernel_root, hw, schedules=schedules, tuned=tuned)
        try:
            assert (other.finished(zoo.tiny_spec("mixer")) is None) == left, (hw, schedules)
        finally:
            other.close()
    untuned = KernelCollector(kernel_root, HW, tuned=False)
    try:
        with pytest.raises(GnnperfError, match="needs a collector that makes them"):
            untuned.cheapest_tuned_first([vgg])
    finally:
        untuned.close()
    # collecting in that order visits nothing: not even lowered, nothing counted as skipped
    summary = collect_kernels(kernel_root, [zoo.tiny_spec("mixer")], HW, schedules=3,
                              settings=TINY, progress=False, order="cheapest-tuned")
    assert (summary.done, summary.skipped, summary.failed, summary.tuned.done) == (0, 0, 0, 0)


def test_a_coverage_run_times_only_workloads_no_hardware_id_has_sampled(
        kernel_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``skip_covered`` (issue 45's coverage): on a hardware config the dataset has never
    measured, the workloads another config has drawn enough seeds of and timed are left
    out, and the others are timed."""
    import gnnperf.collect.kernels.collector as kernel_collector
    from gnnperf.store.shards import ShardWriter

    lines = list(iter_lines(kernel_root / "kernels"))
    measured = sorted({o["key"].split("|")[0] for o in lines if o["kind"] == "kernel_done"})
    not_executed = {o["workload_id"] for o in lines if o["kind"] == "kernel_failure"}
    forgotten = set(measured[::2])  # a dataset that measured every other workload only
    assert forgotten and len(forgotten) < len(measured)
    root = tmp_path / "ds"
    with ShardWriter(root / "kernels", "kernels-part") as writer:
        for o in lines:
            if o["kind"] in ("kernel_done", "kernel_record") and \
                    o["key"].split("|")[0] in forgotten:
                continue
            writer.append({k: v for k, v in o.items() if k != "crc"})
    (isa, threads), = HW
    other = [(isa, threads + 1)]
    # the fixture drew 3 seeds: a coverage rule of 4 skips only what never runs, one of 3
    # what it measured too
    for rule, skipped in ((4, set()), (3, set(measured) - forgotten)):
        monkeypatch.setattr(kernel_collector, "COVERED_SCHEDULES", rule)
        collector = kernel_collector.KernelCollector(root, other, skip_covered=True)
        try:
            assert collector.skip == skipped | not_executed
        finally:
            collector.close()
    summary = collect_kernels(root, [zoo.tiny_spec("mixer")], other, schedules=3,
                              settings=TINY, progress=False, skip_covered=True)
    assert summary.failed == 0 and summary.done == len(forgotten)
    assert summary.tuned.done == 0  # the skipped workloads are not measured on this config
    (hw_id,) = {r["hw_id"] for r in kernel_records(root)} - {
        r["hw_id"] for r in kernel_records(kernel_root)}
    assert {r["workload_id"] for r in kernel_records(root, hw_id)} == forgotten


def test_the_databases_of_several_hardware_ids_are_read_in_one_pass(
        kernel_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pass parses and verifies every shard line (minutes on the real dataset); the
    collector and the whole-model A/A ask for two or more ids at once."""
    from gnnperf.collect.kernels import database, tuned_databases
    from gnnperf.errors import DatasetError

    (measured,) = {r["hw_id"] for r in kernel_records(kernel_root)}
    fresh = measured.replace("/1t", "/2t")
    passes = []
    real_iter_lines = database.iter_lines
    monkeypatch.setattr(database, "iter_lines",
                        lambda *a, **k: passes.append(1) or real_iter_lines(*a, **k))
    dbs = tuned_databases(kernel_root, [measured, fresh], require=False)
    assert len(passes) == 1
    # each workload's fastest sampled schedule by mean run time, as MetaSchedule ranks them
    fastest: dict[str, float] = {}
    for r in kernel_records(kernel_root, measured):
        if r["schedule"] == "sampled":
            mean = float(np.mean(r["ms_record"][1]))
            fastest[r["workload_id"]] = min(fastest.get(r["workload_id"], mean), mean)
    held = dbs[measured].get_all_tuning_records()
    assert sorted(float(np.mean([float(s.value) for s in r.run_secs])) for r in held) == \
        pytest.approx(sorted(fastest.values()), rel=1e-9)
    assert len(dbs[fresh].get_all_tuning_records()) == 0  # a new machine starts empty
    with pytest.raises(DatasetError, match=f"'{fresh}'.*it has: {measured}"):
        tuned_databases(kernel_root, [measured, fresh])
    passes.clear()
    assert tuned_databases(kernel_root, []) == {} and not passes  # no pass for no id


def test_an_unknown_visiting_order_is_a_one_line_error(tmp_path: Path) -> None:
    from gnnperf.errors import GnnperfError

    with pytest.raises(GnnperfError, match="--order must be one of given, cheapest-tuned"):
        collect_kernels(tmp_path, [zoo.tiny_spec("mixer")], HW, order="cheapest")  # type: ignore[arg-type]
    assert not (tmp_path / "kernels").exists()


def test_the_corpus_workload_coverage_counts_workloads_with_enough_schedules(
        kernel_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45's kernel-dataset figure: of the workloads in the corpus's default-build
    graphs, the share with at least ``COVERED_SCHEDULES`` sampled schedules measured."""
    import shutil

    from gnnperf.collect.kernels import database
    from gnnperf.store.shards import ShardWriter

    root = tmp_path / "ds"
    shutil.copytree(kernel_root / "kernels", root / "kernels")
    records = list(kernel_records(kernel_root))
    schedules: dict[str, set[str]] = {}
    for r in records:
        if r["schedule"] != "unscheduled":
            schedules.setdefault(r["workload_id"], set()).add(r["key"].rsplit("|", 1)[-1])
    most = max(schedules, key=lambda w: len(schedules[w]))
    fewest = min(schedules, key=lambda w: len(schedules[w]))
    assert len(schedules[most]) > len(schedules[fewest])

    def graph(*workloads: str) -> dict:
        return {"nodes": [{"kind": "tir", "struct_hash": w} for w in workloads]
                + [{"kind": "builtin", "struct_hash": "vm.builtin.reshape"}]}

    with ShardWriter(root / "shards", "shard") as writer:
        for family, build, gid, nodes in (
                ("tf-bert-l2h128", "default", "g1", graph(most, fewest, "unmeasured")),
                ("tf-bert-l2h128", "sampled:0", "g2", graph("scheduled-kernel")),
                ("mixer", "default", "g3", graph("zoo-kernel"))):
            writer.append({"kind": "graph", "graph_id": gid, "graph": nodes})
            writer.append({"kind": "record", "key": f"{family}|c/x86-64-v3/1t|{build}",
                           "build": build, "model": {"family": family}, "graph_id": gid,
                           "created_at": 1.0})
    monkeypatch.setattr(database, "COVERED_SCHEDULES", len(schedules[most]))
    stats = kernel_stats(root, corpus=True)
    # the corpus's default graph only: the sampled graph and the zoo model do not count
    assert stats["corpus_workloads"] == 3
    assert stats["corpus_workloads_covered"] == 1
    assert stats["corpus_workload_coverage"] == pytest.approx(33.3)
    # both measured workloads were drawn with the fixture's 3 seeds, "unmeasured" never
    assert stats["corpus_workloads_sampled"] == 2
    assert stats["corpus_workload_sampled_share"] == pytest.approx(66.7)
    # per family, what its models bring; per workload, the seeds one hardware id drew
    assert database.corpus_workloads_by_family(DatasetFolder.resolve(root)) == {
        "tf-bert-l2h128": {most, fewest, "unmeasured"}}
    drawn = database.workloads_drawn(root)
    assert drawn[most] == drawn[fewest] == 3 and drawn["unmeasured"] == 0
    assert kernel_stats(kernel_root, corpus=True)["corpus_workloads"] == 0  # no shards
    assert "corpus_workloads" not in kernel_stats(root)  # only when asked


def test_a_coverage_run_visits_first_the_families_that_bring_most_missing_workloads(
        ) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tools" / "coverage_order.py"
    spec = importlib.util.spec_from_file_location("coverage_order", path)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    # b brings 3, then c only 1 of its 3 (a and e came with b), d nothing new: left out
    missing = {"b": {"a", "e", "f"}, "c": {"a", "e", "g"}, "d": {"f"}, "z": set()}
    assert tool.greedy_order(missing) == [("b", 3), ("c", 1)]
