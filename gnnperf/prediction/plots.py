"""What a person reads: a prediction's per-kernel breakdown, and a ranked search space.

Drawn with matplotlib (Agg backend, files only); the figures are written to a temp file
and renamed, like every other output.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnnperf.atomic import atomic_path

#: kernels named in a breakdown; the rest are summed into one bar
TOP_KERNELS = 12


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike[str], **savefig: Any) -> Path:
    """Write ``fig`` through a temp file renamed onto ``path`` (format from its suffix),
    then close it; ``savefig`` are matplotlib's options (dpi, bbox_inches)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **savefig)
    pyplot().close(fig)
    return path


def plot_breakdown(kernels: Sequence[tuple[str, float]], path: str | os.PathLike[str], *,
                   title: str, top: int = TOP_KERNELS) -> Path:
    """The kernels (label, predicted ms) that make up most of the latency, each with its
    share, the rest in one bar; ``title`` says what was predicted."""
    plt = pyplot()
    ranked = sorted(kernels, key=lambda k: k[1], reverse=True)
    total = sum(ms for _, ms in ranked) or 1.0
    labels = [f"{label} ({ms / total * 100:.1f}%)" for label, ms in ranked[:top]]
    values = [ms for _, ms in ranked[:top]]
    if len(ranked) > top:
        rest = sum(ms for _, ms in ranked[top:])
        labels.append(f"{len(ranked) - top} other kernels ({rest / total * 100:.1f}%)")
        values.append(rest)
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(values) + 1.6))
    ax.barh(range(len(values)), values, color="tab:blue")
    ax.set_yticks(range(len(values)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("predicted kernel time (ms)")
    ax.set_title(title, fontsize=9)
    return save_figure(fig, path, dpi=120, bbox_inches="tight")


def plot_ranking(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Predicted latency (with its interval) against GFLOPs, one point per candidate."""
    plt = pyplot()
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
    return save_figure(fig, path, dpi=120, bbox_inches="tight")


def plot_advice(rows: Sequence[Any], path: str | os.PathLike[str], *, title: str) -> Path:
    """One bar per (ISA, threads, build) row of ``gnnperf advise`` (``latency_ms``,
    ``low_ms``, ``high_ms``), its interval as an error bar, a colour per build."""
    plt = pyplot()
    builds = list(dict.fromkeys(r.build for r in rows))
    colours = {b: f"C{i}" for i, b in enumerate(builds)}
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.6))
    for i, r in enumerate(rows):
        ax.barh(i, r.latency_ms, color=colours[r.build],
                xerr=[[r.latency_ms - r.low_ms], [r.high_ms - r.latency_ms]],
                error_kw={"elinewidth": 0.8, "capsize": 2})
    ax.set_yticks(range(len(rows)), [f"{r.isa} {r.threads}t {r.build}" for r in rows],
                  fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("predicted latency (ms), 90% interval")
    ax.set_title(title, fontsize=9)
    return save_figure(fig, path, dpi=120, bbox_inches="tight")
