"""The measured dataset as PyTorch Geometric graphs, plus its statistics and splits.

Shards (``datasets/shards/*.jsonl.gz``) hold graphs and labels; re-measurements for
the noise floor live in ``datasets/noise/`` (:mod:`gnnperf.dataset_folder` says how a
folder is laid out). :class:`LatencyDataset` turns every
record into a ``Data`` object whose node features are the kernel features followed
by the hardware features (the hardware is on every node), with ``y`` the log of the
whole-model median latency in ms and ``y_kernel`` the log per-kernel latencies.
Features are stored raw; normalisation statistics are fitted on a training split
only (:class:`FeatureScaler`).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset

from .atomic import atomic_path
from .build_config import BUILD_KINDS, BuildConfig
from .cpu_identity import signature_of_hw
from .dataset_folder import DatasetFolder, default_root
from .errors import DatasetError, one_line
from .features import KernelGraph, node_feature_names, node_feature_vector
from .graph_traces import join_traces
from .hardware import FEATURE_NAMES as HW_FEATURE_NAMES
from .hardware import HardwareSpec, host_of
from .kernel_model.dataset import candidate_rows, kernel_input_vector, tuned_candidates
from .measure.reference import aa_floor
from .shards import SCHEMA_VERSION, is_probed, is_v2, iter_lines, latest_records, shard_paths
from .standardize import column_mean_std, standardize

#: Bump when the fields of the encoded ``Data`` items change (invalidates processed caches).
_DATA_LAYOUT = 7

__all__ = ["DatasetFolder", "LatencyDataset", "dataset_stats", "default_root", "fingerprint",
           "graph_to_data", "split_indices"]


#: One-hot build kind on every node. The kernel graph also shows the build in its loop
#: features; the unfused operator graph (an ablation) has no other way to know it.
BUILD_FEATURE_NAMES = [f"build_{kind}" for kind in BUILD_KINDS]


def feature_names() -> list[str]:
    """Node columns: kernel features, build kind, then hardware (hardware always last)."""
    return node_feature_names() + BUILD_FEATURE_NAMES + [f"hw_{n}" for n in HW_FEATURE_NAMES]


def build_feature_vector(build: str) -> list[float]:
    kind = BuildConfig.parse(build).kind
    return [1.0 if kind == k else 0.0 for k in BUILD_KINDS]


def graph_to_data(graph: KernelGraph, hw: HardwareSpec, build: str | None = None) -> Data:
    """Node features (kernel ⊕ build ⊕ hardware), dataflow edges with log bytes; no labels.

    ``build`` defaults to the graph's own (operator graphs carry none and must pass it).
    """
    n = len(graph.nodes)
    if n == 0:
        raise DatasetError("a kernel graph without kernels cannot be encoded")
    shared = build_feature_vector(build or graph.build) + hw.feature_vector()
    x = torch.tensor([node_feature_vector(node, n) + shared for node in graph.nodes],
                     dtype=torch.float32)
    if graph.edges:
        edge_index = torch.tensor([[a for a, _, _ in graph.edges], [b for _, b, _ in graph.edges]],
                                  dtype=torch.long)
        edge_attr = torch.tensor([[math.log1p(c)] for _, _, c in graph.edges],
                                 dtype=torch.float32)
    else:
        edge_index = torch.zeros((2, 0), dtype=torch.long)
        edge_attr = torch.zeros((0, 1), dtype=torch.float32)
    kind = BuildConfig.parse(build or graph.build).kind
    # the kernel cost model's inputs: each kernel described as the kernel dataset describes
    # a measured schedule (tir kernels only; builtins are data movement it never saw)
    x_kernel = torch.tensor([kernel_input_vector(node, node.schedule_trace, hw)
                             for node in graph.nodes], dtype=torch.float32)
    # a tuned kernel's candidate schedules, each row naming its kernel (PyG shifts an
    # ``*_index`` attribute by the nodes before it when it batches graphs)
    candidates = [(node.index, row) for node in graph.nodes if kind == "tuned"
                  for row in candidate_rows(node, hw)]
    x_candidates = torch.tensor([row for _, row in candidates], dtype=torch.float32
                                ).reshape(len(candidates), x_kernel.shape[1])
    return Data(x=x, edge_index=edge_index, edge_attr=edge_attr, num_nodes=n,
                x_kernel=x_kernel, x_candidates=x_candidates,
                candidates_node_index=torch.tensor([i for i, _ in candidates],
                                                   dtype=torch.long),
                kernel_model_mask=torch.tensor([node.kind == "tir" for node in graph.nodes]),
                kernel_tuned=torch.full((n,), kind == "tuned", dtype=torch.bool))


GRAPH_KINDS = ("kernel", "onnx")


def _records_and_graphs(shards_dir: Path, kind: str = "kernel"
                        ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records, and the graphs each one is encoded from, keyed by graph id (operator graphs
    also by the model id of the record that first wrote them, for older records)."""
    graphs: dict[str, Any] = {}
    traces: list[dict[str, Any]] = []
    kinds = ("graph", "graph_traces") if kind == "kernel" else ("onnx_graph",)
    for obj in iter_lines(shards_dir, kinds=kinds):
        if obj["kind"] == "graph_traces":
            traces.append(obj)
            continue
        graphs[obj["graph_id"]] = obj["graph"]
        if kind == "onnx":  # records from before ``onnx_graph_id`` name their model instead
            graphs.setdefault(obj["model_id"], obj["graph"])
    join_traces(graphs, traces)
    return latest_records(shards_dir), graphs


