"""The collector: records land in shards, a SIGKILL mid-run loses nothing on resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import HASTY

from gnnperf.collect.models import done_keys, parse_hw_list
from gnnperf.data import split_group
from gnnperf.errors import HardwareError
from gnnperf.hardware.cpu_identity import signature_of_hw
from gnnperf.store.shards import (
    ShardWriter,
    checksum,
    content_id,
    iter_lines,
    latest_records,
    shard_paths,
    structural_id,
)

ARGS = ["--families", "squeezenet,nb201", "--count", "2", "--hw", "x86-64-v3:1",
        "--build", "default", "--repeat", "3", *HASTY,
        "--max-default-gflops", "0.05"]


def _collect(out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gnnperf", "collect", "--out", str(out), *ARGS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _keys(out: Path) -> Counter[str]:
    return Counter(o["key"] for o in iter_lines(out) if o["kind"] in ("record", "failure"))


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "shards"
    proc = _collect(out)
    deadline = time.time() + 240
    while time.time() < deadline and (not out.exists() or sum(_keys(out).values()) < 1):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _keys(out)
    assert 1 <= sum(before.values()) < 4, "kill should land mid-run"

    resumed = _collect(out)
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    assert f"skipped {sum(before.values())}" in stdout
    assert "checksum" not in stderr  # every shard line parses
    after = _keys(out)
    assert len(after) == 4  # 2 families x 2 seeds x 1 hw x 1 build
    assert all(n == 1 for n in after.values())  # nothing duplicated
    assert set(before) <= set(after)  # nothing lost
    records = [o for o in iter_lines(out) if o["kind"] == "record"]
    assert records, "every key failed"
    graphs = {o["graph_id"] for o in iter_lines(out) if o["kind"] == "graph"}
    onnx_graphs = {o["graph_id"] for o in iter_lines(out) if o["kind"] == "onnx_graph"}
    for r in records:
        assert r["graph_id"] in graphs and r["onnx_graph_id"] in onnx_graphs
        assert r["whole"]["median_ms"] > 0 and len(r["whole"]["samples_ms"]) >= 3
        assert len(r["kernels_ms"]) > 0
        assert r["hw"]["isa"] == "x86-64-v3" and r["build"] == "default"
        # v2: the CPU signature names the hardware id; the machine state rides along
        assert r["hw_id"].startswith(signature_of_hw(r["hw"]).id + "/")
        assert set(r["reference"]) == {"gemm", "stream", "chain"}
        assert all(v["median_ms"] > 0 and len(v["samples_ms"]) >= 2
                   for v in r["reference"].values())
    # no temp files left (the writer's lock file is not data)
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.suffix != ".lock"]

    third = _collect(out)
    stdout, _ = third.communicate(timeout=300)
    assert "done 0" in stdout and _keys(out) == after


def test_shard_writer_rotates_resumes_and_checksums(tmp_path: Path) -> None:
    w = ShardWriter(tmp_path, "t", max_lines=3)
    for i in range(5):
        w.append({"kind": "record", "key": f"k{i}"})
    w.close()
    assert len(shard_paths(tmp_path)) == 2
    w2 = ShardWriter(tmp_path, "t", max_lines=3)  # resumes the half-full second shard
    w2.append({"kind": "record", "key": "k5"})
    w2.close()
    assert len(shard_paths(tmp_path)) == 2
    assert [o["key"] for o in iter_lines(tmp_path)] == [f"k{i}" for i in range(6)]
    assert done_keys(tmp_path) == {f"k{i}" for i in range(6)}
    obj = {"a": 1}
    assert checksum(obj) == checksum(dict(obj, crc="x"))


def test_a_corrupt_line_stops_readers_and_names_itself(tmp_path: Path) -> None:
    import gzip

    from gnnperf.errors import DatasetError

    with ShardWriter(tmp_path, "t") as w:
        w.append({"kind": "record", "key": "good"})
    path = shard_paths(tmp_path)[0]
    text = gzip.decompress(path.read_bytes()).decode()
    tampered = text + text.replace('"good"', '"evil"')
    path.write_bytes(gzip.compress(tampered.encode()))
    with pytest.raises(DatasetError, match=r"line 2 fails its checksum"):
        list(iter_lines(tmp_path))
    # a collector would rewrite the shard without the line: it refuses to start instead
    with pytest.raises(DatasetError, match="line 2"):
        ShardWriter(tmp_path, "t")
    path.write_bytes(gzip.compress((text + "{not json\n").encode()))
    with pytest.raises(DatasetError, match="line 2 is not JSON"):
        list(iter_lines(tmp_path))


def test_shard_lines_are_verified_from_their_text_and_any_valid_json_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line as the writer wrote it is verified by hashing its own text (no second
    serialisation: over half of the reading time); a line written otherwise, with its
    right checksum, is still read, and a changed one is still refused."""
    import gzip
    import json

    import gnnperf.store.shards as shards
    from gnnperf.errors import DatasetError

    # a nested "crc" member sorts before the line's own
    line = {"kind": "record", "key": "k", "zeta": [1, 2.5], "alpha": {"crc": "0" * 16}}
    with ShardWriter(tmp_path, "t") as w:
        w.append(line)
        w.append({"kind": "failure", "key": "z"})
    path = shard_paths(tmp_path)[0]
    text = gzip.decompress(path.read_bytes()).decode()
    with monkeypatch.context() as m:
        m.setattr(shards, "checksum", lambda obj: pytest.fail("re-serialised a line"))
        assert [o["key"] for o in iter_lines(tmp_path)] == ["k", "z"]
    stored = json.loads(text.splitlines()[0])
    loose = json.dumps(dict(reversed(list(stored.items()))), indent=None)  # spaces, order
    path.write_bytes(gzip.compress((loose + "\n" + text).encode()))
    assert [o["key"] for o in iter_lines(tmp_path)] == ["k", "k", "z"]
    # a reader of one kind skips the others' text unparsed, yet reads a loose line of its own
    assert [o["key"] for o in iter_lines(tmp_path, kinds=("record",))] == ["k", "k"]
    assert [o["key"] for o in iter_lines(tmp_path, kinds=("failure",))] == ["z"]
    changed = text.splitlines()[0].replace('"zeta":[1,2.5]', '"zeta":[1,2.6]')
    path.write_bytes(gzip.compress((changed + "\n").encode()))
    with pytest.raises(DatasetError, match="line 1 fails its checksum"):
        list(iter_lines(tmp_path))


