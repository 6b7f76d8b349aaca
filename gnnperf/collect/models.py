"""The collector: zoo specs → lowered, compiled, measured records in dataset shards.

For each model it exports ONNX once, imports it once, then per ISA and build
configuration lowers, extracts the kernel graph and compiles once, and measures
that one library at every requested thread count (a long-lived worker per
thread count). Every (model, hardware, build) key becomes one ``record`` line,
or one ``failure`` line with its reason; keys already in the output folder are
skipped, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import socket
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from gnnperf import __version__, zoo
from gnnperf.errors import GnnperfError, HardwareError, one_line
from gnnperf.features import extract_graph, extract_onnx_graph
from gnnperf.frontend import import_to_relax, load_onnx
from gnnperf.hardware.cpu_identity import CpuSignature, signature_of_hw
from gnnperf.hardware.spec import HardwareSpec
from gnnperf.lowering.build_config import BuildConfig
from gnnperf.lowering.pipeline import compile_to_files, lower
from gnnperf.measure import (
    MeasureSettings,
    WorkerPool,
    make_inputs,
    measure_library,
    measure_remote,
    reference_library,
    wait_for_quiet,
)
from gnnperf.store.folder import DatasetFolder
from gnnperf.store.lines import RecordLine
from gnnperf.store.shards import (
    ShardWriter,
    content_id,
    is_probed,
    is_v2,
    iter_lines,
    latest_records,
    structural_id,
)


def parse_hw_list(text: str) -> list[tuple[str, int]]:
    """``x86-64-v3:2,x86-64-v2:1`` → [("x86-64-v3", 2), ("x86-64-v2", 1)]."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        isa, sep, threads = item.rpartition(":")
        if not sep or not threads.isdigit():
            raise HardwareError(f"--hw wants ISA:THREADS pairs like x86-64-v3:2, got '{item}'")
        out.append((isa, int(threads)))
    if not out:
        raise HardwareError("--hw lists no ISA:THREADS pair")
    return out


def record_key(model_id: str, hw_id: str, build: str) -> str:
    return f"{model_id}|{hw_id}|{build}"


def is_noisy(record: RecordLine, settings: MeasureSettings | None = None) -> bool:
    """A record worth measuring again: taken before the speed probe or measurement v2
    existed (no machine state beside it), or while other processes loaded the machine,
    or while the host stayed slowed down.

    The slowdown limit is the one the record was collected under (``--max-slowdown``),
    because a host whose probe never settles near its best needs a looser one.
    """
    s = settings or MeasureSettings()
    max_slowdown = float(record.get("settings", {}).get("max_slowdown", s.max_slowdown))
    return (not is_probed(record) or not is_v2(record)
            or float(record.get("slowdown") or 0.0) > max_slowdown
            or float(record.get("other_load", 0.0)) > s.max_other_load
            or float(record["whole"].get("cv", 0.0)) > s.max_cv)


def done_keys(root: str | os.PathLike[str], redo_noisy: bool = False,
              retry_failed: bool = False,
              records: Sequence[RecordLine] | None = None) -> set[str]:
    """Keys that already have a record, a failure or a re-measurement under ``root``.

    With ``redo_noisy``, a key whose newest record :func:`is_noisy` does not count, so
    the collector measures it again (the newer record supersedes the older). With
    ``retry_failed``, neither do failures other than ``budget`` skips (a compile error
    fixed since, a timeout on a busy host). ``records`` saves reading the newest records
    of ``root`` again when the caller has them.
    """
    if not Path(root).exists():
        return set()
    done = {obj["key"] for obj in iter_lines(root, kinds=("failure", "remeasure"))
            if not (retry_failed and obj["kind"] == "failure" and obj.get("stage") != "budget")}
    if records is None:
        records = latest_records(root)
    done |= {r["key"] for r in records if not (redo_noisy and is_noisy(r))}
    return done


def cpus_by_hw_id(records: Iterable[RecordLine]) -> dict[str, set[CpuSignature]]:
    """The CPU signatures that the records of each hardware id were measured on."""
    out: dict[str, set[CpuSignature]] = {}
    for rec in records:
        out.setdefault(rec["hw_id"], set()).add(signature_of_hw(rec["hw"]))
    return out


