"""A split's figures from its runs: tables per method, build and budget, the error of the
predicted gain of tuning, thread invariance, the kernel model on unseen workloads, and
each split's view of the stored runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gnnperf.bench.config import BenchConfig
from gnnperf.bench.report.scoring import COLUMNS, View, calibrated, score, zero_shot
from gnnperf.bench.results import SplitResult
from gnnperf.bench.splits import SPLIT_KINDS, build_kind, calibration_positions, record_key_parts
from gnnperf.calibrate.store import MIN_MODELS


def _table(results: View) -> dict[str, dict[str, float]]:
    """Mean over runs of each method's figures on the models every method could predict
    (``mask`` selects the models scored in each run)."""
    per_method: dict[str, list[dict[str, float]]] = {}
    for result, methods, mask in results:
        true = result.true_ms
        ok = mask & np.logical_and.reduce([np.isfinite(r.pred_ms) for r in methods.values()])
        if not ok.any():
            continue
        for name, r in methods.items():
            per_method.setdefault(name, []).append(
                score(r.pred_ms[ok], r.low_ms[ok], r.high_ms[ok], true[ok]))
    table: dict[str, dict[str, float]] = {}
    for name, rows in per_method.items():
        row = _mean_row(rows, COLUMNS)
        row["mape_std"] = float(np.std([r["mape"] for r in rows]))
        row["models"] = float(np.mean([r["n"] for r in rows]))
        table[name] = row
    return table


def _mean_row(rows: Sequence[dict[str, float]], cols: Sequence[str]) -> dict[str, float]:
    """Each column's mean over the rows that have it (Spearman needs 3 models)."""
    return {c: float(np.mean([r[c] for r in rows if c in r]))
            for c in cols if any(c in r for r in rows)}


def _by_build(results: View) -> dict[str, dict[str, dict[str, float]]]:
    builds = sorted({b for r, _, _ in results for b in r.test["build"]})
    return {build: _table([(r, m, mask & (np.array(r.test["build"]) == build))
                           for r, m, mask in results]) for build in builds}


def _budgets(result: SplitResult) -> np.ndarray:
    """Per test record, its ``tuned:N`` build (the record key's), else ""."""
    return np.array([build if build.startswith("tuned:") else ""
                     for *_, build in map(record_key_parts, result.test["key"])])


def _by_budget(results: View) -> dict[str, dict[str, dict[str, float]]]:
    """Each ``tuned:N`` budget apart: the budget is an estimator input, so each N is
    scored on its own."""
    labels = [_budgets(r) for r, _, _ in results]
    budgets = sorted({b for per_run in labels for b in per_run if b},
                     key=lambda b: int(b.split(":")[1]))
    return {b: _table([(r, m, mask & (per_run == b))
                       for (r, m, mask), per_run in zip(results, labels, strict=True)])
            for b in budgets}


def within_share(values: Sequence[float], tolerance: float) -> float:
    """The share (%) of ``values`` (relative errors) at most ``tolerance``; exactly at it
    counts as within (1.05 / 1.0 - 1 is a hair above 0.05 in floats)."""
    return float((np.array(values) <= tolerance + 1e-9).mean() * 100)


#: how close a predicted gain of tuning must be to the measured one (issue 47)
GAIN_TOLERANCE = 0.15


def tuning_gain(view: View, method: str = "gnn") -> dict[str, Any] | None:
    """How well ``method`` predicts what tuning buys: per (model, CPU, ISA, threads) tested
    both as ``tuned:N`` and untuned (``default``, ``sampled``), the predicted gain (untuned
    over tuned) against the measured one. Per budget and base build: the share within
    :data:`GAIN_TOLERANCE` of it and the median error of the gain."""
    errors: dict[str, list[float]] = {}
    for result, methods, mask in view:
        if method not in methods:
            continue
        pred, true = methods[method].pred_ms, result.true_ms
        by_config: dict[str, dict[str, int]] = {}
        for i, key in enumerate(result.test["key"]):
            model, machine, threads, build = record_key_parts(key)
            if mask[i] and np.isfinite(pred[i]):
                kind = build_kind(build)
                name = build if kind == "tuned" else kind
                by_config.setdefault(f"{model}|{machine}|{threads}", {})[name] = i
        for builds in by_config.values():
            for tuned, t in builds.items():
                if not tuned.startswith("tuned:"):
                    continue
                for base in ("default", "sampled"):
                    if base in builds:
                        b = builds[base]
                        ratio = (pred[b] / pred[t]) / (true[b] / true[t])
                        errors.setdefault(f"{base} over {tuned}", []).append(
                            float(abs(ratio - 1)))
    if not errors:
        return None
    return {k: {"pairs": len(v), "within_share": within_share(v, GAIN_TOLERANCE),
                "median_error": float(np.median(v) * 100)} for k, v in sorted(errors.items())}


