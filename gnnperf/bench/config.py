"""What a benchmark run trains and how long: one budget rule for every learned method."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

#: bump when a change to the methods or the splits changes what a stored run would hold,
#: so stored runs of older code are never mixed into a report
RESULTS_VERSION = 7  # 4: validation drawn per stratum (v2, rarest build kind); 5: residual
#: kernel head, intervals sized on v2 validation records by the split-conformal quantile;
#: 6: GNN losses weighted by label noise, held-out runs score their kernel model on the
#: workloads it never saw; 7: the GNN's size-safe whole-model head


@dataclass(frozen=True)
class BudgetRule:
    """Every learned method trains until its validation error has not improved for
    ``patience`` of its rounds, keeps its best round, and stops at ``max_*`` rounds.

    A round is an epoch for a network (validation: whole-model MAPE) and a boosting
    round for the trees (validation: per-kernel log error), so each method converges by
    its own measure instead of stopping at a wall-clock cap that favours the cheaper one.
    ``safety_minutes`` only bounds a runaway training; one that reaches it is flagged in
    the report, never silently kept.
    """

    patience_epochs: int = 25
    max_epochs: int = 300
    patience_trees: int = 50
    max_trees: int = 3000
    safety_minutes: float = 90.0

    def line(self) -> str:
        return (f"early stopping on validation: networks stop after {self.patience_epochs} "
                f"epochs without a better validation MAPE (at most {self.max_epochs}), trees "
                f"after {self.patience_trees} boosting rounds without a better validation "
                f"kernel error (at most {self.max_trees}); the best round is kept")


@dataclass(frozen=True)
class BenchConfig:
    seeds: int = 3  # random and real-architecture splits
    holdout_seeds: int = 1  # each leave-one-out holdout (spread: across holdouts)
    # A small network with larger batches and step size: grouped 3-fold CV
    # (tools/compare_configs.py, 2,056 records) gave fold MAPE 19.3 ± 0.8 for hidden 64 /
    # 2 layers / batch 64 / lr 3e-3, against 23.5 ± 8.3 for hidden 96 / 3 layers / batch 32.
    hidden: int = 64
    layers: int = 2
    batch_size: int = 64
    lr: float = 3e-3
    ensemble: int = 1  # members per GNN (the shipped checkpoint has more; see train.py)
    families: int | None = None  # leave-family-out: how many families (None: all)
    cpus: int | None = None  # leave-CPU-out: how many CPUs (None: all testable)
    #: calibration models measured on a held-out CPU (``gnnperf calibrate``'s default)
    calibration_shots: int = 10
    rule: BudgetRule = field(default_factory=BudgetRule)

    def fingerprint(self) -> str:
        """Identifies the settings a stored split result was produced with."""
        text = json.dumps({**self.to_dict(), "results_version": RESULTS_VERSION},
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: one seed, two families, a few epochs: checks that everything runs, in minutes
QUICK = BenchConfig(seeds=1, hidden=32, layers=2, families=2, cpus=1,
                    rule=BudgetRule(patience_epochs=3, max_epochs=6, patience_trees=5,
                                    max_trees=40, safety_minutes=2.0))
