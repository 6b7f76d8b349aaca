"""The corpus families whose models bring the most workloads the kernel dataset lacks,
in the order a coverage run should visit them (issue 45's kernel-dataset target).

Issue 45 counts the workloads of the corpus's ``default``-build graphs
(``gnnperf.collect.kernels.database.corpus_workloads``). Visiting the corpus in its own
order spends most of the time elsewhere: in session 42 (Intel guest) a coverage run timed
184 workloads of 18 models, of which 41 were ones the figure counts. The rest belonged
to models over the ``default`` budget (no ``default`` graph: ``tf-longformer``,
``tf-led``) or were drawn already. This orders the families greedily: next, each time,
the one whose models hold the most counted workloads no hardware id has drawn 8 seeds of
yet (``workloads_drawn``), less those an earlier family brings. A family's models are
its seeds with a ``default`` record: up to 3 on 2026-12-01 (90 families have 1, 77 have
2, 33 have 3), hence ``--count 3``; the collector goes seed by seed over the families.

    python tools/coverage_order.py --root datasets > /tmp/families.txt
    tools/collect_and_commit.sh --code /work/collector --kernels 10 -- \\
        --out "$PWD/datasets" --families "$(cat /tmp/families.txt)" --count 3 \\
        --schedules 8 --hw x86-64-v3:2 --skip-covered
"""

from __future__ import annotations

import argparse
import sys

from gnnperf.collect.kernels.database import (
    COVERED_SCHEDULES,
    corpus_workloads_by_family,
    workloads_drawn,
)
from gnnperf.store.folder import DatasetFolder


def greedy_order(missing: dict[str, set[str]]) -> list[tuple[str, int]]:
    """Families by the missing workloads each adds to those before it (ties by name),
    with that count; families that add none are left out."""
    left = {family: set(workloads) for family, workloads in missing.items()}
    order: list[tuple[str, int]] = []
    while left:
        family = max(sorted(left), key=lambda f: len(left[f]))
        gain = left.pop(family)
        if not gain:
            break
        order.append((family, len(gain)))
        for workloads in left.values():
            workloads -= gain
    return order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="datasets", help="dataset folder")
    parser.add_argument("--top", type=int, default=None, help="print only the first N")
    args = parser.parse_args()
    folder = DatasetFolder.resolve(args.root)
    drawn = workloads_drawn(folder)
    missing = {family: {w for w in workloads if drawn[w] < COVERED_SCHEDULES}
               for family, workloads in corpus_workloads_by_family(folder).items()}
    order = greedy_order(missing)[:args.top]
    total = len(set().union(*missing.values())) if missing else 0
    print(f"{len(order)} families hold {sum(n for _, n in order)} of the {total} corpus "
          f"workloads not drawn with {COVERED_SCHEDULES} seeds; first 10: "
          + ", ".join(f"{f} {n}" for f, n in order[:10]), file=sys.stderr)
    print(",".join(family for family, _ in order))
    return 0


if __name__ == "__main__":
    sys.exit(main())