def test_hw_list_parsing() -> None:
    assert parse_hw_list("x86-64-v3:2, x86-64-v2:1") == [("x86-64-v3", 2), ("x86-64-v2", 1)]
    for bad in ["x86-64-v3", "x86-64-v3:two", ""]:
        with pytest.raises(HardwareError):
            parse_hw_list(bad)


def test_rpc_collection_needs_the_boards_spec(tmp_path: Path) -> None:
    from gnnperf.collect.models import Collector

    with pytest.raises(HardwareError, match="--rpc-hw"):
        Collector(tmp_path, [("x86-64-v3", 1)], ["default"], rpc="127.0.0.1:9190:board")


def test_one_writer_per_shard_prefix(tmp_path: Path) -> None:
    from gnnperf.errors import DatasetError

    first = ShardWriter(tmp_path, "t")
    with pytest.raises(DatasetError, match="another process"):
        ShardWriter(tmp_path, "t")
    first.append({"kind": "record", "key": "a"})
    first.close()
    with ShardWriter(tmp_path, "t") as again:  # free once the first one is done
        again.append({"kind": "record", "key": "b"})
    assert [o["key"] for o in iter_lines(tmp_path)] == ["a", "b"]


V2_STATE = {"gemm": {"median_ms": 1.0}, "stream": {"median_ms": 9.0},
            "chain": {"median_ms": 0.3}}


def test_noisy_uses_the_slowdown_limit_the_record_was_collected_under() -> None:
    from gnnperf.collect.models import is_noisy

    rec = {"kind": "record", "key": "m|hw|b", "slowdown": 1.6, "other_load": 0.0,
           "whole": {"median_ms": 1.0, "cv": 0.02}, "reference": V2_STATE}
    assert is_noisy(rec)  # the default limit, 1.15
    assert not is_noisy({**rec, "settings": {"max_slowdown": 2.0}})
    assert is_noisy({**rec, "settings": {"max_slowdown": 1.5}})


def test_a_record_from_before_measurement_v2_is_redone() -> None:
    """No reference kernels beside the label: `--redo-noisy` measures it again under v2."""
    from gnnperf.collect.models import is_noisy

    quiet = {"kind": "record", "key": "m|hw|b", "slowdown": 1.01, "other_load": 0.0,
             "whole": {"median_ms": 1.0, "cv": 0.02}}
    assert not is_noisy({**quiet, "reference": V2_STATE})
    assert is_noisy(quiet)
    assert is_noisy({**quiet, "reference": None})


