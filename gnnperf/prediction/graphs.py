"""The kernel graph a prediction reads: lowered once per (model, build, target), then cached.

Kept apart from :mod:`gnnperf.prediction.api` so that the processes that lower models for
``predict_many`` import TVM only, not PyTorch Geometric and the checkpoint (two seconds
less to start each), and so that a model whose graph is cached needs no process at all.
TVM itself loads only when a model is lowered: a process whose graphs are all cached, or
which lowers in another process, never imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard

from gnnperf.digest import file_identity, file_sha256
from gnnperf.features import KernelGraph
from gnnperf.features.cache import default_cache, target_key
from gnnperf.hardware.spec import HardwareSpec

if TYPE_CHECKING:
    import onnx

ModelSource: TypeAlias = "str | os.PathLike[str] | onnx.ModelProto"


def is_onnx_proto(model: object) -> TypeGuard[onnx.ModelProto]:
    """Whether ``model`` is an in-memory ONNX model. Answered without importing ``onnx``
    (a second of a warm prediction's start-up, most of it ``ml_dtypes``): a process that
    never imported it holds no ``ModelProto``."""
    onnx = sys.modules.get("onnx")
    return onnx is not None and isinstance(model, onnx.ModelProto)


def model_digest(model: ModelSource) -> str:
    """SHA-256 of the model's bytes. A file's is kept in the feature cache by its
    :func:`~gnnperf.digest.file_identity` (hashing a BERT-base file, 440 MB, is half a
    second of every warm ``advise``), so an edited or replaced file is hashed again."""
    if is_onnx_proto(model):
        return hashlib.sha256(model.SerializeToString()).hexdigest()
    path = Path(model).resolve()
    if not path.is_file():
        return hashlib.sha256(b"").hexdigest()
    cache = default_cache()
    if cache is None:
        return file_sha256(path)
    key = "|".join(map(str, file_identity(path)))
    digest = cache.get("file_sha256", key)
    if digest is None:
        digest = file_sha256(path)
        cache.put("file_sha256", key, digest)
    return str(digest)


def graph_key(model: ModelSource, hw: HardwareSpec, build: str,
              input_shapes: Mapping[str, Sequence[int]] | None = None) -> str:
    """What determines a model's kernel graph: its bytes, shapes, build and target (not
    the thread count: one lowering serves every thread count of an ISA)."""
    shapes = json.dumps({k: list(v) for k, v in (input_shapes or {}).items()}, sort_keys=True)
    return "|".join([model_digest(model), shapes, build, target_key(hw.target_dict())])


def cached_graph(model: ModelSource, hw: HardwareSpec, build: str,
                 input_shapes: Mapping[str, Sequence[int]] | None = None
                 ) -> KernelGraph | None:
    """The graph from the feature cache, or None (not lowered before, or no cache)."""
    cache = default_cache()
    if cache is None:
        return None
    hit = cache.get("graph", graph_key(model, hw, build, input_shapes))
    return None if hit is None else KernelGraph.from_dict(hit)


def lower_for_prediction(model: ModelSource, hw: HardwareSpec, build: str,
                         input_shapes: Mapping[str, Sequence[int]] | None = None
                         ) -> KernelGraph:
    """The kernel graph of ``model`` for ``hw``'s target and ``build``, from the feature
    cache when this model was lowered for this target before (any thread count)."""
    cache = default_cache()
    # one key for the lookup and the store: it hashes the whole ONNX file
    key = graph_key(model, hw, build, input_shapes) if cache is not None else ""
    hit = cache.get("graph", key) if cache is not None else None
    if hit is not None:
        return KernelGraph.from_dict(hit)
    from gnnperf.features.tuned_candidates import graph_for_prediction  # TVM loads here
    from gnnperf.lowering.pipeline import lower_onnx

    graph = graph_for_prediction(lower_onnx(model, hw, build, input_shapes))
    if cache is not None:
        cache.put("graph", key, graph.to_dict())
    return graph


def lower_in_worker(model: ModelSource, hw: dict[str, Any], build: str
                    ) -> dict[str, Any]:
    """One model's kernel graph, in a pool process (a dict crosses the process boundary)."""
    return lower_for_prediction(model, HardwareSpec.from_dict(hw), build).to_dict()


class BackgroundLowering:
    """One model's kernel graph, lowered by a second interpreter while the caller loads the
    network (a new process otherwise imports PyTorch Geometric, then TVM, one after the
    other on one core).

    A plain subprocess (``python -m gnnperf.prediction.graphs``), not ``multiprocessing``:
    it never re-imports the caller's ``__main__``, so a script without a main guard is safe.
    The graph comes back as JSON on stdout. On any failure :meth:`result` gives None and the
    caller lowers the model itself, raising what lowering raises.
    """

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc

    @classmethod
    def start(cls, model: ModelSource, hw: HardwareSpec, build: str,
              input_shapes: Mapping[str, Sequence[int]] | None = None
              ) -> BackgroundLowering | None:
        """Start lowering ``model`` (an ONNX file); None for an in-memory model."""
        if is_onnx_proto(model) or not Path(model).is_file():
            return None
        request = json.dumps({
            "model": str(Path(model).resolve()), "hw": hw.to_dict(), "build": build,
            "input_shapes": {k: list(v) for k, v in input_shapes.items()} if input_shapes
            else None})
        package_parent = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)}
        proc = subprocess.Popen([sys.executable, "-m", "gnnperf.prediction.graphs"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stdin is not None
        proc.stdin.write(request)  # a few hundred bytes: the pipe takes them at once
        proc.stdin.close()
        proc.stdin = None  # so that communicate() does not flush it
        return cls(proc)

    def result(self) -> KernelGraph | None:
        """The graph (waiting for it), or None if the lowering process failed."""
        try:
            out, err = self._proc.communicate()
        except OSError:
            return None
        if self._proc.returncode != 0:
            return None
        sys.stderr.write(err)  # what lowering logged, as if it had run here
        return KernelGraph.from_dict(json.loads(out))

    def cancel(self) -> None:
        """Stop the lowering process if it still runs (the caller failed first)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()


def _lower_request() -> None:
    """The lowering process: a request as JSON on stdin, the graph as JSON on stdout."""
    request = json.load(sys.stdin)
    graph = lower_for_prediction(request["model"], HardwareSpec.from_dict(request["hw"]),
                                 request["build"], request["input_shapes"])
    json.dump(graph.to_dict(), sys.stdout)


if __name__ == "__main__":
    # tvm_ffi imports PyTorch eagerly when it is installed (to dodge a symbol clash on one
    # Windows build); lowering never hands a tensor to PyTorch, so this process keeps it
    # out: its import is a second of the critical path of a new process's first prediction.
    # Were something to need it after all, the lowering fails here and the caller lowers.
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    _lower_request()