def _regenerate_onnx_graph(record: dict[str, Any]) -> dict[str, Any]:
    """Operator graph of a record collected before operator graphs were stored."""
    from . import zoo
    from .features import extract_onnx_graph
    from .onnx_import import load_onnx

    spec = zoo.ModelSpec.from_dict(record["model"])
    return extract_onnx_graph(load_onnx(zoo.export_onnx(spec))).to_dict()


def fingerprint(root: str | os.PathLike[str] | DatasetFolder | None = None) -> str:
    """Content hash of the record and kernel shards of a dataset folder and of the feature
    layout (kernel shards: a ``tuned`` record's kernels read their candidates there).

    Re-measurements for the noise floor (``noise/``) do not change what is trained on,
    so they leave the fingerprint (and processed caches, checkpoints' match) alone.
    """
    folder = DatasetFolder.resolve(root)
    h = hashlib.sha256(
        f"schema{SCHEMA_VERSION}|layout{_DATA_LAYOUT}|{','.join(feature_names())}".encode())
    for path in shard_paths(folder.shards):
        # named as in the standard layout, so a flat folder hashes like its standard twin
        h.update(f"shards/{path.name}".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    if folder.kernels.is_dir():  # a tuned record's kernels read their candidates there
        for path in shard_paths(folder.kernels):
            h.update(f"kernels/{path.name}".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def split_group(record: dict[str, Any]) -> str:
    """What keeps records together across a split: the model's operator graph.

    The graph id ignores weights, so two seeds that draw the same shape (the ``hf-*``
    families have few shapes) share a group; the ONNX hash would tell them apart and
    let one architecture leak from training into test.
    """
    return str(record.get("onnx_graph_id") or record.get("onnx_sha256") or record["model_id"])


def _existing(root: str | os.PathLike[str] | DatasetFolder | None) -> DatasetFolder:
    """A dataset folder that holds shards, or a one-line :class:`DatasetError`."""
    folder = DatasetFolder.resolve(root)
    if not folder.root.exists():
        raise DatasetError(f"dataset folder {folder.root} does not exist")
    if not folder.has_shards():
        raise DatasetError(f"no dataset shards in {folder.root} (looked in {folder.shards}); "
                           "write some with `gnnperf collect --out DIR`")
    return folder


def record_hardware(record: dict[str, Any]) -> HardwareSpec:
    """The record's hardware as it was while the label was taken: under measurement v2,
    with the medians of the reference kernels timed beside the label."""
    hw = HardwareSpec.from_dict(record["hw"])
    if is_v2(record):
        hw = replace(hw, reference_ms={k: float(v["median_ms"])
                                       for k, v in record["reference"].items()})
    return hw


def record_to_data(record: dict[str, Any], graph: KernelGraph) -> Data:
    data = graph_to_data(graph, record_hardware(record), record["build"])
    n = data.num_nodes
    kernels = record.get("kernels_ms")
    if kernels is not None and len(kernels) == n:
        y_kernel = torch.tensor([math.log(max(k, 1e-6)) for k in kernels], dtype=torch.float32)
        mask = torch.ones(n, dtype=torch.bool)
    else:
        y_kernel = torch.zeros(n, dtype=torch.float32)
        mask = torch.zeros(n, dtype=torch.bool)
    data.y = torch.tensor([math.log(record["whole"]["median_ms"])], dtype=torch.float32)
    data.y_kernel = y_kernel
    data.kernel_mask = mask
    data.kernel_sum_ms = torch.tensor([record.get("kernel_sum_ms") or float("nan")],
                                      dtype=torch.float32)
    data.cv = torch.tensor([record["whole"].get("cv", 0.0)], dtype=torch.float32)
    data.threads = torch.tensor([int(record["hw"]["threads"])], dtype=torch.long)
    # pre-v2 labels (no machine state beside them) are never tested on, and weigh less
    data.v2 = torch.tensor([is_v2(record)], dtype=torch.bool)
    data.model_id = record["model_id"]
    data.group = split_group(record)
    data.family = record["model"]["family"]
    data.hw_id = record["hw_id"]
    data.build = record["build"]
    data.key = record["key"]
    return data


class LatencyDataset(InMemoryDataset):
    """PyG dataset over the shards of a dataset folder (default: the shipped datasets/).

    ``root`` is any spelling :meth:`DatasetFolder.resolve` accepts.

    ``graph="kernel"`` (default) encodes the TVM-lowered kernel graph of each record;
    ``graph="onnx"`` the unfused ONNX operator graph of the same records, in the same
    order and with the same labels (no per-kernel labels), for the ablation.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, transform: Any = None,
                 force_reload: bool = False, graph: str = "kernel") -> None:
        folder = _existing(root)
        if graph not in GRAPH_KINDS:
            raise DatasetError(f"unknown graph kind '{graph}'; use one of {GRAPH_KINDS}")
        self.graph_kind = graph
        self.folder = folder
        self._fingerprint = fingerprint(folder)
        # PyG's "Processing..." would be a second line beside an error's one
        super().__init__(str(folder.root), transform, force_reload=force_reload, log=False)
        try:
            self.load(self.processed_paths[0])
        except Exception:  # an unreadable cache (another torch, a disk error): rebuild it
            Path(self.processed_paths[0]).unlink(missing_ok=True)
            self.process()
            try:
                self.load(self.processed_paths[0])
            except Exception as exc:
                raise DatasetError(f"cannot read the processed dataset cache "
                                   f"{self.processed_paths[0]}: {one_line(exc)}") from None

    @property
    def raw_dir(self) -> str:
        return str(self.folder.shards)

    @property
    def processed_dir(self) -> str:
        return str(self.folder.processed)

    @property
    def raw_file_names(self) -> list[str]:
        return [str(p.relative_to(self.raw_dir)) for p in shard_paths(self.raw_dir)]

    @property
    def processed_file_names(self) -> list[str]:
        suffix = "" if self.graph_kind == "kernel" else f"-{self.graph_kind}"
        return [f"data-{self._fingerprint}{suffix}.pt"]

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def download(self) -> None:
        raise DatasetError(f"no dataset shards under {self.raw_dir}")

    def process(self) -> None:
        records, graphs = _records_and_graphs(Path(self.raw_dir), self.graph_kind)
        cache: dict[str, KernelGraph] = {}
        candidates: dict[tuple[str, str], list[dict[str, Any]]] | None = None
        items = []
        for rec in records:
            gid = (rec["graph_id"] if self.graph_kind == "kernel"
                   else rec.get("onnx_graph_id") or rec["model_id"])
            if gid not in graphs:
                if self.graph_kind == "kernel":
                    continue
                graphs[gid] = _regenerate_onnx_graph(rec)
            if gid not in cache:
                cache[gid] = KernelGraph.from_dict(graphs[gid])
            graph = cache[gid]
            if self.graph_kind == "kernel" and BuildConfig.parse(rec["build"]).kind == "tuned":
                if candidates is None:
                    candidates = tuned_candidates(self.folder)
                # each kernel reads the schedules the kernel dataset measured for its
                # workload on this record's hardware (the ones its tuned build picked from)
                graph = graph.with_candidates(
                    lambda n, found=candidates, hw_id=rec["hw_id"]:
                    found.get((n.struct_hash, hw_id), []))
            data = record_to_data(rec, graph)
            if self.graph_kind != "kernel":
                data.kernel_mask = torch.zeros_like(data.kernel_mask)
            items.append(data)
        if not items:
            raise DatasetError(f"no records in {self.raw_dir}")
        target = Path(self.processed_paths[0])
        with atomic_path(target) as tmp:
            self.save(items, str(tmp))
        self._prune_stale_caches(target)

    def _prune_stale_caches(self, keep: Path) -> None:
        """Caches of older shard contents (same graph kind) are never read again."""
        pattern = re.compile(r"data-[0-9a-f]{16}" + re.escape(keep.name[len("data-") + 16:]))
        for path in keep.parent.glob("data-*.pt"):
            if path != keep and pattern.fullmatch(path.name):
                path.unlink(missing_ok=True)


# -- splits ---------------------------------------------------------------------------------

SPLITS = ("random", "leave-family-out", "leave-hw-out", "leave-cpu-out", "real-architectures")


def split_indices(
    dataset: Sequence[Data] | InMemoryDataset,
    kind: str = "random",
    *,
    seed: int = 0,
    val_frac: float = 0.1,
    test_frac: float = 0.15,
    holdout: str | None = None,
    legacy_in_test: bool = False,
) -> tuple[list[int], list[int], list[int]]:
    """(train, val, test) indices.

    Records are grouped by their model's operator graph (:func:`split_group`: two seeds
    of a real architecture can give the same graph), and a group never straddles two sets. The
    held-out part is a random ``test_frac`` of groups (``random``), the held-out family or
    hardware id, or every hardware id of the held-out CPU (``leave-cpu-out``: the machine
    part of the id, :func:`host_of`), or the ``hf-*`` models (``real-architectures``);
    validation is ``val_frac`` of the remaining groups, never taken from the held-out part,
    drawn within each stratum of :func:`_validation_strata` (v2 or not, rarest build kind).

    Only records measured under v2 are tested on (their noise floor is known); older
    records of the held-out part are left out of every set, so they cannot leak it into
    training. ``legacy_in_test`` tests on them too (for datasets with no v2 records).
    """
    if kind not in SPLITS:
        raise DatasetError(f"unknown split '{kind}'; choose one of {', '.join(SPLITS)}")
    rows = list(_iter(dataset))
    groups = [str(d.group) for d in rows]
    testable = np.array([is_testable(d, legacy_in_test) for d in rows], dtype=bool)
    rng = np.random.default_rng(seed)
    idx = np.arange(len(rows))
    if kind == "random":
        held = _pick_groups(groups, idx, test_frac, rng,
                            among={groups[i] for i in idx[testable]})
    elif kind in ("leave-family-out", "leave-hw-out", "leave-cpu-out"):
        if holdout is None:
            what = {"leave-family-out": "family", "leave-hw-out": "hw id"}.get(kind, "CPU")
            raise DatasetError(f"{kind} needs a held-out {what}")
        held = np.array([_held_out_value(d, kind) == holdout for d in rows], dtype=bool)
    else:
        held = np.array([str(d.family).startswith("hf-") for d in rows], dtype=bool)
    test_mask = held & testable
    if not test_mask.any():
        legacy = " measured under v2" if held.any() else ""
        raise DatasetError(f"split '{kind}' (holdout {holdout}) leaves no test record{legacy}")
    if kind in ("leave-hw-out", "leave-cpu-out"):
        # the held-out hardware never appears in training; its models may
        rest = idx[~held]
    else:
        held_groups = {groups[i] for i in idx[held]}
        rest = np.array([i for i in idx[~held] if groups[i] not in held_groups], dtype=int)
    rest_groups = [groups[i] for i in rest]
    chosen = _stratified_groups(_validation_strata([rows[i] for i in rest], rest_groups),
                                val_frac, rng)
    val_local = np.array([g in chosen for g in rest_groups], dtype=bool)
    val, train = rest[val_local], rest[~val_local]
    if len(train) == 0 or len(val) == 0:
        raise DatasetError(f"split '{kind}' (holdout {holdout}) leaves no training or "
                           f"validation records ({len(rows)} records in all)")
    return [int(i) for i in train], [int(i) for i in val], [int(i) for i in idx[test_mask]]


def _held_out_value(row: Data, kind: str) -> str:
    if kind == "leave-family-out":
        return str(row.family)
    return str(row.hw_id) if kind == "leave-hw-out" else host_of(str(row.hw_id))


def is_testable(record: Data, legacy_in_test: bool = False) -> bool:
    """Whether :func:`split_indices` may test on ``record``: measured under v2 (or
    ``legacy_in_test``)."""
    return legacy_in_test or bool(getattr(record, "v2", True))


def calibration_mask(val: Sequence[Data], legacy_in_test: bool = False) -> np.ndarray:
    """Which validation records calibrate a prediction interval: those of the kind tested
    on (:func:`is_testable`), or all of them where none is.

    Why: pre-v2 labels are noisier (16% A/A on one machine against 3-7% under v2), so an
    interval sized on them is too wide for the v2 labels it is scored on and predicts for.
    """
    mask = np.array([is_testable(d, legacy_in_test) for d in val], dtype=bool)
    return mask if mask.any() else np.ones(len(val), dtype=bool)


def _iter(dataset: Sequence[Data] | InMemoryDataset) -> Iterable[Data]:
    """Light views (ids only) of every item, without materialising the graphs."""
    if isinstance(dataset, InMemoryDataset):
        store = dataset._data
        for i in dataset.indices():
            yield Data(model_id=store.model_id[i], family=store.family[i],
                       hw_id=store.hw_id[i], group=store.group[i], v2=bool(store.v2[i]),
                       build=store.build[i])
    else:
        yield from dataset


def _validation_strata(rows: Sequence[Data], groups: Sequence[str]) -> dict[str, str]:
    """Per group: whether it holds a v2 label, and its rarest build kind (ties: the kind
    first in :data:`BUILD_KINDS`).

    Why: validation picks the checkpoint and calibrates the interval, so every kind of
    record the test split holds should be in it. Drawn from all groups alike, it could
    hold no ``tuned`` record at all (those are a few percent of the data).
    """
    kinds = [BuildConfig.parse(str(getattr(d, "build", "default"))).kind for d in rows]
    share = Counter(kinds)
    v2: dict[str, bool] = {}
    rarest: dict[str, str] = {}
    for d, group, kind in zip(rows, groups, kinds, strict=True):
        v2[group] = v2.get(group, False) or bool(getattr(d, "v2", True))
        if group not in rarest or (share[kind], BUILD_KINDS.index(kind)) < (
                share[rarest[group]], BUILD_KINDS.index(rarest[group])):
            rarest[group] = kind
    return {g: f"{'v2' if v2[g] else 'legacy'}/{rarest[g]}" for g in rarest}


def _stratified_groups(strata: dict[str, str], frac: float, rng: np.random.Generator
                       ) -> set[str]:
    """``frac`` of the groups (at least one), each stratum given its proportional share:
    the whole seats first, the seats left over to the largest remainders. A stratum too
    small for a whole seat gives up none unless its remainder wins one, so no small
    stratum loses half its groups; with one stratum this is a plain random draw."""
    members: dict[str, list[str]] = {}
    for group, stratum in sorted(strata.items()):
        members.setdefault(stratum, []).append(group)
    names = sorted(members)
    exact = np.array([frac * len(members[s]) for s in names])
    seats = np.floor(exact).astype(int)
    left = max(1, int(round(frac * len(strata)))) - int(seats.sum())
    seats[np.argsort(-(exact - seats), kind="stable")[:max(left, 0)]] += 1
    chosen: set[str] = set()
    for name, k in zip(names, seats, strict=True):
        pool = members[name]
        rng.shuffle(pool)
        chosen.update(pool[:k])
    return chosen


def _pick_groups(groups: Sequence[str], idx: np.ndarray, frac: float,
                 rng: np.random.Generator, among: set[str] | None = None) -> np.ndarray:
    """Mask over ``idx`` selecting a random ``frac`` of the distinct groups (at least one),
    drawn from ``among`` when given."""
    unique = sorted(set(groups) if among is None else among)
    rng.shuffle(unique)
    chosen = set(unique[: max(1, int(round(frac * len(unique))))])
    return np.array([groups[i] in chosen for i in idx], dtype=bool)


# -- normalisation --------------------------------------------------------------------------


class FeatureScaler:
    """Per-feature mean/std of node and edge features, fitted on training graphs only.

    ``columns`` picks a checkpoint's own node columns out of today's encoding (a
    checkpoint trained before a column was added); None keeps every column.
    """

    def __init__(self, x_mean: torch.Tensor, x_std: torch.Tensor, e_mean: torch.Tensor,
                 e_std: torch.Tensor, columns: Sequence[int] | None = None) -> None:
        self.x_mean, self.x_std, self.e_mean, self.e_std = x_mean, x_std, e_mean, e_std
        self.columns = torch.tensor(list(columns), dtype=torch.long) \
            if columns is not None else None

    @classmethod
    def fit(cls, graphs: Iterable[Data]) -> FeatureScaler:
        xs, es = [], []
        for g in graphs:
            xs.append(g.x)
            es.append(g.edge_attr)
        x = torch.cat(xs)
        e = torch.cat(es) if es else torch.zeros((1, 1))
        return cls(*column_mean_std(x), *column_mean_std(e))

    def __call__(self, data: Data) -> Data:
        data = data.clone()
        x = data.x if self.columns is None else data.x[:, self.columns]
        data.x = standardize(x, self.x_mean, self.x_std)
        if data.edge_attr is not None and data.edge_attr.numel():
            data.edge_attr = standardize(data.edge_attr, self.e_mean, self.e_std)
        return data

    def state_dict(self) -> dict[str, list[float]]:
        return {k: getattr(self, k).tolist() for k in ("x_mean", "x_std", "e_mean", "e_std")}

    @classmethod
    def from_state_dict(cls, state: dict[str, list[float]],
                        columns: Sequence[int] | None = None) -> FeatureScaler:
        return cls(*(torch.tensor(state[k]) for k in ("x_mean", "x_std", "e_mean", "e_std")),
                   columns=columns)


# -- statistics -----------------------------------------------------------------------------


def noise_pairs(root: str | os.PathLike[str] | DatasetFolder | None
                ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(record, its re-measurement) for every re-measurement in the folder's ``noise/``.

    The record is the one that was repeated (matched by its creation time), not a
    newer record of the same key.
    """
    folder = DatasetFolder.resolve(root)
    noise_dir = folder.noise
    if not noise_dir.is_dir():
        return []
    records = {(r["key"], r.get("created_at")): r
               for r in iter_lines(folder.shards, kinds=("record",))}
    return [(records[pair], obj) for obj in iter_lines(noise_dir, kinds=("remeasure",))
            if (pair := (obj["key"], obj.get("first_created_at"))) in records]


Pair = tuple[dict[str, Any], dict[str, Any]]


def _noise_floor(pairs: list[Pair]) -> float | None:
    """MAPE (%) between first and second measurement of each record; None without pairs."""
    return aa_floor(pairs, "whole")["mape"]


def _group_pairs(pairs: list[Pair], key: Callable[[dict[str, Any]], str]
                 ) -> dict[str, list[Pair]]:
    groups: dict[str, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(key(pair[0]), []).append(pair)
    return groups


def _noise_floor_per(pairs: list[Pair], key: Callable[[dict[str, Any]], str]
                     ) -> dict[str, float]:
    """:func:`_noise_floor` of each group of pairs, grouped by ``key`` of the first record."""
    return {k: mape for k, v in sorted(_group_pairs(pairs, key).items())
            if (mape := _noise_floor(v)) is not None}


def _cpu_id(record: dict[str, Any]) -> str:
    return signature_of_hw(record["hw"]).id


def dataset_stats(root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Counts, latency range, failures and noise floor of a dataset folder."""
    folder = _existing(root)
    shards = folder.shards
    records = latest_records(shards)
    signatures = [signature_of_hw(r["hw"]) for r in records]
    failures = list(iter_lines(shards, kinds=("failure",)))
    lat = [r["whole"]["median_ms"] for r in records]
    per_family = Counter(r["model"]["family"] for r in records)
    per_hw = Counter(r["hw_id"] for r in records)
    per_build = Counter(r["build"] for r in records)
    models_per_build = {b: len({r["model_id"] for r in records if r["build"] == b})
                        for b in per_build}
    pairs = noise_pairs(folder)
    probed = [(r, o) for r, o in pairs if is_probed(r) and is_probed(o)]
    unprobed = [(r, o) for r, o in pairs if not (is_probed(r) and is_probed(o))]
    # The floor of the current protocol; pairs taken before the speed probe are reported
    # apart, since they also hold host slowdowns the probe now rejects.
    noise_pairs_used = probed or unprobed
    cpus = sorted({r["hw"]["cpu_model"] for r in records})
    sizes = [p.stat().st_size for p in shard_paths(shards)]
    noise_sizes = ([p.stat().st_size for p in shard_paths(folder.noise)]
                   if folder.noise.is_dir() else [])
    return {
        "records": len(records),
        "models": len({r["model_id"] for r in records}),
        "families": len(per_family),
        "hw_configs": len(per_hw),
        "builds": len(per_build),
        "records_with_kernel_labels": sum(r.get("kernels_ms") is not None for r in records),
        "failures": len(failures),
        "failures_by_stage": dict(Counter(f["stage"] for f in failures)),
        "noise_floor_mape": _noise_floor(noise_pairs_used),
        "noise_floor_records": len(noise_pairs_used),
        "noise_floor_by_build_threads": _noise_floor_per(
            noise_pairs_used, lambda r: f"{r['build']}/{r['hw']['threads']}t"),
        # each machine apart too: a noisier host must not hide behind a quieter one's pairs
        # keyed by CPU signature id: one model name ("AMD EPYC") covers two CPUs here
        "noise_floor_by_cpu": {cpu: aa_floor(group, "whole") for cpu, group in sorted(
            _group_pairs(noise_pairs_used, _cpu_id).items())},
        "noise_floor_by_host": _noise_floor_per(noise_pairs_used,
                                                lambda r: host_of(r["hw_id"])),
        "noise_floor_protocol": "speed-probe" if probed else "load-guard",
        "noise_floor_unprobed_mape": _noise_floor(unprobed),
        "noise_floor_unprobed_records": len(unprobed),
        "records_probed": sum(is_probed(r) for r in records),
        # measured under the v2 protocol: reference kernels timed beside the label
        "records_with_reference": sum(r.get("reference") is not None for r in records),
        "latency_ms_min": float(min(lat)) if lat else None,
        "latency_ms_max": float(max(lat)) if lat else None,
        "per_family": dict(sorted(per_family.items())),
        "per_hw": dict(sorted(per_hw.items())),
        # the names the kernel-dataset issue checks its `tuned` target by
        "records_by_build": dict(sorted(per_build.items())),
        "models_by_build": dict(sorted(models_per_build.items())),
        "cpu_models": cpus,
        "per_cpu": dict(sorted(Counter(sig.id for sig in signatures).items())),
        "cpu_signatures": {sig.id: sig.to_dict() for sig in sorted(set(signatures),
                                                                    key=lambda g: g.id)},
        "shard_bytes": sum(sizes),
        "shards": len(sizes),
        "noise_shard_bytes": sum(noise_sizes),
        "noise_shards": len(noise_sizes),
    }