def _entry(results: View) -> dict[str, Any]:
    """A split's figures: all its test models, then each build apart (and each tuning
    budget, with the error of the predicted gain of tuning, where ``tuned:N`` was tested)."""
    entry = {"runs": len(results), "methods": _table(results), "by_build": _by_build(results)}
    budgets = _by_budget(results)
    if budgets:
        entry["by_budget"] = budgets
    gain = tuning_gain(results)
    if gain:
        entry["tuning_gain"] = gain
    return entry


def _leave_out(results: View) -> dict[str, Any]:
    """Per holdout, then the mean over holdouts, the worst holdout and their spread."""
    holdouts = sorted({str(r.run.holdout) for r, _, _ in results})
    per = {h: _entry([x for x in results if str(x[0].run.holdout) == h]) for h in holdouts}
    entry: dict[str, Any] = {"runs": len(results), "holdouts": len(holdouts), "methods": {},
                             "per_holdout": per, "by_build": _by_build(results)}
    methods = {m for e in per.values() for m in e["methods"]}
    for name in sorted(methods):
        scored = {h: e["methods"][name] for h, e in per.items() if name in e["methods"]}
        rows = list(scored.values())
        row = _mean_row(rows, (*COLUMNS, "models"))
        worst = max(scored, key=lambda h: scored[h]["mape"])
        row["mape_worst"] = float(scored[worst]["mape"])
        row["worst_holdout"] = worst
        row["mape_std"] = float(np.std([r["mape"] for r in rows]))  # across holdouts
        entry["methods"][name] = row
    return entry


#: splits whose runs' test records are scored as one pool (the others: per held-out part)
POOLED = ("random", "real_architectures", "held_out_architectures")


def split_views(results: Sequence[SplitResult],
                calibration_shots: int = BenchConfig.calibration_shots) -> dict[str, View]:
    """Each report split's runs; a held-out CPU gives two: at 0 shots (intervals widened by
    the other held-out CPUs' prior) and after ``calibration_shots`` calibration models
    (:func:`.splits.calibration_positions`), both scored on the models left once those are
    taken out (all their records)."""
    views: dict[str, View] = {}
    for key in SPLIT_KINDS:
        runs = [r for r in results if r.run.key == key]
        if not runs:
            continue
        if key != "leave_cpu_out":
            views[key] = [(r, r.methods, np.ones(len(r.true_ms), dtype=bool)) for r in runs]
            continue
        zero, shots = [], []
        for r in runs:
            chosen = calibration_positions(r.test, calibration_shots)
            rest = ~np.isin(np.array(r.test["model_id"]),
                            [r.test["model_id"][i] for i in chosen])
            zero.append((r, zero_shot(r, runs), rest))
            if len(chosen) >= MIN_MODELS:
                shots.append((r, {m: calibrated(x, r.test, chosen)
                                  for m, x in r.methods.items()}, rest))
        views["leave_cpu_out_0_shots"] = zero
        if shots:
            views[f"leave_cpu_out_{calibration_shots}_shots"] = shots
    return views


#: how far apart a serial build's predictions at two thread counts may be
THREAD_INVARIANCE_TOLERANCE = 0.05


