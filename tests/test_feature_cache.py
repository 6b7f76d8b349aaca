"""The feature cache: reuse across calls and processes, bounded, versioned, and invisible
in the predictions."""

from __future__ import annotations

import warnings
from multiprocessing import get_context
from pathlib import Path

import pytest

from gnnperf import zoo
from gnnperf.features import cache as feature_cache
from gnnperf.features.cache import FeatureCache
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.prediction.api import lower_for_prediction, predict, predict_many


def _write_many(path: str, start: int) -> None:
    cache = FeatureCache(path)
    for i in range(start, start + 150):
        cache.put("t", f"k{i}", {"i": i})


def test_values_round_trip_and_processes_write_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    cache = FeatureCache(path)
    assert cache.get("t", "k") is None
    cache.put("t", "k", {"x": [1.5, 2.0], "s": "a"})
    assert cache.get("t", "k") == {"x": [1.5, 2.0], "s": "a"}
    assert cache.get("other", "k") is None  # tables are apart
    procs = [get_context("spawn").Process(target=_write_many, args=(path, s))
             for s in (0, 1000, 2000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert all(cache.get("t", f"k{s + 149}") == {"i": s + 149} for s in (0, 1000, 2000))
    assert len(cache) == 451


def test_values_orjson_refuses_round_trip_too(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path / "c.sqlite")
    cache.put("t", "k", {"best_ms": float("inf"), "x": [1e-7, 3]})
    assert cache.get("t", "k") == {"best_ms": float("inf"), "x": [1e-7, 3]}


def test_a_model_file_is_hashed_again_once_it_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest that keys a model's cached graphs is kept across processes by the
    file's path, inode, size and modification time; new bytes give a new digest."""
    import hashlib
    import os

    from gnnperf.prediction import graphs

    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "m.onnx"
    model.write_bytes(b"one")
    hashed: list[Path] = []
    real = graphs.file_sha256
    monkeypatch.setattr(graphs, "file_sha256", lambda p: hashed.append(p) or real(p))
    assert graphs.model_digest(model) == hashlib.sha256(b"one").hexdigest()
    assert graphs.model_digest(model) == hashlib.sha256(b"one").hexdigest()
    assert len(hashed) == 1  # the second came from the cache
    model.write_bytes(b"two")
    os.utime(model, ns=(1, 1))  # even with a stale-looking time, the size moved
    assert graphs.model_digest(model) == hashlib.sha256(b"two").hexdigest()
    model.write_bytes(b"six")  # same size: the modification time tells
    assert graphs.model_digest(model) == hashlib.sha256(b"six").hexdigest()
    assert len(hashed) == 3


def test_the_cache_is_bounded_and_forgets_the_least_recently_used(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path / "c.sqlite", max_entries=10)
    for i in range(15):
        cache.put("t", f"k{i}", i)
    cache.get("t", "k0")  # used again: kept
    cache.prune()
    assert len(cache) == 10
    assert cache.get("t", "k0") == 0 and cache.get("t", "k1") is None
    assert cache.get("t", "k14") == 14


def test_a_change_in_the_feature_code_invalidates_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = FeatureCache(tmp_path / "c.sqlite")
    cache.put("t", "k", 1)
    monkeypatch.setattr(feature_cache, "code_version", lambda: "other-code")
    assert cache.get("t", "k") is None
    cache.prune()  # entries of older code go
    monkeypatch.undo()
    assert cache.get("t", "k") is None


@pytest.mark.slow
def test_predictions_are_the_same_with_and_without_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path))
    model = tmp_path / "m.onnx"
    zoo.export_onnx(zoo.tiny_spec("resnet"), model)
    hw = "local/x86-64-v3/2t"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setenv("GNNPERF_FEATURE_CACHE", "0")
        uncached = predict(model, hw, build="sampled:0")
        monkeypatch.setenv("GNNPERF_FEATURE_CACHE", "1")
        cold = predict(model, hw, build="sampled:0")
        cache = feature_cache.default_cache()
        assert cache is not None and len(cache) > 0  # kernels and the graph were stored
        warm = predict(model, hw, build="sampled:0")
        other_threads = predict(model, "local/x86-64-v3/1t", build="sampled:0")
    for p in (cold, warm):
        assert p.latency_ms == pytest.approx(uncached.latency_ms, rel=1e-6)
        assert [k.ms for k in p.kernels] == pytest.approx([k.ms for k in uncached.kernels],
                                                          rel=1e-6)
    # one lowering serves every thread count of an ISA: the graph is the cached one
    spec = HardwareSpec.from_id("local/x86-64-v3/1t")
    assert lower_for_prediction(model, spec, "sampled:0").to_dict() == \
        lower_for_prediction(model, HardwareSpec.from_id(hw), "sampled:0").to_dict()
    assert other_threads.hw_id == "local/x86-64-v3/1t"


