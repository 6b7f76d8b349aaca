"""The report as markdown (``benchmarks/README.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gnnperf.bench.report.figures import GAIN_TOLERANCE, THREAD_INVARIANCE_TOLERANCE
from gnnperf.estimators.gnn.training import INTERVAL_COVERAGE


def markdown(report: dict[str, Any]) -> str:
    rule = report["budget_rule"]
    lines = ["# gnnperf benchmark", "",
             f"Command: `{report['command']}` (makes every run below; a call with `--splits`, "
             "`--max-minutes` or `--jobs` runs part of it, and each run names its call)  ",
             f"Dataset fingerprint: `{report['dataset']}` ({report['records']} records, "
             f"{report['tested_records']} measured under v2 and tested on)  ",
             f"CPU that wrote this report: {report['cpu']}  ",
             f"Runs: {report['runs_done']} of {report['runs_planned']}"
             + (" (**partial**: the rest are still to run)" if report["partial"] else "")
             + f", {report['minutes']:.1f} min of training and scoring in all  ",
             f"Budget rule (every learned method): {rule}.  ",
             "Noise floor (A/A MAPE of repeated whole-model measurements) per CPU: "
             + (", ".join(f"{c} {v:.2f}%" for c, v in report["noise_floor_by_cpu"].items())
                or "n/a") + "  ",
             "Metrics in percent except Spearman and Kendall; `coverage`: share of test "
             f"models inside the method's {INTERVAL_COVERAGE:.0%} interval.", ""]
    if report["skipped"]:
        lines += ["Splits not run on this dataset:", ""]
        lines += [f"- {k}: {why}" for k, why in report["skipped"].items()]
        lines.append("")
    lines += ["## Targets", "", "| split | target | value | met | missed by |",
              "|---|---|---|---|---|"]
    for t in report["targets"]:
        missed = t.get("missed_by")
        gap = "" if t["met"] or missed is None else f"{missed:.3f}"
        lines.append(f"| {t['split']} | {t['target']} | {t['value']:.3f} | "
                     f"{'yes' if t['met'] else '**no**'} | {gap} |")
    lines.append("")
    cols = ("mape", "mape_std", "rmspe", "acc10", "spearman", "coverage", "models")
    for split, entry in report["splits"].items():
        lines += [f"## {split}", "", f"{entry['runs']} run(s).", ""]
        if split.endswith("_0_shots"):
            lines += _prior_lines(report.get("unseen_cpu_prior"))
        lines += _rows(entry["methods"], cols)
        if "mape_worst" in next(iter(entry["methods"].values()), {}):
            lines.append("")
            lines += ["MAPE per holdout:", ""]
            methods = list(entry["methods"])
            lines += ["| holdout | " + " | ".join(methods) + " |",
                      "|---" * (len(methods) + 1) + "|"]
            for holdout, e in entry["per_holdout"].items():
                lines.append(f"| {holdout} | " + " | ".join(
                    f"{e['methods'][m]['mape']:.2f}" if m in e["methods"] else "n/a"
                    for m in methods) + " |")
        for build, table in {**entry["by_build"], **entry.get("by_budget", {})}.items():
            if table:
                lines += ["", f"Build `{build}`:", ""] + _rows(table, ("mape", "spearman",
                                                                        "coverage", "models"))
        for pair, gain in entry.get("tuning_gain", {}).items():
            lines += ["", f"Gain of tuning, {pair} (gnn): {gain['pairs']} (model, CPU, ISA, "
                          f"threads); {gain['within_share']:.1f}% predicted within "
                          f"{GAIN_TOLERANCE:.0%} of the measured gain (median error "
                          f"{gain['median_error']:.1f}%)."]
        if "kernel_model_unseen" in entry:
            k = entry["kernel_model_unseen"]
            rho = k["group_spearman"]
            lines += ["", f"Kernel model on the workloads of the held-out architectures, which "
                          f"it never saw ({k['runs']} run(s), {k['schedules']} schedules of "
                          f"{k['workloads']} workloads): per-schedule MAPE "
                          f"{k['schedule_mape']:.1f}%, within-workload Spearman (each "
                          f"workload's schedules on one hardware setting) "
                          + (f"{rho:.3f}." if rho is not None else "n/a.")
                          + "".join(f" On {cpu}: {c['schedule_mape']:.1f}% over {c['schedules']} "
                                    f"schedules." for cpu, c in k.get("by_cpu", {}).items())]
        if "thread_invariance" in entry:
            t = entry["thread_invariance"]
            tol = f"{THREAD_INVARIANCE_TOLERANCE:.0%}"
            one_state = (f"at one machine state (as a user predicts), {t['within_share']:.1f}% "
                         f"of {t['one_state_groups']} within {tol} (worst spread "
                         f"{t['worst_spread']:.2f}%); " if "one_state_groups" in t else "")
            lines += ["", f"Thread invariance of `default` builds (gnn): {t['groups']} "
                          f"(model, CPU, ISA) tested at two or more thread counts; "
                          f"{one_state}each record at the machine state measured beside "
                          f"its label, {t['across_records_within_share']:.1f}% within {tol} "
                          f"(worst spread {t['across_records_worst_spread']:.2f}%); "
                          f"measured, {t['measured_within_share']:.1f}% within it (median "
                          f"spread {t['measured_median_spread']:.2f}%)."]
        for cpu, e in entry.get("by_cpu", {}).items():
            floor = e["noise_floor_mape"]
            lines += ["", f"CPU `{cpu}` (noise floor "
                          + (f"{floor:.2f}%" if floor else "n/a") + "):", ""]
            lines += _rows(e["methods"], ("mape", "spearman", "coverage", "models"))
        lines += ["", f"![{split}](plots/{split}.png)", ""]
    lines += runs_table(report.get("runs", []))
    return "\n".join(lines) + "\n"


def runs_table(runs: list[dict[str, Any]]) -> list[str]:
    """Which call made each stored run, on which CPU, and when: a report spans sessions."""
    if not runs:
        return []
    lines = ["## Runs", "", "Each stored run: its minutes of training and scoring, the call "
             "that made it, the CPU it trained on and when it finished (UTC); runs stored "
             "before these were recorded give the commit that added their file instead.", "",
             "| run | minutes | call | CPU | finished |", "|---|---|---|---|---|"]
    for r in runs:
        if "call" in r:
            lines.append(f"| {r['run']} | {r['minutes']:.1f} | `{r['call']}` | {r['cpu']} | "
                         f"{r['finished']} |")
        else:
            added = r.get("added_in_commit")
            commit, when = added.split(" ", 1) if added else ("no commit", "not recorded")
            lines.append(f"| {r['run']} | {r['minutes']:.1f} | not recorded (file added in "
                         f"{commit}) | not recorded | {when} |")
    return lines + [""]


def _prior_lines(prior: dict[str, Any] | None) -> list[str]:
    """What the 0-shot intervals include, and the GNN's prior from every held-out CPU."""
    lines = ["Intervals at 0 shots are widened, for each method and held-out CPU, by the "
             "spread of that method's per-cell bias on the *other* held-out CPUs "
             "(`UnseenCpuPrior`; a CPU alone leaves them as the method gave them)."]
    if prior:
        cells = ", ".join(f"{c} {v:.3f}" for c, v in prior["cells"].items()) or "none"
        cpus = sorted({b["cpu"] for b in prior["biases"]})
        lines.append(f"The GNN's prior from all {len(cpus)} held-out CPUs "
                     f"(`unseen_cpu_prior.json`): pooled log spread "
                     f"{prior['pooled_log_spread']:.3f}; per cell (from 3 CPUs up): {cells}.")
    return [" ".join(lines), ""]


def _rows(table: dict[str, dict[str, float]], cols: Sequence[str]) -> list[str]:
    lines = ["| method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for method, row in table.items():
        lines.append(f"| {method} | " + " | ".join(
            f"{row[c]:.3f}" if c in row else "n/a" for c in cols) + " |")
    return lines