def check_same_machine(spec: HardwareSpec, known: dict[str, set[CpuSignature]]) -> None:
    """Refuse to add records of another CPU under a hardware id that names this one.

    Why: a key is ``model|hw_id|build``. Ids derived from the CPU signature cannot
    collide, but ids from before signatures (``local/…``, a ``--host-tag``) can: a
    session on another machine would skip the keys done elsewhere and file its own
    labels under the same ids, mixing two machines in one hardware configuration.
    """
    mine = spec.cpu_signature
    others = [sig for sig in known.get(spec.hw_id, set()) if not sig.matches(mine)]
    if others:
        raise HardwareError(
            f"the dataset's {spec.hw_id} records come from CPU {others[0].id} "
            f"('{others[0].model_name}'), but this machine is {mine.id} "
            f"('{mine.model_name}'); collect without --host-tag, under this CPU's own ids")


def package_versions() -> dict[str, str]:
    import numpy
    import onnx
    import torch
    import tvm

    return {
        "gnnperf": __version__,
        "tvm": tvm.__version__,
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    }


def seed_counts(families: Sequence[str], count: int | Mapping[str, int]) -> Mapping[str, int]:
    """Seeds to measure of each family: ``count`` of every one, or a plan's own counts."""
    return count if isinstance(count, Mapping) else dict.fromkeys(families, count)


def interleaved_specs(families: Sequence[str], count: int | Mapping[str, int],
                      start_seed: int = 0) -> Iterator[zoo.ModelSpec]:
    """Round-robin over families so that any prefix of a run covers all of them;
    ``count`` seeds of each, or ``count[family]`` (a sweep plan)."""
    counts = seed_counts(families, count)
    for seed in range(start_seed, start_seed + max(counts.values(), default=0)):
        for family in families:
            if seed < start_seed + counts[family]:
                yield zoo.sample_spec(family, seed)


@dataclass
class CollectSummary:
    done: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def all_failed(self) -> bool:
        """Nothing was measured and something failed for a reason other than the budget."""
        return self.done == 0 and self.failed > self.failures.get("budget", 0)

    def line(self) -> str:
        reasons = ", ".join(f"{k}: {v}" for k, v in self.failures.most_common())
        return (
            f"done {self.done}, failed {self.failed}, skipped {self.skipped} "
            f"in {self.seconds / 60:.1f} min" + (f" (failures: {reasons})" if reasons else "")
        )


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {one_line(exc)}"