@pytest.mark.slow
def test_predict_many_lowers_in_parallel_and_keeps_the_input_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path))
    paths = []
    for family in ("mixer", "resnet", "vit"):
        paths.append(tmp_path / f"{family}.onnx")
        zoo.export_onnx(zoo.tiny_spec(family), paths[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel = predict_many(paths, "local/x86-64-v3/2t", build="sampled:0", workers=2)
        monkeypatch.setenv("GNNPERF_FEATURE_CACHE", "0")
        serial = [predict(p, "local/x86-64-v3/2t", build="sampled:0") for p in paths]
    assert [p.latency_ms for p in parallel] == pytest.approx([p.latency_ms for p in serial],
                                                             rel=1e-6)
    assert [len(p.kernels) for p in parallel] == [len(p.kernels) for p in serial]


def test_a_cached_schedule_replays_into_the_same_kernels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel seen before gets its schedule by replaying the stored trace: the module,
    the traces and the graph are those that sampling gives."""
    import tvm

    from gnnperf.features import extract_graph
    from gnnperf.lowering.pipeline import lower_onnx

    # this machine's spec from the session's cache (a fresh cache would measure it, ~30 s)
    hw = HardwareSpec.from_id("local/x86-64-v3/2t")
    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path))
    model = zoo.export_onnx(zoo.tiny_spec("mobilenet"))
    monkeypatch.setenv("GNNPERF_FEATURE_CACHE", "1")
    sampled = lower_onnx(model, hw, "sampled:1")  # an empty cache: sampled, traces stored
    cache = feature_cache.default_cache()
    assert cache is not None
    stored = cache._db().execute("SELECT COUNT(*) FROM entries WHERE tab='schedule'").fetchone()
    assert stored[0] == len(sampled.unscheduled)
    replayed = lower_onnx(model, hw, "sampled:1")
    tvm.ir.assert_structural_equal(replayed.module, sampled.module)
    assert replayed.traces == sampled.traces and replayed.traces
    assert extract_graph(replayed).to_dict() == extract_graph(sampled).to_dict()
    # the replay schedules a copy: the unscheduled kernels (workload ids) stay untouched
    for name, func in replayed.unscheduled.items():
        tvm.ir.assert_structural_equal(func, sampled.unscheduled[name])


def test_kernels_equal_but_for_their_names_do_not_share_a_cached_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The structural hash ignores names, a trace finds its blocks by name: the same layer
    norm in two models (``lv8_sum`` here, ``lv37_sum`` there) gets the schedule sampling
    gives it, whichever model warmed the cache first."""
    import tvm
    from tvm import te, topi

    from gnnperf.lowering.schedules import (
        block_names,
        cached_sampled_schedule,
        kernel_hash,
        sample_schedule,
    )

    def layer_norm(prefix: str) -> tvm.tirx.PrimFunc:
        x = te.placeholder((1, 8, 32), name=prefix)
        gamma, beta = te.placeholder((32,), name="B"), te.placeholder((32,), name="C")
        return te.create_prim_func([x, gamma, beta, topi.nn.layer_norm(x, gamma, beta, [2])])

    first, second = layer_norm("lv37"), layer_norm("lv8")
    assert kernel_hash(first) == kernel_hash(second)
    assert block_names(first) != block_names(second)
    target = tvm.target.Target({"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2})
    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path))
    assert cached_sampled_schedule(first, target, 0) is not None  # warms the cache
    replayed = cached_sampled_schedule(second, target, 0)
    assert replayed is not None
    tvm.ir.assert_structural_equal(replayed.func, sample_schedule(second, target, 0))
    assert any("lv8" in str(step) for step in replayed.trace[0])


def test_a_new_process_lowers_in_a_second_interpreter_and_predicts_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process without TVM lowers the model in ``python -m gnnperf.prediction.graphs``
    while it loads the network: same graph, same prediction, and TVM never loads in it. A
    model that process cannot lower gives None (the caller lowers it and raises)."""
    import json
    import subprocess
    import sys

    import onnx

    from gnnperf.prediction.graphs import BackgroundLowering

    monkeypatch.setenv("GNNPERF_FEATURE_CACHE", "0")
    model = tmp_path / "m.onnx"
    zoo.export_onnx(zoo.tiny_spec("mixer"), model)
    hw = HardwareSpec.from_id("local/x86-64-v3/2t")
    background = BackgroundLowering.start(model, hw, "sampled:0")
    assert background is not None
    graph = background.result()
    assert graph is not None
    assert graph.to_dict() == lower_for_prediction(model, hw, "sampled:0").to_dict()

    # in-process first: it also measures the machine's one-time figures (reference kernels,
    # as `gnnperf hw` does once per machine), which the new process then finds cached
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        here = predict(model, "local/x86-64-v3/2t", build="sampled:0")
    code = ("import json, sys, warnings, gnnperf; warnings.simplefilter('ignore'); "
            f"p = gnnperf.predict({str(model)!r}, 'local/x86-64-v3/2t', build='sampled:0'); "
            "print(json.dumps([p.latency_ms, [k.ms for k in p.kernels], 'tvm' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    latency, kernels, loaded_tvm = json.loads(out)
    assert not loaded_tvm
    assert latency == pytest.approx(here.latency_ms, rel=1e-6)
    assert kernels == pytest.approx([k.ms for k in here.kernels], rel=1e-6)

    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    failed = BackgroundLowering.start(bad, hw, "sampled:0")
    assert failed is not None and failed.result() is None
    assert BackgroundLowering.start(onnx.load(model), hw, "default") is None  # in memory