def thread_invariance(view: View, method: str = "gnn") -> dict[str, Any] | None:
    """How ``method`` keeps a ``default`` build (no parallel loop anywhere) at one latency
    whatever the thread count, over every (model, CPU and ISA) tested at two or more thread
    counts (``groups``: counted once per run that tests it): the share whose predictions
    lie within :data:`THREAD_INVARIANCE_TOLERANCE` of each other (max / min - 1) and the
    worst such spread.

    ``within_share`` (the target) compares the predictions at one machine state, as a user
    gets them (:func:`gnnperf.bench.methods.one_state_twins`); ``across_records_*`` compares
    the records' own predictions, each at the machine state measured beside its label; the
    ``measured_*`` figures say what the labels themselves do. Runs stored before twins were
    recorded give only the across-records figure, and ``within_share`` is then that one."""
    spreads: list[float] = []
    twin_spreads: list[float] = []
    measured: list[float] = []

    def spread(values: np.ndarray) -> float:
        return float(values.max() / values.min() - 1)

    for result, methods, mask in view:
        if method not in methods:
            continue
        groups: dict[str, list[int]] = {}
        for i, key in enumerate(result.test["key"]):
            if not mask[i] or result.test["build"][i] != "default":
                continue
            model, machine, _, build = record_key_parts(key)
            groups.setdefault(f"{model}|{machine}|{build}", []).append(i)
        pred, twin = methods[method].pred_ms, methods[method].twin_ms
        for rows in groups.values():
            if len(rows) < 2 or not np.isfinite(pred[rows]).all():
                continue
            spreads.append(spread(pred[rows]))
            measured.append(spread(result.true_ms[rows]))
            if twin is not None and np.isfinite(twin[rows]).all():
                twin_spreads.append(spread(twin[rows]))
    if not spreads:
        return None

    def share(values: list[float]) -> float:
        return within_share(values, THREAD_INVARIANCE_TOLERANCE)

    out = {"groups": len(spreads), "across_records_within_share": share(spreads),
           "across_records_worst_spread": float(max(spreads) * 100),
           "measured_within_share": share(measured),
           "measured_median_spread": float(np.median(measured) * 100)}
    if twin_spreads:
        return {**out, "one_state_groups": len(twin_spreads),
                "within_share": share(twin_spreads),
                "worst_spread": float(max(twin_spreads) * 100)}
    return {**out, "within_share": out["across_records_within_share"],
            "worst_spread": out["across_records_worst_spread"]}


def kernel_model_unseen(view: View) -> dict[str, Any] | None:
    """The runs' kernel models on the workloads each was kept from, pooled: per-schedule
    MAPE weighted by schedules, within-workload Spearman (a workload's schedules on one
    hardware setting ranked against their measured times) by the groups ranked."""
    parts = [r.kernel_model_unseen for r, _, _ in view if r.kernel_model_unseen]
    if not parts:
        return None
    out = {"runs": len(parts), **_pooled_kernel_figures(parts)}
    cpus = sorted({c for p in parts for c in p.get("by_cpu", {})})  # runs since 2026-12-05
    if cpus:
        out["by_cpu"] = {c: _pooled_kernel_figures([p["by_cpu"][c] for p in parts
                                                    if c in p.get("by_cpu", {})])
                         for c in cpus}
    return out


def _pooled_kernel_figures(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Kernel-model figures of several runs as one: MAPE weighted by schedules, Spearman
    by the groups each ranked."""
    schedules = sum(p["schedules"] for p in parts)
    ranked = [p for p in parts if p["ranked_groups"] and p["group_spearman"] is not None]
    groups = sum(p["ranked_groups"] for p in ranked)
    return {"schedules": schedules,
            "workloads": sum(p["workloads"] for p in parts),
            "schedule_mape": sum(p["schedule_mape"] * p["schedules"] for p in parts) / schedules,
            "group_spearman": (sum(p["group_spearman"] * p["ranked_groups"] for p in ranked)
                               / groups if groups else None)}


def summarise(views: dict[str, View], noise_floor_by_cpu: dict[str, float]) -> dict[str, Any]:
    """The report's ``splits``: one entry per view."""
    splits: dict[str, Any] = {}
    for name, view in views.items():
        splits[name] = _entry(view) if name in POOLED else _leave_out(view)
        invariance = thread_invariance(view)
        if invariance is not None:
            splits[name]["thread_invariance"] = invariance
        kernel = kernel_model_unseen(view)
        if kernel is not None:
            splits[name]["kernel_model_unseen"] = kernel
        if name in ("random", "held_out_architectures"):
            splits[name]["by_cpu"] = {}
            for cpu in sorted({c for r, _, _ in view for c in r.test["cpu"]}):
                part = [(r, m, mask & (np.array(r.test["cpu"]) == cpu)) for r, m, mask in view]
                splits[name]["by_cpu"][cpu] = {"noise_floor_mape": noise_floor_by_cpu.get(cpu),
                                               "methods": _table(part)}
    return splits

