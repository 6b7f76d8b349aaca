"""``gnnperf advise``: every build at every thread count and ISA, with gains and tuning cost."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from test_cli import run_cli

from gnnperf.cli import main
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.prediction.advise import Advice, AdviceRow, _cost_at, advise


@pytest.fixture(scope="module")
def advice(cnn_onnx: Path) -> Advice:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return advise(cnn_onnx, threads=[1, 2], isas=["x86-64-v3"])


def test_every_build_is_advised_at_every_thread_count(advice: Advice, tmp_path: Path) -> None:
    builds = ("default", "sampled:0", "best-of:16", "tuned:16", "tuned:64", "tuned:256")
    got = [(r.isa, r.threads, r.build) for r in advice.rows]
    assert got == [("x86-64-v3", t, b) for t in (1, 2) for b in builds]
    rows = {(r.threads, r.build): r for r in advice.rows}
    for r in advice.rows:
        assert 0 < r.low_ms < r.latency_ms < r.high_ms
        # gains are ratios of the predictions at the same configuration
        default, sampled = rows[r.threads, "default"], rows[r.threads, "sampled:0"]
        assert r.over_default == pytest.approx(default.latency_ms / r.latency_ms)
        if r.build != "sampled:0":
            assert r.over_sampled == pytest.approx(sampled.latency_ms / r.latency_ms)
        if not r.build.startswith("tuned:"):
            assert r.tuning_minutes is None  # no search to cost
    # the budgets the shipped dataset tuned at are costed from its runs
    assert all(rows[t, b].tuning_minutes > 0 for t in (1, 2) for b in ("tuned:64", "tuned:256"))
    # a default build has no parallel loop: one latency at any thread count
    assert rows[1, "default"].latency_ms == pytest.approx(rows[2, "default"].latency_ms)
    # a budget outside the trained 64..256 is predicted with the reason it may be off
    assert any("tuned budget 16 is outside" in w for w in rows[1, "tuned:16"].warnings)
    assert not [w for w in rows[1, "tuned:64"].warnings if "budget" in w]
    assert not advice.skipped and advice.tunable_workloads > 0
    table = advice.table()
    assert table.count("<- fastest") == 1 and "tuned:256" in table
    assert json.loads(json.dumps(advice.to_dict()))["rows"][0]["build"] == "default"
    assert advice.plot(tmp_path / "advice.png").stat().st_size > 1000


def test_a_checkpoint_that_never_learned_tuning_skips_it_with_the_reason(
        cnn_onnx: Path, untuned_predictor, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    monkeypatch.setattr("gnnperf.estimators.gnn.predictor.load_predictor",
                        lambda checkpoint=None: untuned_predictor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        advice = advise(cnn_onnx, threads=[1], isas=["x86-64-v3"])
    assert [r.build for r in advice.rows] == ["default", "sampled:0", "best-of:16"]
    # tuned:N is skipped with the reason, never guessed
    assert set(advice.skipped) == {"tuned:16", "tuned:64", "tuned:256"}
    assert all("this checkpoint has not learned tuned:N" in why
               for why in advice.skipped.values())
    assert "not advised: tuned:64" in advice.table()


def test_the_command_prints_the_table_and_json(cnn_onnx: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", str(cnn_onnx), "--threads", "1", "--isa", "x86-64-v3",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["build"] for r in data["rows"]] == [
        "default", "sampled:0", "best-of:16", "tuned:16", "tuned:64", "tuned:256"]


@pytest.mark.parametrize("args,needle", [
    (["--threads", "0"], "thread counts must lie in 1.."),
    (["--threads", "one"], "--threads wants comma-separated integers"),
    (["--budgets", "x"], "--budgets wants comma-separated integers"),
    (["--hw", str(Path(__file__).parent / "fixtures" / "hw_zen4_v3_2t.json"), "--threads", "1"],
     "describes one ISA and thread"),
])
def test_bad_advice_requests_give_one_line_and_exit_2(args: list[str], needle: str,
                                                      cnn_onnx: Path) -> None:
    proc = run_cli("advise", str(cnn_onnx), "--isa", "x86-64-v3", *args)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_tuning_cost_comes_from_the_nearest_hardware_tuned() -> None:
    spec = HardwareSpec.local("x86-64-v3", 2, measure=False)
    here = spec.record_hw_id

    def at(minutes: float) -> dict:
        return {"by_budget": {"64": {"workloads": 3, "minutes_per_workload": minutes}}}

    costs = {"other/x86-64-v3/1t": at(0.5), "other/x86-64-v3/2t": at(0.7)}
    # not tuned here: the same thread count elsewhere, said
    assert _cost_at(costs, spec, 64) == (0.7, "other/x86-64-v3/2t")
    assert _cost_at({**costs, here: at(0.9)}, spec, 64) == (0.9, here)
    assert _cost_at(costs, spec, 256) == (None, "")
    # a row with a cost says it in the table
    row = AdviceRow("x86-64-v3", 2, "tuned:64", 1.0, 0.9, 1.1, tuning_minutes=7.0,
                    tuning_measured_on=here)
    table = Advice("m.onnx", [row], {}, 10).table()
    assert "7 min" in table and f"10 workloads x the median minutes per workload of the " \
                                 f"stored runs on {here}" in table


def test_tuned_budgets_are_advised_with_their_tuning_time(
        cnn_onnx: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that learned tuned:N (the shipped one) gets a row per budget, each
    costed: the model's tunable workloads times the stored minutes per workload at that
    budget."""
    here = HardwareSpec.local("x86-64-v3", 1, measure=False).record_hw_id
    monkeypatch.setattr(
        "gnnperf.prediction.advise.tuning_stats",
        lambda root: {here: {"by_budget": {"64": {"minutes_per_workload": 0.5}}}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        advice = advise(cnn_onnx, threads=[1], isas=["x86-64-v3"], budgets=(64, 256))
    rows = {r.build: r for r in advice.rows}
    assert list(rows) == ["default", "sampled:0", "best-of:16", "tuned:64", "tuned:256"]
    assert rows["tuned:64"].tuning_minutes == pytest.approx(0.5 * advice.tunable_workloads)
    assert rows["tuned:64"].tuning_measured_on == here
    assert rows["tuned:256"].tuning_minutes is None  # no run at 256 to cost it from
    assert rows["tuned:64"].over_default == pytest.approx(
        rows["default"].latency_ms / rows["tuned:64"].latency_ms)
    assert not advice.skipped


def test_a_warm_advice_imports_neither_tvm_nor_onnx(advice: Advice, cnn_onnx: Path) -> None:
    """Once the model's graphs are cached, ``advise`` reads them and the stored tuning
    summary: TVM (2-3 s to import) and onnx (1 s, mostly ``ml_dtypes``) stay unloaded."""
    import subprocess
    import sys

    script = ("import sys, warnings; warnings.simplefilter('ignore'); "
              "from gnnperf.prediction.advise import advise; "
              f"a = advise({str(cnn_onnx)!r}, threads=[1, 2], isas=['x86-64-v3']); "
              "print(len(a.rows), 'tvm' in sys.modules, 'onnx' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.split() == [str(len(advice.rows)), "False", "False"], done.stderr
