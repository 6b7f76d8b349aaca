"""Train the latency GNN on the shipped dataset: ``python train.py [options]``.

Same options as ``gnnperf train``; with none it trains on ``datasets/`` with a random
split, early-stops on validation and writes ``checkpoints/``.
"""

from __future__ import annotations

import sys

from gnnperf.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
