"""Train / validation / test splits that keep a model's records together, and which
records are tested on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
from torch_geometric.data import Data, InMemoryDataset

from gnnperf.errors import DatasetError
from gnnperf.hardware.spec import host_of
from gnnperf.lowering.build_config import BUILD_KINDS, BuildConfig

SPLITS = ("random", "leave-family-out", "leave-hw-out", "leave-cpu-out", "real-architectures",
          "leave-architecture-out")


def architecture_fold(family: str, folds: int) -> int | None:
    """The fold of ``family``'s source family (its transformers model type) in a
    ``folds``-fold held-out-architecture split; None for a generated zoo family, which
    always trains. The fold is a stable hash of the source family, so a model type keeps
    its fold as the corpus grows."""
    from gnnperf.zoo.corpus.spec import is_real_architecture, source_family
    from gnnperf.zoo.spec import stable_int

    if not is_real_architecture(family):
        return None
    return stable_int("gnnperf.architecture_fold", source_family(family)) % folds


def parse_fold(holdout: str | None) -> tuple[int, int]:
    """``"k/K"`` -> (k, K): fold k (from 0) of K."""
    try:
        k, folds = (int(x) for x in str(holdout).split("/"))
    except ValueError:
        raise DatasetError(f"leave-architecture-out holds out a fold 'k/K', got {holdout!r}"
                           ) from None
    if not 0 <= k < folds:
        raise DatasetError(f"fold {k} is not among 0..{folds - 1}")
    return k, folds


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

    Records are grouped by their model's operator graph
    (:func:`~gnnperf.store.records.split_group`: two seeds of a real architecture can give
    the same graph), and a group never straddles two sets. The
    held-out part is a random ``test_frac`` of groups (``random``), the held-out family or
    hardware id, or every hardware id of the held-out CPU (``leave-cpu-out``: the machine
    part of the id, :func:`host_of`), or the ``hf-*`` models (``real-architectures``), or
    every real architecture whose model type falls in fold ``holdout = "k/K"``
    (``leave-architecture-out``: every size of a type, corpus and ``hf-*`` alike);
    validation is ``val_frac`` of the remaining :func:`validation_unit` s (a real
    architecture's whole source family, else a group), never taken from the held-out part,
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
    elif kind == "leave-architecture-out":
        k, folds = parse_fold(holdout)
        held = np.array([architecture_fold(str(d.family), folds) == k for d in rows],
                        dtype=bool)
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
    rest_units = [validation_unit(rows[i], groups[i]) for i in rest]
    chosen = _stratified_groups(_validation_strata([rows[i] for i in rest], rest_units),
                                val_frac, rng)
    val_local = np.array([u in chosen for u in rest_units], dtype=bool)
    val, train = rest[val_local], rest[~val_local]
    if len(train) == 0 or len(val) == 0:
        raise DatasetError(f"split '{kind}' (holdout {holdout}) leaves no training or "
                           f"validation records ({len(rows)} records in all)")
    return [int(i) for i in train], [int(i) for i in val], [int(i) for i in idx[test_mask]]


def validation_unit(row: Data, group: str) -> str:
    """What validation takes whole: a real architecture's source family (every size and
    seed of a transformers model type, corpus and ``hf-*`` alike), else the record's group.

    Why: validation picks each member's epoch and calibrates the interval. Drawn by
    operator graph, it held another size of an architecture that trains, so intervals were
    sized on near-copies of the training set and covered half of what users bring
    (architectures no training saw); a held-out type is what they bring. A generated zoo
    model is a fresh draw of its family's space, so its own graph is the unit there."""
    from gnnperf.zoo.corpus.spec import is_real_architecture, source_family

    family = str(getattr(row, "family", ""))
    return f"source:{source_family(family)}" if is_real_architecture(family) else group


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
    record_ids = getattr(dataset, "record_ids", None)  # a LatencyDataset's
    return record_ids() if record_ids is not None else iter(dataset)


def _validation_strata(rows: Sequence[Data], groups: Sequence[str]) -> dict[str, str]:
    """Per group: whether it holds a v2 label, and its rarest build kind (ties: the kind
    first in :data:`BUILD_KINDS`).

    Why: validation picks the checkpoint and calibrates the interval, so every kind of
    record the test split holds should be in it. Drawn from all groups alike, it could
    hold no ``best-of`` record at all (those are a few percent of the data).
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
