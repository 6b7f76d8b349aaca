"""Which zoo model the kernel collector visits next, when ``best-of`` records are the goal
(the searched build the kernel dataset gives, called ``tuned`` here until 2026-11-28).

A whole-model ``best-of`` record of a (model, hardware config) needs every workload of
the model measured on that config, and workloads are shared: a model whose kernels
other models already brought in costs nothing but its own whole-model timing. Visiting
models in the zoo's order spends hours on large new workloads while such models wait.
Each model's workloads are known from the ``kernel_model`` line written when it was
first lowered (on any CPU: workloads are target-independent), so the cost of its
records is known without lowering it again. The collector ranks the models again
before each visit: a visit covers workloads that other models share, and stores the
workloads of a model never lowered before. A model never lowered is costed from its
family: a new seed of a generated family brings almost only new workloads (on the 216
models lowered by session 21, a median 15 of a model's 15 workloads in bert, 10 of 11 in
vgg, 28 of 32 in efficientnet), and the time per workload differs far less between
families (9-14 s for both thread counts on Zen 3) than the count does (11-32).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Literal, get_args

from tqdm import tqdm

from gnnperf import zoo
from gnnperf.collect.models import record_key
from gnnperf.errors import GnnperfError
from gnnperf.lowering.build_config import BEST_OF_SCHEDULES

#: the orders in which a collector can visit the models
Order = Literal["given", "cheapest-tuned"]
ORDERS: tuple[Order, ...] = get_args(Order)


def check_order(order: str) -> None:
    """A one-line error for an order no collector knows."""
    if order not in ORDERS:
        raise GnnperfError(f"--order must be one of {', '.join(ORDERS)}, got '{order}'")


@dataclass(frozen=True)
class TunedCost:
    """What visiting a model buys on this machine: ``records`` whole-model ``tuned``
    records (hardware configs still without one whose workloads can all be covered),
    for ``measure`` (workload, config) pairs still to time. ``known`` is False for a
    model never lowered on any ISA (its workloads are not stored yet): ``measure`` is
    then an estimate from its family (:func:`family_workloads`); 0 for a family never
    lowered, so that one visit learns its size."""

    records: int
    measure: float
    known: bool = True

    @property
    def nothing_left(self) -> bool:
        """Known, with no record to make and nothing to time: not worth a visit."""
        return self.known and not self.records and not self.measure

    @property
    def per_record(self) -> float:
        return self.measure / self.records if self.records else float("inf")


def family_workloads(model_workloads: Mapping[tuple[str, str], Collection[str]]
                     ) -> dict[str, float]:
    """Per family, the median number of workloads of its lowered models (each model's
    largest set over the ISAs it was lowered for): what a new seed is estimated to bring."""
    per_model: dict[str, int] = {}
    for (model_id, _), workloads in model_workloads.items():
        per_model[model_id] = max(per_model.get(model_id, 0), len(workloads))
    by_family: dict[str, list[int]] = {}
    for model_id, count in per_model.items():
        by_family.setdefault(zoo.ModelSpec.family_of(model_id), []).append(count)
    return {family: float(median(counts)) for family, counts in by_family.items()}


def tuned_cost(model_id: str, isa_hw_ids: Mapping[str, Sequence[str]],
               model_workloads: Mapping[tuple[str, str], Collection[str]],
               done: Collection[str], covered: Collection[str],
               tuned_done: Collection[str],
               family_sizes: Mapping[str, float] | None = None, *,
               build: str = f"best-of:{BEST_OF_SCHEDULES}",
               skip: Collection[str] = ()) -> TunedCost:
    """The cost of ``model_id``'s ``build`` (best-of) records on the hardware ids of each ISA.

    ``done`` and ``covered`` hold ``workload|hw_id`` pairs as the collector keeps them (a
    pair done but not covered failed, so that config can never have a tuned record of the
    model); ``tuned_done`` the record keys with a record or a failure already. Pairs to
    time on a config that can have no record still count: visiting the model times them.
    An ISA the model was never lowered for takes the workloads of one it was, an estimate
    (a workload id is target-independent, and the fused kernels rarely differ by ISA).
    A model never lowered is estimated at ``family_sizes[its family]`` new workloads per
    hardware id (:func:`family_workloads`). Workloads in ``skip`` are never timed (a
    coverage run leaves out those another CPU covers): their pairs cost nothing, and
    block a record on a config where they are not covered."""
    lowered = [wl for (m, _), wl in model_workloads.items() if m == model_id]
    if not lowered:
        configs = sum(map(len, isa_hw_ids.values()))
        size = (family_sizes or {}).get(zoo.ModelSpec.family_of(model_id), 0.0)
        return TunedCost(records=configs, measure=size * configs, known=False)
    records = measure = 0
    for isa, hw_ids in isa_hw_ids.items():
        workloads = model_workloads.get((model_id, isa)) or max(lowered, key=len)
        for hw_id in hw_ids:
            pairs = [(w in skip, f"{w}|{hw_id}") for w in workloads]
            measure += sum(p not in done and not skipped for skipped, p in pairs)
            blocked = any((p in done or skipped) and p not in covered for skipped, p in pairs)
            if not blocked and record_key(model_id, hw_id, build) not in tuned_done:
                records += 1
    return TunedCost(records, measure)


def cheapest_tuned_first(specs: Sequence[zoo.ModelSpec],
                         costs: Mapping[str, TunedCost]) -> list[zoo.ModelSpec]:
    """``specs`` with the fewest measurements per ``best-of`` record first (ties keep the
    given order); then the models never lowered, fewest estimated measurements per
    record first; then those that can give no record but still have workloads to
    measure. A model with nothing left to do is dropped."""
    def rank(indexed: tuple[int, zoo.ModelSpec]) -> tuple[int, float, int]:
        i, spec = indexed
        cost = costs[spec.model_id]
        if not cost.known:
            return (1, cost.per_record, i)
        if cost.records:
            return (0, cost.per_record, i)
        return (2, float(cost.measure), i)

    kept = [(i, s) for i, s in enumerate(specs) if not costs[s.model_id].nothing_left]
    return [spec for _, spec in sorted(kept, key=rank)]


def visit_models(specs: Sequence[zoo.ModelSpec], visit: Callable[[zoo.ModelSpec], None], *,
                 rank: Callable[[list[zoo.ModelSpec]], list[zoo.ModelSpec]] | None = None,
                 max_minutes: float | None = None, start: float | None = None,
                 progress: bool = True, desc: str = "models") -> None:
    """Call ``visit`` on each of ``specs``, in the order given or, with ``rank``, ranked
    again before each visit (the last visit changed what the others cost; ``rank`` drops
    those with nothing left to do). Starts no visit ``max_minutes`` after ``start`` (the
    run's start, reading the shards included; now if not given)."""
    start = time.time() if start is None else start
    remaining = list(specs)
    with tqdm(total=len(remaining), desc=desc, unit="model", disable=not progress) as bar:
        while remaining:
            if max_minutes is not None and (time.time() - start) / 60 > max_minutes:
                break
            if rank is not None:
                remaining = rank(remaining)
                bar.total = bar.n + len(remaining)
                if not remaining:
                    break
            visit(remaining.pop(0))
            bar.update()
