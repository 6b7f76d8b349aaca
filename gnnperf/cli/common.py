"""Helpers that several ``gnnperf`` subcommands share: target options, input shapes,
``--max-slowdown``, zoo family lists and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnnperf.errors import DatasetError, GnnperfError, MeasurementError, one_line


def add_target_args(p: argparse.ArgumentParser, threads: bool = True) -> None:
    p.add_argument("--isa", default=None, help="x86-64, x86-64-v2, x86-64-v3, x86-64-v4 "
                   "(default: the best this CPU supports)")
    if threads:
        p.add_argument("--threads", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("--build", default="default",
                   help="default, dlight, sampled:SEED, best-of:S or tuned:N")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="static shape for a dynamic input (repeatable)")


def parse_input_shapes(items: Sequence[str]) -> dict[str, list[int]] | None:
    if not items:
        return None
    out: dict[str, list[int]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise GnnperfError(f"--input-shape wants NAME=D0,D1,..., got '{item}'") from None
    return out


def parse_int_list(text: str | None, option: str,
                   what: str = "comma-separated integers") -> list[int] | None:
    """An option's comma-separated integers (None when not given); a one-line error
    naming the option otherwise."""
    if text is None:
        return None
    try:
        return [int(t) for t in text.split(",")]
    except ValueError:
        raise GnnperfError(f"{option} wants {what}, got '{text}'") from None


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


def lower_from_args(args: argparse.Namespace, threads: int | None, database: Any = None) -> Any:
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.pipeline import lower_onnx

    hw = HardwareSpec.local(args.isa, threads, measure=False)
    return hw, lower_onnx(args.model, hw, args.build, parse_input_shapes(args.input_shape),
                          database)


def tuned_schedules(args: argparse.Namespace) -> Any:
    """The searched schedules of this machine's hardware config for a searched build: the
    measured ones of the kernel dataset (``best-of``) or its tuning runs (``tuned:N``)."""
    from gnnperf.collect.kernels import tuned_database, tuning_database
    from gnnperf.hardware.spec import HardwareSpec
    from gnnperf.lowering.build_config import BuildConfig

    build = BuildConfig.parse(args.build)
    if not build.searched:
        return None
    hw = HardwareSpec.local(args.isa, args.threads, measure=False)
    if build.kind == "tuned":
        return tuning_database(args.root, hw.record_hw_id, build.trials)[0]
    return tuned_database(args.root, hw.record_hw_id)


def slowdown_override(args: argparse.Namespace) -> dict[str, float]:
    """``--max-slowdown`` as a MeasureSettings override (none when not given)."""
    if args.max_slowdown is None:
        return {}
    if args.max_slowdown < 1.0:
        raise MeasurementError(f"--max-slowdown is a ratio to the speed probe's best, at "
                               f"least 1.0, got {args.max_slowdown}")
    return {"max_slowdown": args.max_slowdown}


def parse_families(text: str, real_architectures: bool = False) -> list[str]:
    """A comma-separated family list; ``all`` is every generated family, and the ``hf-*``
    real architectures too when ``real_architectures``; ``corpus`` is every ``tf-*``
    architecture, the smallest rung of every model type first; ``sweep`` every ``op-*``
    operator."""
    from gnnperf import zoo

    families = [f.strip() for f in text.split(",") if f.strip()]
    if "corpus" in families:
        i = families.index("corpus")
        families[i:i + 1] = zoo.corpus_order()
    if "sweep" in families:
        i = families.index("sweep")
        families[i:i + 1] = list(zoo.SWEEP)
    if families != ["all"]:
        return families
    return list(zoo.FAMILIES) + (list(zoo.REAL_ARCHITECTURES) if real_architectures else [])


def add_kernel_collector_args(p: argparse.ArgumentParser, what: str, count: int,
                              hw: str) -> None:
    """What ``collect-kernels`` and ``collect-tuning`` share: the dataset folder, the zoo
    models to visit (:func:`zoo_specs`), the hardware configs, when to stop and how
    quiet the machine must be."""
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help=f"dataset folder: {what} go to DIR/kernels")
    p.add_argument("--families", default="all",
                   help="comma-separated families, 'corpus', 'sweep', or 'all' (generated "
                        "and hf-* alike)")
    p.add_argument("--count", type=int, default=count, help="seeds per family")
    p.add_argument("--start-seed", type=int, default=0)
    p.add_argument("--hw", default=hw, help="ISA:THREADS pairs")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop after the model in progress once this many minutes passed")
    p.add_argument("--quiet-timeout", type=float, default=float("inf"),
                   help="seconds to wait for a quiet machine before measuring anyway")
    add_max_slowdown(p)


def zoo_specs(args: argparse.Namespace) -> list[Any]:
    """The zoo models a kernel collector visits (:func:`add_kernel_collector_args`): each
    family's seeds, interleaved across families."""
    from gnnperf.collect.models import interleaved_specs

    families = parse_families(args.families, real_architectures=True)
    return list(interleaved_specs(families, args.count, args.start_seed))


def add_max_slowdown(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-slowdown", type=float, default=None, metavar="RATIO",
                   help="measure only while the speed probe runs at most RATIO times slower "
                        "than its best (default 1.15; a host whose probe never settles "
                        "near its best needs more, see docs/measurement.md)")


def read_plan(path: Path) -> dict[str, int]:
    """A ``gnnperf sweep-plan`` file: {family: seeds to have measured}."""
    from gnnperf import zoo

    try:
        plan = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read the plan {path}: {one_line(exc)}") from exc
    if not isinstance(plan, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in plan.items()):
        raise DatasetError(f"{path} is not a plan: a JSON object of family -> seed count")
    unknown = sorted(set(plan) - zoo.KNOWN_FAMILIES)
    if unknown:
        raise DatasetError(f"{path}: unknown families {', '.join(unknown)}")
    return plan
