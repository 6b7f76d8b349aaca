"""One figure per split: predicted against measured, and the error CDF of every method."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnnperf.bench.methods import LEARNED_ADDITIVE
from gnnperf.bench.report import View
from gnnperf.prediction.plots import pyplot, save_figure

#: methods drawn in the scatter panel (the GNN, the oracle, the best learned additive)
SCATTER = ("gnn", "measured_kernel_sum")


def _pooled(view: View, method: str) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, measured) ms over the view's runs, the models each run scored."""
    pred, true = [], []
    for result, methods, mask in view:
        if method in methods:
            pred.append(methods[method].pred_ms[mask])
            true.append(result.true_ms[mask])
    if not pred:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(pred), np.concatenate(true)


def plot_split(name: str, view: View, table: dict[str, dict[str, float]], path: Path) -> Path:
    plt = pyplot()
    fig, (ax_scatter, ax_cdf) = plt.subplots(1, 2, figsize=(11, 4.5))
    learned = [m for m in LEARNED_ADDITIVE if m in table]
    shown = [m for m in SCATTER if m in table]
    if learned:
        shown.append(min(learned, key=lambda m: table[m]["mape"]))
    for method in shown:
        pred, true = _pooled(view, method)
        ok = np.isfinite(pred)
        ax_scatter.loglog(true[ok], pred[ok], ".", ms=4, alpha=0.6,
                          label=f"{method} ({table[method]['mape']:.1f}%)")
    _, true = _pooled(view, "gnn")
    if len(true):
        lo, hi = float(np.min(true)), float(np.max(true))
        ax_scatter.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax_scatter.set_xlabel("measured ms")
    ax_scatter.set_ylabel("predicted ms")
    ax_scatter.set_title(f"{name}: predicted vs measured", fontsize=10)
    ax_scatter.legend(fontsize=7)
    for method in table:
        pred, true = _pooled(view, method)
        err = np.abs(pred - true) / true * 100
        err = np.sort(err[np.isfinite(err)])
        if len(err):
            ax_cdf.plot(err, np.linspace(0, 1, len(err)), label=method,
                        lw=2.0 if method == "gnn" else 1.0)
    ax_cdf.set_xscale("log")
    ax_cdf.set_xlabel("|error| %")
    ax_cdf.set_ylabel("fraction of test models")
    ax_cdf.set_title(f"{name}: error CDF", fontsize=10)
    ax_cdf.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)