class Collector:
    """Runs one collection; see :func:`collect`."""

    def __init__(
        self,
        out: str | os.PathLike[str],
        hw: Sequence[tuple[str, int]],
        builds: Sequence[str],
        *,
        rpc: str | None = None,
        rpc_hw: HardwareSpec | None = None,
        per_kernel: bool = True,
        settings: MeasureSettings | None = None,
        max_default_gflops: float = 0.4,
        shard_prefix: str | None = None,
        redo_noisy: bool = False,
        retry_failed: bool = False,
        host_tag: str | None = None,
        compile_timeout_s: float | None = 600.0,
        database: Any = None,
        record_extra: dict[str, Any] | None = None,
    ) -> None:
        self.out = Path(out)
        #: the MetaSchedule database a searched build takes its schedules from, and what
        #: every record says of it (``record_extra``)
        self.database = database
        self.record_extra = record_extra or {}
        if host_tag is not None and not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", host_tag):
            raise HardwareError(f"--host-tag wants lower-case letters, digits, '-' or '_', "
                                f"got '{host_tag}'")
        self.host_tag = host_tag
        self.builds = [BuildConfig.parse(b) for b in builds]
        searched = [str(b) for b in self.builds if b.searched]
        if searched and database is None:
            # lowered without its schedules, such a build would time unscheduled kernels
            raise GnnperfError(f"{', '.join(searched)} records are made by the collectors "
                               "that search the schedules: collect-kernels (best-of) and "
                               "collect-tuning (tuned:N)")
        self.rpc = rpc
        if rpc is not None and rpc_hw is None:
            raise HardwareError("collecting over RPC needs --rpc-hw SPEC.json describing the "
                                "board (write it with `gnnperf hw` on the board)")
        self.rpc_hw = rpc_hw
        self.per_kernel = per_kernel
        self.settings = settings or MeasureSettings(quiet_timeout_s=float("inf"))
        self.max_default_gflops = max_default_gflops
        self.compile_timeout_s = compile_timeout_s
        host = socket.gethostname().split(".")[0] or "host"
        self.writer = ShardWriter(self.out, shard_prefix or f"shard-{host}")
        records = latest_records(self.out) if self.out.exists() else []
        self.done = done_keys(self.out, redo_noisy=redo_noisy, retry_failed=retry_failed,
                              records=records)
        self.cpus = cpus_by_hw_id(records)
        self.graphs_written: set[str] = {
            obj["graph_id"] for obj in iter_lines(self.out, kinds=("graph", "onnx_graph"))
        } if self.out.exists() else set()
        self.isas: dict[str, list[int]] = {}
        for isa, threads in hw:
            self.isas.setdefault(isa, []).append(threads)
        self.hw_specs: dict[tuple[str, int], HardwareSpec] = {}
        self.workers = WorkerPool()
        self.versions = package_versions()

    # -- resources --------------------------------------------------------------------------
    def _hw(self, isa: str, threads: int) -> HardwareSpec:
        if (isa, threads) not in self.hw_specs:
            if self.rpc is None:
                timeout = self.settings.quiet_timeout_s
                wait_for_quiet(self.settings.max_other_load,
                               None if timeout == float("inf") else timeout)
                spec = HardwareSpec.local(isa, threads)
                # the machine part of the ids is the CPU signature's, so two CPUs never
                # share one (a --host-tag still overrides it, as before signatures)
                spec = dataclasses.replace(spec, host=self.host_tag or spec.cpu_id)
            else:
                assert self.rpc_hw is not None
                key = self.rpc.rsplit(":", 1)[-1]
                host = self.rpc_hw.cpu_id if self.rpc_hw.signature else f"rpc-{key}"
                spec = HardwareSpec.from_dict({**self.rpc_hw.to_dict(), "isa": isa,
                                               "threads": threads, "host": host})
            check_same_machine(spec, self.cpus)
            self.hw_specs[(isa, threads)] = spec
        return self.hw_specs[(isa, threads)]

    def _reference(self, isa: str, threads: int) -> Path:
        """The reference suite compiled for this machine at ``isa`` (cached on disk)."""
        return reference_library(self._hw(isa, threads))

    def close(self) -> None:
        self.workers.close()
        self.writer.close()

    # -- one model --------------------------------------------------------------------------
    def keys_for(self, spec: zoo.ModelSpec) -> list[tuple[str, int, BuildConfig, str]]:
        out = []
        for isa, threads_list in self.isas.items():
            for build in self.builds:
                for threads in threads_list:
                    hw_id = self._hw(isa, threads).hw_id
                    out.append((isa, threads, build, record_key(spec.model_id, hw_id, str(build))))
        return out

    def _fail(self, spec: zoo.ModelSpec, key: str, stage: str, reason: str) -> None:
        self.writer.append({"kind": "failure", "key": key, "model_id": spec.model_id,
                            "model": spec.to_dict(), "stage": stage, "reason": reason,
                            "created_at": time.time()})
        self.done.add(key)

    def run_model(self, spec: zoo.ModelSpec, summary: CollectSummary, bar: tqdm,
                  onnx_model: Any = None) -> None:
        """Measure ``spec``'s keys not yet done; ``onnx_model`` is its ONNX export when
        the caller has made it already (seconds for a large model, once per hardware
        config otherwise)."""
        keys = self.keys_for(spec)
        todo = [k for k in keys if k[3] not in self.done]
        summary.skipped += len(keys) - len(todo)
        bar.update(len(keys) - len(todo))
        if not todo:
            return
        try:
            if onnx_model is None:
                onnx_model = zoo.export_onnx(spec)
            sha = zoo.onnx_sha256(onnx_model)
            start = time.perf_counter()
            loaded = load_onnx(onnx_model)
            mod = import_to_relax(loaded)
            import_s = time.perf_counter() - start
            onnx_graph = extract_onnx_graph(loaded).to_dict()
            onnx_graph_id = structural_id(onnx_graph)
            if onnx_graph_id not in self.graphs_written:
                self.writer.append({"kind": "onnx_graph", "graph_id": onnx_graph_id,
                                    "model_id": spec.model_id, "graph": onnx_graph})
                self.graphs_written.add(onnx_graph_id)
        except Exception as exc:
            for _, _, _, key in todo:
                self._fail(spec, key, "import", _reason(exc))
            summary.failed += len(todo)
            summary.failures["import"] += len(todo)
            bar.update(len(todo))
            return
        arrays = make_inputs({k: v for k, v in spec.inputs.items()}, seed=spec.seed)
        groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for isa, threads, build, key in todo:
            groups.setdefault((isa, str(build)), []).append((threads, key))
        for (isa, build_text), items in groups.items():
            build = BuildConfig.parse(build_text)
            self._run_group(spec, sha, mod, import_s, arrays, isa, build, items, summary, bar,
                            onnx_graph_id)

    def _run_group(self, spec: zoo.ModelSpec, sha: str, mod: Any, import_s: float,
                   arrays: list[Any], isa: str, build: BuildConfig,
                   items: list[tuple[int, str]], summary: CollectSummary, bar: tqdm,
                   onnx_graph_id: str) -> None:
        stage = "lower"
        try:
            target = self._hw(isa, items[0][0]).target()
            lowered = lower(mod, target, build, self.database)
            graph = extract_graph(lowered)
            if build.kind == "default" and graph.total_flops > self.max_default_gflops * 1e9:
                reason = (f"budget: {graph.total_flops / 1e9:.2f} GFLOP exceeds "
                          f"--max-default-gflops {self.max_default_gflops}")
                for _, key in items:
                    self._fail(spec, key, "budget", reason)
                summary.failed += len(items)
                summary.failures["budget"] += len(items)
                bar.update(len(items))
                return
            stage = "compile"
            with tempfile.TemporaryDirectory(prefix="gnnperf-collect-") as tmp:
                kernels_lib = (Path(tmp) / "kernels.so"
                               if self.rpc and self.per_kernel else None)
                lib = compile_to_files(lowered, Path(tmp) / "model.so", kernels_lib,
                                       self.compile_timeout_s)
                graph_dict = graph.to_dict()
                graph_id = content_id(graph_dict)
                if graph_id not in self.graphs_written:
                    self.writer.append({"kind": "graph", "graph_id": graph_id,
                                        "graph": graph_dict})
                    self.graphs_written.add(graph_id)
                for threads, key in items:
                    stage = "measure"
                    try:
                        if self.rpc:
                            m = measure_remote(lib, arrays, self.rpc, kernels_path=kernels_lib,
                                               settings=self.settings)
                            if m.threads != threads:
                                raise GnnperfError(
                                    f"the RPC server runs {m.threads} threads, not {threads}; "
                                    "start one server per thread count (TVM_NUM_THREADS)")
                        else:
                            m = measure_library(lib, arrays, threads, per_kernel=self.per_kernel,
                                                settings=self.settings,
                                                worker=self.workers.get(threads),
                                                reference=self._reference(isa, threads))
                        if m.kernels is not None and [k.name for k in m.kernels] != [
                            n.name for n in graph.nodes
                        ]:
                            raise GnnperfError("executed kernels differ from the graph's nodes")
                    except GnnperfError as exc:
                        self._fail(spec, key, stage, _reason(exc))
                        summary.failed += 1
                        summary.failures[stage] += 1
                        bar.update(1)
                        continue
                    hw = self._hw(isa, threads)
                    self.writer.append({
                        "kind": "record",
                        "key": key,
                        "model_id": spec.model_id,
                        "model": spec.to_dict(),
                        "onnx_sha256": sha,
                        "hw_id": hw.hw_id,
                        "hw": hw.to_dict(),
                        "build": str(build),
                        "graph_id": graph_id,
                        "onnx_graph_id": onnx_graph_id,
                        "whole": m.whole.label(),
                        "kernels_ms": [round(k.median_ms, 6) for k in m.kernels]
                        if m.kernels is not None else None,
                        "kernels_cv": [round(k.cv, 4) for k in m.kernels]
                        if m.kernels is not None else None,
                        "kernel_sum_ms": m.kernel_sum_ms,
                        "other_load": m.other_load,
                        "slowdown": m.slowdown,
                        "slow_tries": m.slow_tries,
                        "reference": m.reference,
                        "kernels_slowdown": max((k.slowdown or 1.0 for k in m.kernels),
                                                default=None)
                        if m.kernels is not None else None,
                        "attempts": m.attempts,
                        "device": m.device,
                        "settings": m.settings,
                        "timings": {"import_s": import_s, **lowered.timings,
                                    "measure_s": m.duration_s},
                        "versions": self.versions,
                        "created_at": time.time(),
                        **self.record_extra,
                    })
                    self.done.add(key)
                    summary.done += 1
                    bar.update(1)
        except Exception as exc:
            remaining = [key for _, key in items if key not in self.done]
            for key in remaining:
                self._fail(spec, key, stage, _reason(exc))
            summary.failed += len(remaining)
            summary.failures[stage] += len(remaining)
            bar.update(len(remaining))
            if os.environ.get("GNNPERF_DEBUG"):
                traceback.print_exc()

    def remeasure_group(self, recs: list[RecordLine], isa: str, build: BuildConfig,
                        summary: CollectSummary, database: Any = None) -> None:
        """Measure again, whole model only, records sharing one (model, ISA, build) and,
        for a searched build, one hardware id, whose MetaSchedule database ``database`` is
        (the fastest schedule of a workload never changes once its runs are stored, so the
        build made again is the one measured the first time)."""
        spec = zoo.ModelSpec.from_dict(recs[0]["model"])
        stage = "import"
        measured: set[str] = set()
        try:
            onnx_model = zoo.export_onnx(spec)
            if zoo.onnx_sha256(onnx_model) != recs[0]["onnx_sha256"]:
                raise GnnperfError("regenerated ONNX differs from the recorded one (spec drift)")
            mod = import_to_relax(load_onnx(onnx_model))
            stage = "compile"
            target = HardwareSpec.from_dict(recs[0]["hw"]).target()
            if build.searched and database is None:
                raise GnnperfError(f"a {build} record is re-measured with its hardware's "
                                   "database of searched schedules (none was given)")
            lowered = lower(mod, target, build, database)
            arrays = make_inputs(dict(spec.inputs), seed=spec.seed)
            with tempfile.TemporaryDirectory(prefix="gnnperf-remeasure-") as tmp:
                lib = compile_to_files(lowered, Path(tmp) / "model.so")
                for rec in recs:
                    stage = "measure"
                    threads = int(rec["hw"]["threads"])
                    m = measure_library(lib, arrays, threads, settings=self.settings,
                                        worker=self.workers.get(threads),
                                        reference=self._reference(isa, threads))
                    self.writer.append({
                        "kind": "remeasure", "key": rec["key"], "model_id": rec["model_id"],
                        "whole": m.whole.label(),
                        "scheduled_kernels": len(lowered.traces),
                        "other_load": m.other_load, "attempts": m.attempts,
                        "slowdown": m.slowdown, "slow_tries": m.slow_tries,
                        "reference": m.reference,
                        "first_created_at": rec["created_at"], "created_at": time.time(),
                    })
                    measured.add(rec["key"])
                    summary.done += 1
        except Exception as exc:
            rest = [rec for rec in recs if rec["key"] not in measured]
            for rec in rest:
                self._fail(spec, rec["key"], stage, _reason(exc))
            summary.failed += len(rest)
            summary.failures[stage] += len(rest)


