"""The kernel cost model against TVM's own approach, and what each of its parts adds.

On workloads it has never seen (split by workload, ``--seeds`` different splits), per
schedule: MAPE, within-workload Spearman, top-1 regret (how much slower the schedule it
ranks first is than the best), and the MAPE of each workload's best time predicted two
ways: by the tuned head (from the unscheduled kernel) and as the best of the workload's
sampled schedules' predicted times plus the fitted offset (what a ``tuned`` node reads).

Methods:
- ``kernel-model``: :mod:`gnnperf.estimators.kernel` as shipped (time + ranking + tuned losses,
  then gradient-boosted trees for the schedule times);
- ``no-booster``: the same with the MLP's time head for the schedule times (before 2026-11-29);
- ``no-schedule-features``: the same without the trace's decisions (``sched_*`` zeroed);
- ``no-rank-loss``: the same with the pointwise loss only;
- ``rank-weight-1``: the same with the ranking loss at weight 1 (the default before
  2026-11-25, which validation replaced by 0.25);
- ``xgb-metaschedule``: XGBoost on MetaSchedule's PerStoreFeature only, regressing log
  time: TVM's cost model's inputs and learner;
- ``xgb-all-features``: XGBoost on every column the kernel model reads.

    python benchmarks/kernel_model.py [--root datasets] [--seeds 3] [--out FILE.json]
        [--score val] [--anatomy] [--tree-settings 0/1]

``--anatomy`` instead breaks ``xgb-all-features``' error on unseen workloads down (operator
class, CPU, kernel time; workload bias against within-workload error) and sets it against
what bounds it: the same learner on seen workloads and the kernel A/A floor
(``kernel_error_anatomy.json``).

``--tree-settings TEST/VAL`` instead compares settings of the kernel model's trees where
the benchmark's headline is: on the workloads of unseen architectures. Test: every workload
of held-out-architecture fold TEST's models (reported, never chosen on); validation: the
workloads that only fold VAL's models have; training: the rest
(``kernel_tree_settings.json``).

``--score val`` scores the validation workloads instead of the test ones: that is where a
choice between the methods (a default of the shipped model) is made, never on test.

Training only, no measurement: it may run beside nothing else that matters.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.atomic import write_text
from gnnperf.bench.splits import ARCHITECTURE_FOLDS
from gnnperf.estimators.kernel import (
    KernelTable,
    KernelTrainConfig,
    group_split,
    load_kernel_table,
    ranking_metrics,
    train_kernel_model,
)
from gnnperf.estimators.kernel.boosted import booster_log_ms, fit_booster
from gnnperf.metrics import breakdown, group_error_decomposition, metrics

SPLIT = (0.15, 0.15)


def _scores(pred: np.ndarray, table: KernelTable, rows: np.ndarray) -> dict[str, float]:
    true = table.log_ms[rows]
    out = {"mape": metrics(np.exp(pred), np.exp(true))["mape"]}
    r = ranking_metrics(pred, true, table.group[rows])
    out.update(group_spearman=r["group_spearman"], top1_regret_pct=r["top1_regret_pct"])
    return out


class _Trees:
    """The product's trees (:mod:`gnnperf.estimators.kernel.boosted`) behind a ``predict``."""

    def __init__(self, booster: Any) -> None:
        self.booster = booster

    def predict(self, x: np.ndarray) -> np.ndarray:
        return booster_log_ms(self.booster, x)


def _fit_xgb(x: np.ndarray, y: np.ndarray, train: np.ndarray, val: np.ndarray, seed: int
             ) -> _Trees:
    """XGBoost regressing ``y`` on ``x``'s ``train`` rows, early-stopped on ``val``'s, with
    the kernel model's own parameters."""
    return _Trees(fit_booster(x, y, train, val, seed, n_jobs=2))


