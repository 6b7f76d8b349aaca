"""Tuning a workload with MetaSchedule's evolutionary search at a trial budget (issue 47)."""

from __future__ import annotations

import math

import pytest

from gnnperf.collect.kernels.tuning import TuningRun, tune_workload
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
    return TuningRun("w", "cpu/x86-64-v3/1t", len(run_ms), 0, None, [], run_ms, 0.0)


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
