"""Traces for graphs stored before lowering kept them: lowered again, checked, joined."""

from __future__ import annotations

from pathlib import Path

from gnnperf.cli import main
from gnnperf.collect.graph_traces import add_graph_traces
from gnnperf.data.dataset import _kernel_graphs
from gnnperf.store.shards import ShardWriter, iter_lines


def _without_traces(src: Path, dst: Path, tamper: int = 0) -> dict[str, dict]:
    """A copy of ``src``'s shards whose graphs hold no traces, as graphs collected before
    lowering kept them; ``tamper`` graphs get a kernel that lowering will not give again.
    Returns the original graphs by id."""
    original = {}
    with ShardWriter(dst / "shards", "old") as writer:
        for obj in iter_lines(src / "shards"):
            obj = {k: v for k, v in obj.items() if k not in ("crc", "schema")}
            if obj["kind"] == "graph":
                original[obj["graph_id"]] = obj["graph"]
                nodes = [{k: v for k, v in n.items() if k != "schedule_trace"}
                         for n in obj["graph"]["nodes"]]
                if tamper:
                    nodes[0]["struct_hash"] = "0" * 16
                    tamper -= 1
                obj = {**obj, "graph": {**obj["graph"], "nodes": nodes}}
            writer.append(obj)
    return original


def test_old_graphs_get_the_traces_lowering_gives_now(small_root: Path, tmp_path: Path,
                                                      capsys) -> None:
    root = tmp_path / "old"
    original = _without_traces(small_root, root, tamper=1)
    assert any(n.get("schedule_trace") for g in original.values() for n in g["nodes"])
    before = _kernel_graphs(root / "shards")[0]
    assert not any(n.get("schedule_trace") for g in before.values() for n in g["nodes"])

    summary = add_graph_traces(root, progress=False)
    assert summary.failed == 1 and summary.done == len(original) - 1
    (failure,) = iter_lines(root / "shards", kinds=("graph_traces_failure",))
    assert "the kernels differ" in failure["reason"]
    after = _kernel_graphs(root / "shards")[0]
    for gid, graph in after.items():
        if gid == failure["graph_id"]:
            assert not any(n.get("schedule_trace") for n in graph["nodes"])
            continue
        assert [n.get("schedule_trace") for n in graph["nodes"]] == [
            n.get("schedule_trace") for n in original[gid]["nodes"]]
    # resumable: nothing left to do, from the command line too
    assert main(["dataset", "traces", "--root", str(root)]) == 0
    assert "done 0, failed 0" in capsys.readouterr().out
