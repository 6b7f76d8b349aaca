"""What a person reads: a prediction's per-kernel breakdown, and a ranked search space.

Drawn with matplotlib (Agg backend, files only); the figures are written to a temp file
and renamed, like every other output.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .atomic import atomic_path

if TYPE_CHECKING:
    from .predictor import Prediction

#: kernels named in a breakdown; the rest are summed into one bar
TOP_KERNELS = 12


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=120,
                    bbox_inches="tight")
    _pyplot().close(fig)
    return path


def plot_breakdown(prediction: Prediction, path: str | os.PathLike[str],
                   top: int = TOP_KERNELS, title: str | None = None) -> Path:
    """The kernels that make up most of the predicted latency, each labelled with its fused
    operators and its share, the rest in one bar; the whole-model interval in the title."""
    plt = _pyplot()
    kernels = sorted(prediction.kernels, key=lambda k: k.ms, reverse=True)
    total = sum(k.ms for k in kernels) or 1.0
    shown = kernels[:top]
    labels = [f"#{k.index} {k.name} ({k.ms / total * 100:.1f}%)" for k in shown]
    values = [k.ms for k in shown]
    if len(kernels) > top:
        rest = sum(k.ms for k in kernels[top:])
        labels.append(f"{len(kernels) - top} other kernels ({rest / total * 100:.1f}%)")
        values.append(rest)
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(values) + 1.6))
    ax.barh(range(len(values)), values, color="tab:blue")
    ax.set_yticks(range(len(values)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("predicted kernel time (ms)")
    ax.set_title((title + "\n" if title else "")
                 + f"{prediction.hw_id}, build {prediction.build}: "
                 f"{prediction.latency_ms:.3f} ms predicted, "
                 f"{prediction.coverage * 100:.0f}% interval "
                 f"[{prediction.low_ms:.3f}, {prediction.high_ms:.3f}] ms", fontsize=9)
    return _save(fig, path)


def plot_ranking(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Predicted latency (with its interval) against GFLOPs, one point per candidate."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    x = [r["gflop"] for r in rows]
    y = [r["latency_ms"] for r in rows]
    err = [[r["latency_ms"] - r["low_ms"] for r in rows],
           [r["high_ms"] - r["latency_ms"] for r in rows]]
    ax.errorbar(x, y, yerr=err, fmt="o", ms=4, alpha=0.7, elinewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("GFLOP")
    ax.set_ylabel("predicted latency (ms)")
    if rows:
        ax.set_title(f"{len(rows)} models on {rows[0]['hw']}, build {rows[0]['build']}",
                     fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)