def collect(
    out: str | os.PathLike[str],
    families: Sequence[str],
    count: int | Mapping[str, int],
    hw: Sequence[tuple[str, int]],
    builds: Sequence[str],
    *,
    start_seed: int = 0,
    rpc: str | None = None,
    rpc_hw: HardwareSpec | None = None,
    per_kernel: bool = True,
    settings: MeasureSettings | None = None,
    max_default_gflops: float = 0.4,
    progress: bool = True,
    redo_noisy: bool = False,
    retry_failed: bool = False,
    host_tag: str | None = None,
    compile_timeout_s: float | None = 600.0,
) -> CollectSummary:
    """Measure ``count`` seeds of every family (``count[family]`` for a plan) on every
    (ISA, threads) and build.

    ``out`` is a dataset folder (:class:`DatasetFolder`): records go to its ``shards/``.
    A model whose compilation outlasts ``compile_timeout_s`` is recorded as a ``compile``
    failure. ``host_tag`` replaces ``local`` in the hardware ids of this machine's records (a
    second machine must not share ids with the one that collected the dataset so far).
    """
    for family in families:
        if family not in zoo.KNOWN_FAMILIES:
            raise GnnperfError(f"unknown model family '{family}'")
    summary = CollectSummary()
    start = time.time()
    collector = Collector(DatasetFolder.resolve(out).shards, hw, builds, rpc=rpc,
                          rpc_hw=rpc_hw, per_kernel=per_kernel, settings=settings,
                          max_default_gflops=max_default_gflops, redo_noisy=redo_noisy,
                          retry_failed=retry_failed, host_tag=host_tag,
                          compile_timeout_s=compile_timeout_s)
    counts = seed_counts(families, count)
    total = sum(counts[f] for f in families) * len(hw) * len(collector.builds)
    try:
        with tqdm(total=total, unit="rec", disable=not progress, smoothing=0.05) as bar:
            for spec in interleaved_specs(families, count, start_seed):
                collector.run_model(spec, summary, bar)
                bar.set_postfix(done=summary.done, failed=summary.failed, refresh=False)
    finally:
        collector.close()
        summary.seconds = time.time() - start
    return summary
