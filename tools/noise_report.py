"""How far two measurements of the same records agree, per CPU: the noise floor in detail.

Reads the re-measurements under ``ROOT/noise`` (``gnnperf dataset remeasure``) and their
first measurements, and prints per CPU (its signature id: two CPUs with one model name
are told apart) the pairs' gap in time, MAPE, median |error|,
share within 5% and 10%, mean signed error, MAPE per build/threads and per latency
decade, the MAPE of pairs whose two measurements both had a CV under 5%, and how well
the speed probe's ratio explains the pair's ratio. Only pairs taken under the speed probe
are used, as in ``gnnperf dataset stats``.

    python tools/noise_report.py [--root datasets/]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from gnnperf.data import default_root, noise_pairs
from gnnperf.hardware.cpu_identity import signature_of_hw
from gnnperf.store.shards import is_probed

Pair = tuple[dict[str, Any], dict[str, Any]]
DECADES = ((0.0, 0.1), (0.1, 1.0), (1.0, 10.0), (10.0, float("inf")))


def _mape(err: np.ndarray) -> str:
    return f"{np.mean(np.abs(err)) * 100:.1f}%" if len(err) else "-"


def report(cpu: str, pairs: list[Pair]) -> None:
    first = np.array([r["whole"]["median_ms"] for r, _ in pairs])
    again = np.array([o["whole"]["median_ms"] for _, o in pairs])
    err = (again - first) / first
    gaps = np.array([(o["created_at"] - r["created_at"]) / 60 for r, o in pairs])
    print(f"{cpu}: {len(pairs)} pairs, {gaps.min():.0f}-{gaps.max():.0f} min apart "
          f"(median {np.median(gaps):.0f})")
    print(f"  MAPE {_mape(err)}, median |error| {np.median(np.abs(err)) * 100:.1f}%, "
          f"within 5% {np.mean(np.abs(err) <= 0.05):.0%}, within 10% "
          f"{np.mean(np.abs(err) <= 0.10):.0%}, mean signed {np.mean(err) * 100:+.1f}%, "
          f"range {err.min() * 100:+.0f}% .. {err.max() * 100:+.0f}%")
    groups = sorted({f"{r['build']}/{r['hw']['threads']}t" for r, _ in pairs})
    tags = np.array([f"{r['build']}/{r['hw']['threads']}t" for r, _ in pairs])
    print("  by build/threads: " + ", ".join(
        f"{g} {_mape(err[tags == g])} ({np.sum(tags == g)})" for g in groups))
    print("  by latency: " + ", ".join(
        f"{lo:g}-{hi:g} ms {_mape(err[(first >= lo) & (first < hi)])} "
        f"({np.sum((first >= lo) & (first < hi))})" for lo, hi in DECADES))
    steady = np.array([max(r["whole"]["cv"], o["whole"]["cv"]) < 0.05 for r, o in pairs])
    print(f"  pairs with both CVs under 5%: {steady.sum()}, MAPE {_mape(err[steady])}")
    probe = np.log([o["slowdown"] / r["slowdown"] for r, o in pairs])
    print(f"  correlation of log pair ratio with log probe ratio: "
          f"{np.corrcoef(np.log1p(err), probe)[0, 1]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=None, help="dataset folder (default: shipped)")
    args = ap.parse_args()
    pairs = [(r, o) for r, o in noise_pairs(args.root or default_root())
             if is_probed(r) and is_probed(o)]
    cpus = [signature_of_hw(r["hw"]).id for r, _ in pairs]
    for cpu in sorted(set(cpus)):
        report(cpu, [pair for pair, c in zip(pairs, cpus, strict=True) if c == cpu])


if __name__ == "__main__":
    main()