def test_collect_cli_refuses_a_slowdown_limit_below_one(tmp_path: Path, capsys) -> None:
    from gnnperf.cli import main

    assert main(["collect", "--out", str(tmp_path), "--max-slowdown", "0.9"]) == 2
    assert "--max-slowdown" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_redone_key_supersedes_its_noisy_record(tmp_path: Path) -> None:
    writer = ShardWriter(tmp_path, "shard-t")
    old = {"kind": "record", "key": "m|hw|b", "created_at": 1.0, "whole": {"median_ms": 2.0}}
    writer.append(old)
    writer.append({"kind": "record", "key": "n|hw|b", "created_at": 2.0, "slowdown": 1.01,
                   "whole": {"median_ms": 1.0, "cv": 0.01}, "other_load": 0.0,
                   "reference": V2_STATE})
    loaded = {"kind": "record", "key": "l|hw|b", "created_at": 2.0, "slowdown": 1.01,
              "whole": {"median_ms": 1.0, "cv": 0.01}, "other_load": 0.5,
              "reference": V2_STATE}
    writer.append(loaded)
    writer.append({"kind": "failure", "key": "f|hw|b"})
    assert done_keys(tmp_path) == {"m|hw|b", "n|hw|b", "l|hw|b", "f|hw|b"}
    assert done_keys(tmp_path, redo_noisy=True) == {"n|hw|b", "f|hw|b"}
    writer.append({**old, "created_at": 3.0, "slowdown": 1.02, "whole": {"median_ms": 1.5},
                   "reference": V2_STATE})
    writer.close()
    assert done_keys(tmp_path, redo_noisy=True) == {"m|hw|b", "n|hw|b", "f|hw|b"}
    latest = latest_records(tmp_path)
    assert [r["key"] for r in latest] == ["m|hw|b", "n|hw|b", "l|hw|b"]  # first-recorded order
    assert latest[0]["whole"]["median_ms"] == 1.5
    assert len(list(iter_lines(tmp_path, kinds=("record",)))) == 4


def test_one_operator_graph_has_one_id_across_collector_versions(tmp_path: Path) -> None:
    """An older extractor left out fields a newer one writes empty: the two stored graphs
    are one model, so its records get one ``onnx_graph_id`` and one split group."""
    node = {"name": "/Conv", "ops": ["conv2d"], "flops": 6.0}
    old_graph = {"nodes": [node], "edges": [[0, 0]]}
    new_graph = {"nodes": [{**node, "schedule_trace": None, "missing": [],
                            "schedule_fallback": ""}], "edges": [[0, 0]]}
    other_graph = {"nodes": [{**node, "flops": 7.0}], "edges": [[0, 0]]}
    assert content_id(old_graph) != content_id(new_graph)
    assert structural_id(old_graph) == structural_id(new_graph) != structural_id(other_graph)
    with ShardWriter(tmp_path, "shard-t") as writer:
        for tag, graph in (("old", old_graph), ("new", new_graph), ("other", other_graph)):
            writer.append({"kind": "onnx_graph", "graph_id": content_id(graph),
                           "model_id": "m", "graph": graph})
            writer.append({"kind": "record", "key": f"m|{tag}|b", "model_id": "m",
                           "onnx_graph_id": content_id(graph), "created_at": 1.0})
        writer.append({"kind": "record", "key": "legacy|b", "model_id": "legacy"})
    groups = {r["key"]: split_group(r) for r in latest_records(tmp_path)}
    assert groups["m|old|b"] == groups["m|new|b"] == structural_id(old_graph)
    assert groups["m|other|b"] == structural_id(other_graph)
    assert groups["legacy|b"] == "legacy"  # no graph id: the model is its own group
    stored = {o["graph_id"] for o in iter_lines(tmp_path, kinds=("onnx_graph",))}
    assert stored == {content_id(g) for g in (old_graph, new_graph, other_graph)}


def test_failures_are_retried_on_request_except_budget_skips(tmp_path: Path) -> None:
    with ShardWriter(tmp_path, "shard-t") as writer:
        writer.append({"kind": "failure", "key": "c|hw|b", "stage": "compile"})
        writer.append({"kind": "failure", "key": "g|hw|b", "stage": "budget"})
    assert done_keys(tmp_path) == {"c|hw|b", "g|hw|b"}
    assert done_keys(tmp_path, retry_failed=True) == {"g|hw|b"}


def test_a_run_where_everything_failed_is_reported_as_such() -> None:
    from gnnperf.collect.models import CollectSummary

    assert not CollectSummary(done=0, failed=4, failures=Counter(budget=4)).all_failed
    assert CollectSummary(done=0, failed=4, failures=Counter(budget=2, measure=2)).all_failed
    assert not CollectSummary(done=1, failed=4, failures=Counter(measure=4)).all_failed
    assert not CollectSummary().all_failed


def _legacy_record(root: Path, hw: dict[str, Any], hw_id: str = "local/x86-64-v3/1t") -> None:
    """A record as collected before CPU signatures: model name, caches and cores only."""
    with ShardWriter(root, "shard-elsewhere") as writer:
        writer.append({"kind": "record", "key": f"m|{hw_id}|default", "hw_id": hw_id,
                       "hw": hw, "created_at": 1.0, "whole": {"median_ms": 1.0}})


