"""The ``gnnperf`` command line (also ``python -m gnnperf``).

Every :class:`gnnperf.errors.GnnperfError` becomes one line on stderr and exit
code 2; ``--debug`` shows the traceback instead.

The subcommands live in :mod:`.measuring` (graph, measure, collect, collect-kernels,
collect-tuning, hw), :mod:`.modelling` (train, train-kernels, predict, advise, rank, bench),
:mod:`.datasets` (dataset) and :mod:`.server` (serve); their shared helpers in
:mod:`.common`. Heavy libraries (torch, TVM) are imported only inside the commands.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gnnperf.cli import datasets, measuring, modelling, server
from gnnperf.errors import GnnperfError, one_line

__all__ = ["build_parser", "main"]

# ``gnnperf --help`` lists the subcommands in this order.
_REGISTER = (
    measuring.register_graph,
    measuring.register_measure,
    measuring.register_collect,
    measuring.register_collect_kernels,
    measuring.register_collect_tuning,
    measuring.register_sweep_plan,
    modelling.register_train,
    modelling.register_train_kernels,
    modelling.register_predict,
    modelling.register_advise,
    modelling.register_rank,
    server.register_serve,
    datasets.register_dataset,
    modelling.register_bench,
    measuring.register_hw,
    measuring.register_calibrate,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gnnperf", description="Predict and measure latency of ONNX models on CPUs (TVM).")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in _REGISTER:
        register(sub)
    _accept_debug_anywhere(parser)
    return parser


def _accept_debug_anywhere(parser: argparse.ArgumentParser) -> None:
    """Let ``--debug`` follow the subcommand too (``gnnperf predict m.onnx --debug``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                   help="show tracebacks")
                _accept_debug_anywhere(child)


def main(argv: Sequence[str] | None = None, *, forward: bool = True) -> int:
    """Run ``gnnperf ARGV``; with ``forward``, a served command goes to a listening
    ``gnnperf serve`` (:mod:`.server`) when there is one."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if forward and args.command in server.SERVED:
        code = server.forward(args.command, list(sys.argv[1:] if argv is None else argv))
        if code is not None:
            return code
    try:
        return int(args.func(args) or 0)
    except (GnnperfError, OSError) as exc:
        if args.debug:
            raise
        print(f"gnnperf: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gnnperf: interrupted", file=sys.stderr)
        return 130
