"""Which split runs a benchmark makes on a dataset, and which it cannot make there and why."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from torch_geometric.data import Data

from ..build_config import BuildConfig
from ..data import LatencyDataset, feature_names
from ..hardware import host_of
from .config import BenchConfig

#: report key → the :func:`gnnperf.data.split_indices` kind it runs
SPLIT_KINDS = {"random": "random", "leave_family_out": "leave-family-out",
               "leave_cpu_out": "leave-cpu-out", "real_architectures": "real-architectures"}


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
    store = ds._data
    v2 = np.array([bool(v) for v in store.v2])
    families = np.array([str(f) for f in store.family])
    hosts = np.array([host_of(str(h)) for h in store.hw_id])
    generated = np.array([not f.startswith("hf-") for f in families])
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
    if (v2 & ~generated).any():
        runs += [SplitRun("real_architectures", None, s) for s in range(cfg.seeds)]
    else:
        skipped["real_architectures"] = "no hf-* record measured under v2"
    return runs, skipped


def build_kind(build: str) -> str:
    """``default``, ``sampled`` or ``tuned``: what the report breaks each split down by."""
    return BuildConfig.parse(build).kind


_LOG_FLOPS = feature_names().index("log_flops")


def graph_gflop(graph: Data) -> float:
    return float(np.expm1(graph.x[:, _LOG_FLOPS].double().numpy()).sum() / 1e9)


def calibration_positions(test: Sequence[Data], shots: int) -> list[int]:
    """The held-out CPU's test models that play ``gnnperf calibrate``'s: ``sampled:0``
    builds at the hardware config with the most threads, one generated family at a time
    (in name order), the family's smallest model first, ``shots`` of them."""
    rows = [(i, g) for i, g in enumerate(test)
            if str(g.build) == "sampled:0" and not str(g.family).startswith("hf-")]
    if not rows:
        return []
    threads = max(int(g.threads) for _, g in rows)
    by_family: dict[str, list[tuple[float, int]]] = {}
    for i, g in rows:
        if int(g.threads) == threads:
            by_family.setdefault(str(g.family), []).append((graph_gflop(g), i))
    queues = [sorted(v) for _, v in sorted(by_family.items())]
    chosen: list[int] = []
    while len(chosen) < shots and any(queues):
        for queue in queues:
            if queue and len(chosen) < shots:
                chosen.append(queue.pop(0)[1])
    return chosen