def _this_cpu_as_legacy() -> dict[str, Any]:
    from gnnperf.hardware.spec import HardwareSpec

    spec = HardwareSpec.local(measure=False)
    return {"cpu_model": spec.cpu_model, "cores": spec.cores, "l1d_kb": spec.l1d_kb,
            "l2_kb": spec.l2_kb, "l3_kb": spec.l3_kb}


def test_hardware_ids_come_from_the_cpu_signature_and_never_mix_two_cpus(
        tmp_path: Path) -> None:
    from gnnperf import zoo
    from gnnperf.collect.models import Collector
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.measure import MeasureSettings

    quick = MeasureSettings.waiting_at_most(2)  # the load guard need not wait for a quiet CPU
    # same model name, another L2 size: Zen 3 beside Zen 4, both "AMD EPYC"
    other = {**_this_cpu_as_legacy(), "l2_kb": _this_cpu_as_legacy()["l2_kb"] * 2 + 512}
    _legacy_record(tmp_path, other)
    spec = zoo.sample_spec("nb201", 0)
    cpu_id = HardwareSpec.local(measure=False).cpu_id
    fresh = Collector(tmp_path, [("x86-64-v3", 1)], ["default"], settings=quick)
    assert [k for *_, k in fresh.keys_for(spec)] == [
        f"{spec.model_id}|{cpu_id}/x86-64-v3/1t|default"]
    fresh.close()
    # a tag that reuses the other CPU's ids is refused
    with pytest.raises(HardwareError, match="come from CPU"):
        Collector(tmp_path, [("x86-64-v3", 1)], ["default"], host_tag="local",
                  shard_prefix="shard-tag", settings=quick).keys_for(spec)
    # the machine that collected legacy records may still extend them under their ids
    _legacy_record(tmp_path / "own", _this_cpu_as_legacy())
    own = Collector(tmp_path / "own", [("x86-64-v3", 1)], ["default"], host_tag="local",
                    shard_prefix="s", settings=quick)
    assert [k for *_, k in own.keys_for(spec)] == [f"{spec.model_id}|local/x86-64-v3/1t|default"]
    own.close()
    with pytest.raises(HardwareError, match="host-tag"):
        Collector(tmp_path, [("x86-64-v3", 1)], ["default"], host_tag="a/b", settings=quick)


def test_noise_is_only_remeasured_on_the_cpu_that_measured_the_records(tmp_path: Path) -> None:
    from gnnperf.collect.noise import remeasure

    other = {**_this_cpu_as_legacy(), "l2_kb": _this_cpu_as_legacy()["l2_kb"] * 2 + 512}
    _legacy_record(tmp_path / "shards", other)  # same model name, another CPU
    with pytest.raises(HardwareError, match="where they were collected"):
        remeasure(tmp_path, 1, progress=False)


def test_remeasure_skips_records_younger_than_the_minimum_age(tmp_path: Path) -> None:
    """A/A pairs minutes apart share the host's state: too young records wait."""
    import time as clock

    from gnnperf.collect.noise import remeasure

    with ShardWriter(tmp_path / "shards", "s") as writer:
        writer.append({"kind": "record", "key": "m|x/x86-64-v3/1t|default",
                       "hw_id": "x/x86-64-v3/1t", "hw": _this_cpu_as_legacy(),
                       "created_at": clock.time(), "whole": {"median_ms": 1.0},
                       "slowdown": 1.0})
    summary = remeasure(tmp_path, 5, progress=False, min_age_s=1800)
    assert (summary.done, summary.failed) == (0, 0)


def test_remeasure_chooses_records_of_the_current_protocol() -> None:
    """A CPU type with legacy records from before measurement v2 (here the Zen 3 guests)
    gets its floor from v2 records while it has any: the A/A of session 15 drew 13 legacy
    records of 16 because it preferred probed records only."""
    from gnnperf.collect.noise import choose_records

    old = 1.0  # created at the epoch: old enough for any minimum age
    legacy = [{"key": f"l{i}", "created_at": old, "slowdown": 1.0} for i in range(20)]
    v2 = [{"key": f"v{i}", "created_at": old, "slowdown": 1.0, "reference": {"gemm": {}}}
          for i in range(3)]
    chosen = choose_records(legacy + v2, 5, min_age_s=60)
    assert sorted(r["key"] for r in chosen) == ["v0", "v1", "v2"]
    # once they are re-measured, the older protocol's records are next
    again = choose_records(legacy + v2, 5, min_age_s=60, already={"v0", "v1", "v2"})
    assert len(again) == 5 and all(r["key"].startswith("l") for r in again)
    young = [{**v2[0], "key": "y", "created_at": 10 ** 12}]
    assert choose_records(young, 5, min_age_s=60) == []