def _xgb(table: KernelTable, seed: int, columns: np.ndarray, on: str) -> dict[str, float]:
    train, val, test = group_split(table.workload, SPLIT, seed)
    model = _fit_xgb(table.x[:, columns], table.log_ms, train, val, seed)
    scored = test if on == "test" else val
    out = _scores(model.predict(table.x[scored][:, columns]).astype(float), table, scored)

    def best(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per group of sampled schedules: (best prediction, best measured time)."""
        rows = rows[~table.unscheduled[rows]]
        _, owner = np.unique(table.group[rows], return_inverse=True)
        pred = np.full(owner.max() + 1, np.inf)
        true = np.full(owner.max() + 1, np.inf)
        np.minimum.at(pred, owner, model.predict(table.x[rows][:, columns]))
        np.minimum.at(true, owner, table.log_ms[rows])
        return pred, true

    val_pred, val_true = best(val)  # the offset is fitted on validation, as the MLP's
    scored_pred, scored_true = (val_pred, val_true) if on == "val" else best(scored)
    offset = float(np.mean(val_true - val_pred))
    out["tuned_best_candidate_mape"] = metrics(np.exp(scored_pred + offset),
                                               np.exp(scored_true))["mape"]
    return out


def _mlp(table: KernelTable, seed: int, on: str, **overrides: Any) -> dict[str, float]:
    result = train_kernel_model(table, KernelTrainConfig(seed=seed, val_frac=SPLIT[0],
                                                         test_frac=SPLIT[1], **overrides),
                                progress=False)
    scored = result.metrics[on]
    return {"mape": scored["schedules"]["mape"], "group_spearman": scored["group_spearman"],
            "top1_regret_pct": scored["top1_regret_pct"],
            "tuned_mape": scored.get("tuned", {}).get("mape", float("nan")),
            "tuned_best_candidate_mape": scored.get("tuned_from_candidates", {}).get(
                "mape", float("nan"))}


def _roofline_log_ms(table: KernelTable) -> np.ndarray:
    """Per row, the natural log of its roofline time in ms: the larger of its flops at the
    machine's peak and its bytes at the machine's bandwidth (the columns hold log1p
    counts and log2 GFLOP/s, GB/s)."""
    col = {n: i for i, n in enumerate(table.feature_names)}

    def column(name: str) -> np.ndarray:  # one column in float64, not the whole table
        return table.x[:, col[name]].astype(np.float64)

    flops = np.expm1(column("log_flops"))
    moved = np.expm1(column("log_bytes_read")) + np.expm1(column("log_bytes_written"))
    seconds = np.maximum(flops / (2.0 ** column("hw_log2_peak_gflops") * 1e9),
                         moved / (2.0 ** column("hw_log2_mem_bw_gbs") * 1e9))
    return np.log(np.maximum(seconds * 1e3, 1e-9))


def anatomy(table: KernelTable, seed: int, on: str, root: str | None) -> dict[str, Any]:
    """Where ``xgb-all-features``' error on unseen workloads lies, and what it is bounded by.

    - per operator class, CPU, scheduled or not, and kernel time;
    - split into each workload's shared bias and the error within its schedules;
    - the same learner on *seen* workloads (rows split at random) and on its own training
      rows: what the features allow at all;
    - regressing the log ratio to the roofline time instead of the log time;
    - trained on a quarter and a half of the training workloads (a learning curve);
    - the kernel A/A floor per CPU (labels cannot be matched better than they repeat).
    """
    from gnnperf.collect.kernels import kernel_noise_floor_by_cpu

    train, val, test = group_split(table.workload, SPLIT, seed)
    scored = test if on == "test" else val
    pred = _fit_xgb(table.x, table.log_ms, train, val, seed).predict(table.x[scored])
    pred, true = pred.astype(float), table.log_ms[scored]
    names = np.asarray(table.feature_names)
    op_cols = np.char.startswith(names, "op_")
    op_class = names[op_cols][np.argmax(table.x[scored][:, op_cols], axis=1)]
    bins = np.array(["<10us", "10-100us", "0.1-1ms", "1-10ms", ">=10ms"])
    time_bin = bins[np.digitize(np.exp(true), [0.01, 0.1, 1.0, 10.0])]
    scheduled = np.where(table.unscheduled[scored], "unscheduled", "scheduled")

    def by(labels: np.ndarray) -> dict[str, dict[str, float]]:
        return {k: {"mape": v["mape"], "n": v["n"]}
                for k, v in breakdown(np.exp(pred), np.exp(true), labels.tolist()).items()}

    rows = np.random.default_rng(seed).permutation(len(table))
    cut = [int(f * len(rows)) for f in (0.7, 0.85)]
    seen_train, seen_val = rows[:cut[0]], rows[cut[0]:cut[1]]
    seen = _fit_xgb(table.x, table.log_ms, seen_train, seen_val, seed)
    anchor = _roofline_log_ms(table)
    residual = _fit_xgb(table.x, table.log_ms - anchor, train, val, seed)
    roofline_pred = residual.predict(table.x[scored]).astype(float) + anchor[scored]

    def mape(p: np.ndarray, rows_: np.ndarray) -> float:
        return metrics(np.exp(p), np.exp(table.log_ms[rows_]))["mape"]

    # what more workloads buy: the same learner on a share of the training workloads
    train_workloads = np.unique(table.workload[train])
    order = np.random.default_rng(seed).permutation(len(train_workloads))
    unseen_mape = mape(pred, scored)
    curve = {"1.0": unseen_mape}
    for share in (0.25, 0.5):
        kept = train_workloads[order[:round(share * len(train_workloads))]]
        part = train[np.isin(table.workload[train], kept)]
        fitted = _fit_xgb(table.x, table.log_ms, part, val, seed)
        curve[str(share)] = mape(fitted.predict(table.x[scored]).astype(float), scored)

    return {
        "unseen_workloads": {"mape": unseen_mape, "schedules": int(len(scored)),
                             **ranking_metrics(pred, true, table.group[scored])},
        "by_operator_class": by(op_class), "by_hardware": by(table.hw_id[scored]),
        "by_scheduled": by(scheduled), "by_kernel_time": by(time_bin),
        "bias_and_within_log_error": group_error_decomposition(pred, true,
                                                               table.group[scored]),
        "seen_workloads_mape": mape(seen.predict(table.x[seen_val]).astype(float), seen_val),
        "own_training_rows_mape": mape(seen.predict(table.x[seen_train]).astype(float),
                                       seen_train),
        "roofline_residual_target_mape": mape(roofline_pred, scored),
        "mape_by_share_of_training_workloads": curve,
        "training_workloads": int(len(train_workloads)),
        "kernel_aa_floor_by_cpu": kernel_noise_floor_by_cpu(root),
    }


#: what ``--tree-settings`` sets against the shipped trees: overrides of their parameters,
#: ``"roofline"`` (regress the log ratio to the roofline time, which is also a column),
#: ``"no-metaschedule"`` (without MetaSchedule's PerStoreFeature columns) or
#: ``"two-stage"`` (one set of trees for a workload's level, the mean log time of its
#: schedules on one machine, and one for each schedule's offset from it, summed)
TREE_SETTINGS: dict[str, dict[str, Any] | str] = {
    "shipped": {},
    "roofline": "roofline",
    "no-metaschedule": "no-metaschedule",
    "two-stage": "two-stage",
    "max_depth 4": {"max_depth": 4},
    "max_depth 8": {"max_depth": 8},
    "min_child_weight 100": {"min_child_weight": 100},
    "colsample_bytree 0.3": {"colsample_bytree": 0.3},
    "lambda 10, alpha 1": {"lambda": 10, "alpha": 1},
    "absolute error": {"objective": "reg:absoluteerror"},
}


def architecture_split(table: KernelTable, root: str | None, test_fold: int, val_fold: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) rows: test, every workload of held-out-architecture fold
    ``test_fold``'s models (as ``gnnperf bench`` hides them); validation, the workloads only
    fold ``val_fold``'s models have, so that a choice is made on unseen architectures too."""
    from gnnperf.bench.methods import held_out_workloads
    from gnnperf.data.splits import architecture_fold
    from gnnperf.estimators.kernel import workloads_of_models
    from gnnperf.zoo.spec import ModelSpec

    model_workloads = workloads_of_models(root)
    fold = {m: architecture_fold(ModelSpec.family_of(m), ARCHITECTURE_FOLDS)
            for m in model_workloads}
    test_models = {m for m in fold if fold[m] == test_fold}
    val_models = {m for m in fold if fold[m] == val_fold}
    test_w = held_out_workloads(model_workloads, test_models, set())  # strict: all of them
    val_w = held_out_workloads(model_workloads, val_models,
                               set(fold) - test_models - val_models) - test_w
    test = np.flatnonzero(np.isin(table.workload, list(test_w)))
    val = np.flatnonzero(np.isin(table.workload, list(val_w)))
    return np.setdiff1d(np.arange(len(table)), np.concatenate([test, val])), val, test


def workload_level(table: KernelTable) -> np.ndarray:
    """Per row, its group's level: the mean log time of the group's sampled schedules (of
    all its rows where it has none)."""
    _, owner = np.unique(table.group, return_inverse=True)
    sampled = (~table.unscheduled).astype(float)
    count = np.bincount(owner, sampled)
    mean_sampled = np.bincount(owner, table.log_ms * sampled) / np.maximum(count, 1)
    mean_all = np.bincount(owner, table.log_ms) / np.bincount(owner)
    return np.where(count > 0, mean_sampled, mean_all)[owner]


def tree_settings(table: KernelTable, root: str | None, test_fold: int, val_fold: int
                  ) -> dict[str, Any]:
    """Each of :data:`TREE_SETTINGS` fitted on :func:`architecture_split`'s training rows,
    early-stopped on its validation rows and scored on both: MAPE (all, scheduled,
    unscheduled), within-workload Spearman and top-1 regret."""
    train, val, test = architecture_split(table, root, test_fold, val_fold)
    names = np.asarray(table.feature_names)
    anchor = _roofline_log_ms(table)

    def scored(pred: np.ndarray, rows: np.ndarray) -> dict[str, float]:
        out = _scores(pred, table, rows)
        for kind, mask in (("scheduled", ~table.unscheduled[rows]),
                           ("unscheduled", table.unscheduled[rows])):
            out[f"mape_{kind}"] = metrics(np.exp(pred[mask]),
                                          np.exp(table.log_ms[rows][mask]))["mape"]
        return out

    report: dict[str, Any] = {
        "rows": {"train": len(train), "val": len(val), "test": len(test)},
        "workloads": {k: int(len(np.unique(table.workload[v])))
                      for k, v in (("train", train), ("val", val), ("test", test))}}
    level = workload_level(table)
    for name, setting in TREE_SETTINGS.items():
        x, offset, target, overrides = table.x, np.zeros(len(table)), table.log_ms, {}
        if setting == "two-stage":  # the level's trees give the offset the others fit
            level_trees = fit_booster(x, level.astype(np.float32), train, val, 0, n_jobs=2)
            offset = booster_log_ms(level_trees, x).astype(float)
            target = table.log_ms - level
        elif setting == "roofline":
            x = np.column_stack([table.x, anchor]).astype(np.float32)
            offset, target = anchor, table.log_ms - anchor
        elif setting == "no-metaschedule":
            x = table.x[:, ~np.char.startswith(names, "ms_")]
        else:
            overrides = dict(setting)  # type: ignore[arg-type]
        booster = fit_booster(x, target.astype(np.float32), train, val, 0, n_jobs=2,
                              overrides=overrides)
        report[name] = {
            split: scored(booster_log_ms(booster, x[rows]).astype(float) + offset[rows], rows)
            for split, rows in (("val", val), ("test", test))}
        report[name]["rounds"] = int(booster.num_boosted_rounds())
        print(f"{name:22s} " + "  ".join(
            f"{split} MAPE {report[name][split]['mape']:.1f}% Spearman "
            f"{report[name][split]['group_spearman']:.3f}" for split in ("val", "test")),
            flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).with_name("kernel_model.json"))
    parser.add_argument("--score", choices=("test", "val"), default="test",
                        help="which unseen workloads to score (choose methods on val)")
    parser.add_argument("--anatomy", action="store_true",
                        help="instead of comparing methods, say where xgb-all-features errs "
                             "(default --out: kernel_error_anatomy.json)")
    parser.add_argument("--tree-settings", metavar="TEST/VAL",
                        help="compare the trees' settings on unseen architectures: test on "
                             "held-out-architecture fold TEST, choose on fold VAL "
                             "(default --out: kernel_tree_settings.json)")
    args = parser.parse_args()
    on = args.score
    table = load_kernel_table(args.root)
    if args.tree_settings:
        test_fold, val_fold = (int(k) for k in args.tree_settings.split("/"))
        out = args.out if args.out != parser.get_default("out") \
            else args.out.with_name("kernel_tree_settings.json")
        report = {"test_fold": test_fold, "val_fold": val_fold,
                  "folds": ARCHITECTURE_FOLDS,
                  **tree_settings(table, args.root, test_fold, val_fold)}
        write_text(out, json.dumps(report, indent=1) + "\n")
        print(f"report: {out}")
        return
    if args.anatomy:
        out = args.out if args.out != parser.get_default("out") \
            else args.out.with_name("kernel_error_anatomy.json")
        report = {"scored": on, "seed": 0, "split": {"val_frac": SPLIT[0],
                                                     "test_frac": SPLIT[1], "by": "workload"},
                  **anatomy(table, 0, on, args.root)}
        write_text(out, json.dumps(report, indent=1) + "\n")
        print(json.dumps(report, indent=1))
        return
    names = np.asarray(table.feature_names)
    methods = {
        "kernel-model": lambda s: _mlp(table, s, on),
        "no-schedule-features": lambda s: _mlp(table, s, on, drop_prefixes=("sched_",)),
        "no-booster": lambda s: _mlp(table, s, on, booster=False),
        "no-rank-loss": lambda s: _mlp(table, s, on, rank_weight=0.0),
        "rank-weight-1": lambda s: _mlp(table, s, on, rank_weight=1.0),
        "xgb-metaschedule": lambda s: _xgb(table, s, np.char.startswith(names, "ms_"), on),
        "xgb-all-features": lambda s: _xgb(table, s, np.ones(len(names), dtype=bool), on),
    }
    per_seed: dict[str, list[dict[str, float]]] = {m: [] for m in methods}
    for seed in range(args.seeds):
        for name, run in methods.items():
            per_seed[name].append(run(seed))
            print(f"seed {seed} {name}: " + "  ".join(
                f"{k} {v:.3g}" for k, v in per_seed[name][-1].items()), flush=True)
    summary = {m: {k: statistics.mean(r[k] for r in runs) for k in runs[0]}
               for m, runs in per_seed.items()}
    report = {
        "schedules": len(table), "workloads": int(len(np.unique(table.workload))),
        "hardware": sorted(set(table.hw_id.tolist())), "seeds": args.seeds,
        "split": {"val_frac": SPLIT[0], "test_frac": SPLIT[1], "by": "workload"},
        "scored": on,
        "mean_over_seeds": summary, "per_seed": per_seed,
    }
    write_text(args.out, json.dumps(report, indent=1) + "\n")
    print(f"{'method':22s} {'MAPE':>7s} {'Spearman':>9s} {'regret':>7s} {'tuned':>7s} "
          f"{'best cand.':>10s}")
    for m, s in summary.items():
        print(f"{m:22s} {s['mape']:6.1f}% {s['group_spearman']:9.3f} "
              f"{s['top1_regret_pct']:6.1f}% {s.get('tuned_mape', float('nan')):6.1f}% "
              f"{s.get('tuned_best_candidate_mape', float('nan')):9.1f}%")
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
