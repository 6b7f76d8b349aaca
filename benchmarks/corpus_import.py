"""Which corpus architectures TVM takes: each one built, exported to ONNX, imported into Relax,
lowered with the default CPU pipeline and compiled, at its first input size.

    python benchmarks/corpus_import.py [--out benchmarks/corpus_import.json] [--jobs 2]

Every architecture gets a row: ``ok``, or the stage that failed (build, export, import,
lower, compile, timeout) and the one-line reason. Resumable: rows already in ``--out`` are
kept. Prints the import success rate, overall and per modality.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from collections import Counter
from pathlib import Path
from typing import Any

from gnnperf.atomic import write_text


def check(name: str) -> dict[str, Any]:
    """One architecture through every stage; the first stage that raises is its verdict."""
    import warnings

    warnings.simplefilter("ignore")
    from gnnperf import zoo
    from gnnperf.errors import one_line
    from gnnperf.frontend import import_to_relax, load_onnx
    from gnnperf.lowering.pipeline import compile_lowered, lower

    start = time.time()
    stage = "build"
    try:
        spec = zoo.sample_spec(name, 0)
        model = zoo.build_model(spec)
        del model
        stage = "export"
        proto = zoo.export_onnx(spec)
        stage = "import"
        mod = import_to_relax(load_onnx(proto))
        stage = "lower"
        lowered = lower(mod, {"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2}, "default")
        stage = "compile"
        compile_lowered(lowered)
        return {"name": name, "status": "ok", "nodes": len(proto.graph.node),
                "seconds": round(time.time() - start, 1)}
    except BaseException as exc:  # noqa: BLE001 - every failure is a verdict to record
        return {"name": name, "status": stage,
                "reason": f"{type(exc).__name__}: {one_line(exc)}"[:400],
                "seconds": round(time.time() - start, 1)}


def _preload() -> None:
    """Import the heavy modules once in the parent, so each forked check starts warm."""
    import transformers  # noqa: F401

    import gnnperf.frontend  # noqa: F401
    import gnnperf.lowering.pipeline  # noqa: F401
    import gnnperf.zoo  # noqa: F401


def _worker(name: str, queue: mp.Queue) -> None:
    queue.put(check(name))


def run_one(name: str, timeout_s: float) -> dict[str, Any]:
    queue: mp.Queue = mp.Queue()
    proc = mp.get_context("fork").Process(target=_worker, args=(name, queue))
    proc.start()
    proc.join(timeout_s)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return {"name": name, "status": "timeout", "reason": f"over {timeout_s:.0f} s"}
    try:
        return queue.get(timeout=5)
    except Exception:  # noqa: BLE001 - a crashed worker (segfault) leaves nothing
        return {"name": name, "status": "crash", "reason": f"exit code {proc.exitcode}"}


def summarise(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from gnnperf.zoo.corpus import CATALOG

    by_modality: dict[str, Counter[str]] = {}
    types_ok: set[str] = set()
    for name, row in rows.items():
        arch = CATALOG[name]
        by_modality.setdefault(arch.modality, Counter())[row["status"]] += 1
        if row["status"] == "ok":
            types_ok.add(arch.model_type)
    ok = sum(r["status"] == "ok" for r in rows.values())
    return {
        "architectures": len(rows),
        "ok": ok,
        "success_rate": round(ok / max(1, len(rows)), 4),
        "model_types_ok": len(types_ok),
        "model_types": len({CATALOG[n].model_type for n in rows}),
        "by_stage": dict(Counter(r["status"] for r in rows.values())),
        "by_modality": {m: dict(c) for m, c in sorted(by_modality.items())},
    }


def main() -> None:
    from gnnperf.zoo.corpus import CATALOG

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/corpus_import.json"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--only", default="", help="comma-separated names (default: all)")
    parser.add_argument("--redo", action="store_true", help="check the stored rows again")
    parser.add_argument("--rung", type=int, default=None,
                        help="only this rung of every model type (a quick survey)")
    args = parser.parse_args()
    _preload()
    rows: dict[str, dict[str, Any]] = {}
    if args.out.exists() and not args.redo:
        rows = {r["name"]: r for r in json.loads(args.out.read_text())["architectures"]}
    names = [n for n in (args.only.split(",") if args.only else CATALOG)
             if n not in rows and (args.rung is None or CATALOG[n].rung == args.rung)]
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, n, args.timeout) for n in names]
        for i, fut in enumerate(tqdm(futures, unit="arch")):
            row = fut.result()
            rows[row["name"]] = row
            if i % 10 == 9 or i == len(futures) - 1:
                write_text(args.out, json.dumps(
                    {"summary": summarise(rows),
                     "architectures": [rows[n] for n in sorted(rows)]}, indent=1) + "\n")
    print(json.dumps(summarise(rows), indent=1))


if __name__ == "__main__":
    main()
