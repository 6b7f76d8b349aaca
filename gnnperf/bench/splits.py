"""Which split runs a benchmark makes on a dataset, and which it cannot make there and why."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch_geometric.data import Data

from gnnperf import zoo
from gnnperf.bench.config import BenchConfig
from gnnperf.calibrate.selection import Candidate, spread_by_size
from gnnperf.calibrate.store import CALIBRATION_BUILDS, MAX_CALIBRATION_GFLOP
from gnnperf.data import LatencyDataset, feature_names
from gnnperf.data.splits import architecture_fold
from gnnperf.hardware.spec import host_of
from gnnperf.lowering.build_config import BuildConfig

#: report key → the :func:`gnnperf.data.split_indices` kind it runs
SPLIT_KINDS = {"random": "random", "leave_family_out": "leave-family-out",
               "leave_cpu_out": "leave-cpu-out", "real_architectures": "real-architectures",
               "held_out_architectures": "leave-architecture-out"}
#: folds of the held-out-architecture split: each holds out a fifth of the model types
ARCHITECTURE_FOLDS = 5


@dataclass(frozen=True)
class SplitRun:
    """One training-and-scoring of every method: a split, its held-out part and a seed."""

    key: str
    holdout: str | None
    seed: int

    @property
    def kind(self) -> str:
        return SPLIT_KINDS[self.key]

    @property
    def name(self) -> str:
        """A file stem that names the run (holdouts are family names or CPU ids)."""
        held = "" if self.holdout is None else "-" + re.sub(r"[^A-Za-z0-9_.]+", "_",
                                                            self.holdout)
        return f"{self.key}{held}-seed{self.seed}"


def plan_runs(ds: LatencyDataset, cfg: BenchConfig
              ) -> tuple[list[SplitRun], dict[str, str]]:
    """Every run of a full benchmark on ``ds``, and the splits it cannot run, with why.

    Only records measured under v2 are tested on, so a family or CPU is held out only
    where it has some; a CPU is held out only when another CPU's records remain to
    train on (legacy ones count: the held-out CPU never appears in training).
    """
    ids = ds.record_ids()
    v2 = np.array([bool(d.v2) for d in ids])
    families = np.array([str(d.family) for d in ids])
    hosts = np.array([host_of(str(d.hw_id)) for d in ids])
    generated = np.array([f in zoo.FAMILIES for f in families])
    runs: list[SplitRun] = []
    skipped: dict[str, str] = {}
    if v2.any():
        runs += [SplitRun("random", None, s) for s in range(cfg.seeds)]
    else:
        skipped["random"] = "no record measured under v2 to test on"
    fams = sorted(set(families[v2 & generated]))[: cfg.families]
    runs += [SplitRun("leave_family_out", f, s) for f in fams for s in range(cfg.holdout_seeds)]
    if not fams:
        skipped["leave_family_out"] = "no generated family has v2 records"
    all_hosts = sorted(set(hosts))
    cpus = sorted(set(hosts[v2]))[: cfg.cpus]
    if len(all_hosts) < 2:
        skipped["leave_cpu_out"] = (f"the dataset holds one CPU ({all_hosts[0]}): nothing to "
                                    "train on when it is held out")
        cpus = []
    runs += [SplitRun("leave_cpu_out", c, s) for c in cpus for s in range(cfg.holdout_seeds)]
    hf = np.array([f.startswith("hf-") for f in families])
    if (v2 & hf).any():
        runs += [SplitRun("real_architectures", None, s) for s in range(cfg.seeds)]
    else:
        skipped["real_architectures"] = "no hf-* record measured under v2"
    folds = {architecture_fold(f, ARCHITECTURE_FOLDS) for f in set(families[v2])} - {None}
    if len(folds) == ARCHITECTURE_FOLDS:
        runs += [SplitRun("held_out_architectures", f"{k}/{ARCHITECTURE_FOLDS}", 0)
                 for k in range(ARCHITECTURE_FOLDS)]
    else:
        skipped["held_out_architectures"] = (
            f"v2 records of real architectures fill {len(folds)} of the "
            f"{ARCHITECTURE_FOLDS} model-type folds")
    return runs, skipped


def build_kind(build: str) -> str:
    """``default``, ``sampled``, ``best-of`` or ``tuned``: what the report breaks each split
    down by."""
    return BuildConfig.parse(build).kind


_LOG_FLOPS = feature_names().index("log_flops")


def graph_gflop(graph: Data) -> float:
    return float(np.expm1(graph.x[:, _LOG_FLOPS].double().numpy()).sum() / 1e9)


def record_key_parts(key: str) -> tuple[str, str, int, str]:
    """(model id, ``cpu/isa``, thread count, build) of a record key
    (``model|cpu/isa/Nt|build``, as :func:`gnnperf.collect.models.record_key` writes it)."""
    model, hw_id, build = key.split("|")
    machine, threads = hw_id.rsplit("/", 1)
    return model, machine, int(threads.rstrip("t")), build


def record_build_threads(key: str) -> tuple[str, int]:
    """The build and thread count a record key names."""
    _, _, threads, build = record_key_parts(key)
    return build, threads


def calibration_positions(test: dict[str, list[Any]], shots: int) -> list[int]:
    """The held-out CPU's test records that play ``gnnperf calibrate``'s: ``shots`` models of
    the generated families of at most its size cap
    (:data:`~gnnperf.calibrate.store.MAX_CALIBRATION_GFLOP`) with a ``sampled:0`` record
    at the most threads, spread over their sizes as
    :func:`gnnperf.calibrate.run.calibration_models` picks them
    (:func:`~gnnperf.calibrate.selection.spread_by_size`), among the models measured in
    every calibration cell the held-out CPU has where there are enough of those; then every
    record of those models in a calibration build
    (:data:`~gnnperf.calibrate.store.CALIBRATION_BUILDS`), at any thread count."""
    configs = [record_build_threads(k) for k in test["key"]]
    calib = [i for i, (build, _) in enumerate(configs)
             if build in CALIBRATION_BUILDS and not str(test["family"][i]).startswith("hf-")]
    anchors = [i for i in calib if configs[i][0] == "sampled:0"
               and float(test["gflop"][i]) <= MAX_CALIBRATION_GFLOP]
    if not anchors or shots < 1:
        return []
    threads = max(configs[i][1] for i in anchors)
    cells: dict[str, set[tuple[str, int]]] = {}
    for i in calib:
        cells.setdefault(str(test["model_id"][i]), set()).add(configs[i])
    candidates = {str(test["model_id"][i]): Candidate(
        str(test["model_id"][i]), str(test["family"][i]), float(test["gflop"][i]))
        for i in anchors if configs[i][1] == threads}
    every_cell = set().union(*cells.values())
    complete = [c for m, c in candidates.items() if cells[m] == every_cell]
    pool = complete if len(complete) >= shots else list(candidates.values())
    models = set(spread_by_size(pool, min(shots, len(pool))))
    return [i for i in calib if str(test["model_id"][i]) in models]
