"""Hardware descriptions: what the GNN sees about the machine a model runs on.

A :class:`HardwareSpec` is the static identity of a CPU (model, cores, caches),
the code-generation choice (ISA level, thread count), two measured figures (peak
FLOP/s and memory bandwidth) that make machines comparable, and the median times of
the reference kernels of measurement v2 (compute-, memory- and latency-bound): what
the machine does, not only what it is. The figures come from TVM kernels compiled
for the ISA and run with the requested threads in a fresh process (TVM fixes its
thread pool at start-up), and are cached per machine so they are taken once;
``gnnperf hw`` times the reference kernels again to describe the machine *now*.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from gnnperf.atomic import write_text
from gnnperf.errors import HardwareError
from gnnperf.hardware.cpu_identity import CpuSignature, read_signature, signature_of_hw

#: x86-64 micro-architecture levels, from oldest to newest, with the CPU flags each needs
#: (flags as /proc/cpuinfo names them) and the float32 SIMD width of its widest vectors.
ISA_LEVELS: dict[str, tuple[tuple[str, ...], int]] = {
    "x86-64": (("sse2",), 4),
    "x86-64-v2": (("ssse3", "sse4_1", "sse4_2", "popcnt", "cx16", "lahf_lm"), 4),
    "x86-64-v3": (("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"), 8),
    "x86-64-v4": (("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"), 16),
}

#: The reference kernels of measurement v2, whose times are hardware features
#: (:mod:`gnnperf.measure.reference` defines and times them).
REFERENCE_KERNELS: tuple[str, ...] = ("gemm", "stream", "chain")


def cache_dir() -> Path:
    """Where this machine's measured figures, reference libraries, feature cache and
    calibrations live (``GNNPERF_CACHE_DIR``, else ``~/.cache/gnnperf``)."""
    root = os.environ.get("GNNPERF_CACHE_DIR") or Path.home() / ".cache" / "gnnperf"
    return Path(root)


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cache_sizes_kb() -> dict[str, int]:
    """Data cache sizes of cpu0 as the kernel reports them (L1d, L2, L3), in KiB."""
    sizes = {"l1d_kb": 0, "l2_kb": 0, "l3_kb": 0}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        kb = int(size[:-1]) * (1024 if size.endswith("M") else 1) if size[-1] in "KM" else 0
        key = {1: "l1d_kb", 2: "l2_kb", 3: "l3_kb"}.get(level)
        if key:
            sizes[key] = kb
    return sizes


def host_of(hw_id: str) -> str:
    """The machine part of a hardware id (``local`` in ``local/x86-64-v3/2t``)."""
    return str(hw_id).split("/", 1)[0]


def available_cores() -> int:
    """Cores this process may run on (affinity), which is what a thread pool can use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def supported_isas(flags: set[str] | None = None) -> list[str]:
    """ISA levels this CPU can execute, oldest first (each level includes the previous)."""
    flags = _cpu_flags() if flags is None else flags
    out: list[str] = []
    for isa, (needed, _) in ISA_LEVELS.items():
        if not all(f in flags for f in needed):
            break
        out.append(isa)
    return out


def _check_isa(isa: str) -> None:
    if isa not in ISA_LEVELS:
        raise HardwareError(f"unknown ISA '{isa}'; choose one of {', '.join(ISA_LEVELS)}")


@dataclass(frozen=True)
class HardwareSpec:
    """A CPU target: ISA level and threads, plus what we know and measured about the CPU."""

    isa: str
    threads: int
    cpu_model: str
    cores: int
    l1d_kb: int
    l2_kb: int
    l3_kb: int
    peak_gflops: float
    mem_bw_gbs: float
    host: str = "local"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    #: :class:`CpuSignature` as a dict (None in specs written before signatures existed)
    signature: dict[str, Any] | None = field(default=None, compare=False)
    #: reference kernel → median ms, the machine's state when the spec was taken
    #: (``gnnperf hw``; see :mod:`gnnperf.measure.reference`); None when not measured
    reference_ms: dict[str, float] | None = field(default=None, compare=False)
    #: the same CPU and ISA at one thread: ``peak_gflops``, ``mem_bw_gbs`` and, once
    #: measured, ``reference_ms`` (what a kernel without a parallel loop runs on, whatever
    #: the thread count; :meth:`serial_view`). None at one thread, and in older specs.
    serial: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_isa(self.isa)
        if self.threads < 1:
            raise HardwareError(f"thread count must be >= 1, got {self.threads}")
        if self.signature is not None:
            try:
                CpuSignature.from_dict(self.signature)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise HardwareError(f"malformed CPU signature in hardware spec: {exc!r}"
                                    ) from None

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def local(
        cls, isa: str | None = None, threads: int | None = None, *, measure: bool = True,
        remeasure: bool = False,
    ) -> HardwareSpec:
        """This machine at ``isa`` (default: best supported) and ``threads`` (default: all).

        Raises :class:`HardwareError` for an ISA the CPU lacks or more threads than cores.
        Peak FLOP/s and bandwidth are measured once per (CPU, ISA, threads) and cached
        (``remeasure`` measures again); ``measure=False`` leaves them at 0 (for listing,
        not for features). The reference kernels' times are added by
        :func:`gnnperf.measure.local.with_reference_figures`, downstream of this module.
        """
        isas = supported_isas()
        if isa is None:
            if not isas:
                raise HardwareError("cannot determine this CPU's ISA level")
            isa = isas[-1]
        _check_isa(isa)
        if isa not in isas:
            raise HardwareError(
                f"this CPU does not support ISA '{isa}' (supported: {', '.join(isas) or 'none'})"
            )
        cores = available_cores()
        threads = cores if threads is None else int(threads)
        if threads < 1 or threads > cores:
            raise HardwareError(f"thread count {threads} is outside 1..{cores} on this machine")
        caches = _cache_sizes_kb()
        signature = read_signature(cores, caches)
        peak, bw = (_measured_figures(signature.id, isa, threads, remeasure) if measure
                    else (0.0, 0.0))
        serial = None
        if threads > 1:
            peak1, bw1 = (_measured_figures(signature.id, isa, 1, remeasure) if measure
                          else (0.0, 0.0))
            serial = {"peak_gflops": peak1, "mem_bw_gbs": bw1}
        return cls(
            serial=serial,
            isa=isa,
            threads=threads,
            cpu_model=_cpu_model(),
            cores=cores,
            **caches,
            peak_gflops=peak,
            mem_bw_gbs=bw,
            signature=signature.to_dict(),
        )

    @classmethod
    def from_id(cls, hw_id: str) -> HardwareSpec:
        """Parse ``local``, ``local/ISA`` or ``local/ISA/Nt`` into a measured local spec."""
        parts = hw_id.strip().split("/")
        if parts[0] != "local" or len(parts) > 3:
            raise HardwareError(
                f"cannot parse hardware id '{hw_id}'; expected 'local', 'local/ISA' or "
                "'local/ISA/Nt' (e.g. local/x86-64-v3/2t), or a JSON spec file"
            )
        isa = parts[1] if len(parts) > 1 else None
        threads = None
        if len(parts) == 3:
            tok = parts[2].removesuffix("t")
            if not tok.isdigit():
                raise HardwareError(f"bad thread count '{parts[2]}' in hardware id '{hw_id}'")
            threads = int(tok)
        return cls.local(isa, threads)

    @classmethod
    def coerce(cls, hw: HardwareSpec | dict[str, Any] | str | os.PathLike[str]
               ) -> HardwareSpec:
        """Accept a spec, its dict, a JSON file path, or an id string."""
        if isinstance(hw, HardwareSpec):
            return hw
        if isinstance(hw, dict):
            return cls.from_dict(hw)
        if isinstance(hw, os.PathLike):
            hw = os.fspath(hw)
        if isinstance(hw, str):
            if hw.endswith(".json"):
                if not Path(hw).is_file():
                    raise HardwareError(f"no hardware spec file '{hw}'")
                try:
                    return cls.from_json(Path(hw).read_text())
                except HardwareError as exc:
                    raise HardwareError(f"{hw}: {exc}") from None
            return cls.from_id(hw)
        raise HardwareError(f"cannot use {type(hw).__name__} as a hardware spec")

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HardwareSpec:
        known = {f for f in cls.__dataclass_fields__}
        # derived fields, as `gnnperf hw` prints them
        data = {k: v for k, v in data.items() if k not in ("hw_id", "cpu_id")}
        unknown = set(data) - known
        if unknown:
            raise HardwareError(f"unknown hardware spec fields: {', '.join(sorted(unknown))}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise HardwareError(f"incomplete hardware spec: {exc}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> HardwareSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HardwareError(f"hardware spec is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise HardwareError("hardware spec JSON must be an object")
        return cls.from_dict(data)

    # -- derived views ----------------------------------------------------------------------
    def serial_view(self) -> HardwareSpec:
        """The hardware a kernel without a parallel loop runs on: this CPU at one thread.

        Why: such a kernel runs on one core whatever the thread pool holds, so what the
        estimators read about the hardware must not change with the thread count; a
        ``default`` build (no parallel loop at all) is then predicted the same at any
        thread count by construction. Without one-thread figures (a spec from before they
        were recorded) they are derived: peak and bandwidth per thread, reference kernels
        as measured (an approximation; :meth:`local` and
        :func:`gnnperf.measure.local.with_reference_figures` give the measured ones).
        """
        return self._serial_view

    @cached_property
    def _serial_view(self) -> HardwareSpec:
        # cached on the (frozen) instance: every serial node of a graph asks for it
        if self.threads == 1:
            return self
        serial = self.serial or {}
        return replace(
            self, threads=1,
            peak_gflops=float(serial.get("peak_gflops") or self.peak_gflops / self.threads),
            mem_bw_gbs=float(serial.get("mem_bw_gbs") or self.mem_bw_gbs / self.threads),
            reference_ms=serial.get("reference_ms", self.reference_ms), serial=None)

    @property
    def hw_id(self) -> str:
        """Short stable id, e.g. ``local/x86-64-v3/2t``."""
        return f"{self.host}/{self.isa}/{self.threads}t"

    @property
    def record_hw_id(self) -> str:
        """The id records measured on this CPU carry, ``CPU-ID/ISA/Nt``."""
        return f"{self.cpu_id}/{self.isa}/{self.threads}t"

    @property
    def cpu_signature(self) -> CpuSignature:
        """Which CPU this is (a partial, ``legacy`` one for specs older than signatures)."""
        return signature_of_hw(self.to_dict())

    @property
    def cpu_id(self) -> str:
        """The signature's id: the machine part of the hardware ids of its records."""
        return self.cpu_signature.id

    @property
    def simd_width(self) -> int:
        return ISA_LEVELS[self.isa][1]

    def target_dict(self) -> dict[str, Any]:
        """The TVM target for this spec, as the dict TVM 0.27 accepts.

        ``num-cores`` is the machine's core count, not the thread count: the compiled code
        (and so the kernel graph) is the same whatever threads it later runs with, and
        MetaSchedule's parallelization rules size their loops from it.
        """
        return {"kind": "llvm", "mcpu": self.isa, "num-cores": self.cores}

    def target(self) -> Any:
        import tvm

        return tvm.target.Target(self.target_dict())

    def feature_vector(self) -> list[float]:
        """Numbers the model sees on every node, in the order of
        :data:`gnnperf.features.schema.HARDWARE`."""
        lg = math.log2
        peak = max(self.peak_gflops, 1e-3)
        bw = max(self.mem_bw_gbs, 1e-3)
        return [
            float(list(ISA_LEVELS).index(self.isa)),
            lg(self.simd_width),
            float(self.threads),
            lg(self.threads),
            float(self.cores),
            lg(max(self.l1d_kb, 1)),
            lg(max(self.l2_kb, 1)),
            lg(max(self.l3_kb, 1)),
            lg(peak),
            lg(bw),
            lg(peak / self.threads),
            lg(peak / bw),
            *self._reference_features(),
        ]

    def _reference_features(self) -> list[float]:
        """log2 ms of each reference kernel and a missing flag (zeros and 1 when unknown:
        specs and records from before measurement v2)."""
        ref = self.reference_ms or {}
        if not all(ref.get(k, 0) > 0 for k in REFERENCE_KERNELS):
            return [0.0] * len(REFERENCE_KERNELS) + [1.0]
        return [math.log2(float(ref[k])) for k in REFERENCE_KERNELS] + [0.0]


# -- micro-benchmarks ---------------------------------------------------------------------------

_PROBE_SOURCE = """
import json, sys, numpy as np, tvm
from tvm.script import tirx as T
isa, width = sys.argv[1], int(sys.argv[2])
P, N, J, M = 64, 20000, 16, 1 << 24

@T.prim_func
def fma(A: T.Buffer((P, J, width), "float32")):
    for p in T.parallel(P):
        for k in range(N):
            for j in T.unroll(J):
                for v in T.vectorized(width):
                    A[p, j, v] = A[p, j, v] * T.float32(0.999) + T.float32(0.001)

@T.prim_func
def stream(A: T.Buffer((M,), "float32"), B: T.Buffer((M,), "float32")):
    for i in T.parallel(M // 1024):
        for j in T.serial(64):
            for v in T.vectorized(16):
                B[i * 1024 + j * 16 + v] = A[i * 1024 + j * 16 + v] + T.float32(1)

target = tvm.target.Target({"kind": "llvm", "mcpu": isa})
dev = tvm.cpu()
f = tvm.compile(fma, target).mod
s = tvm.compile(stream, target).mod
a = tvm.runtime.tensor(np.ones((P, J, width), "float32"))
t = min(f.time_evaluator("fma", dev, number=3, repeat=5)(a).results)
x = tvm.runtime.tensor(np.ones(M, "float32"))
y = tvm.runtime.tensor(np.ones(M, "float32"))
u = min(s.time_evaluator("stream", dev, number=3, repeat=5)(x, y).results)
print(json.dumps({"peak_gflops": P * N * J * width * 2 / t / 1e9, "mem_bw_gbs": 8 * M / u / 1e9}))
"""


def _probe(isa: str, threads: int) -> tuple[float, float]:
    """Run the FMA-throughput and streaming kernels in a fresh process with ``threads``."""
    env = dict(os.environ, TVM_NUM_THREADS=str(threads))
    width = ISA_LEVELS[isa][1]
    # TVMScript parses the kernels from their source file, so the probe must be a real file.
    with tempfile.TemporaryDirectory(prefix="gnnperf-probe-") as tmp:
        script = Path(tmp) / "probe.py"
        script.write_text(_PROBE_SOURCE)
        try:
            proc = subprocess.run([sys.executable, str(script), isa, str(width)], env=env,
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise HardwareError(f"hardware micro-benchmark for {isa}/{threads}t timed out"
                                ) from None
    try:
        if proc.returncode != 0:
            raise ValueError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                             else f"exit code {proc.returncode}")
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        return round(float(data["peak_gflops"]), 2), round(float(data["mem_bw_gbs"]), 2)
    except (ValueError, IndexError, KeyError) as exc:
        raise HardwareError(f"hardware micro-benchmark failed for {isa}/{threads}t: {exc}"
                            ) from None


#: independent micro-benchmark runs per figure; the best is kept, since on a shared host
#: disturbance only ever lowers a throughput
PROBE_RUNS = 3


def _measured_figures(cpu_id: str, isa: str, threads: int, remeasure: bool = False
                      ) -> tuple[float, float]:
    """Peak GFLOP/s and memory GB/s for (this CPU, isa, threads), measured once and cached.

    Each figure is the best of :data:`PROBE_RUNS` runs. ``remeasure`` replaces the cached
    figures (``gnnperf hw --remeasure``), e.g. after they were taken on a busy machine;
    records already collected keep the figures they were measured with.
    """
    def measure() -> list[float]:
        runs = [_probe(isa, threads) for _ in range(PROBE_RUNS)]
        return [max(r[0] for r in runs), max(r[1] for r in runs)]

    # keyed by the CPU signature: two CPUs that share a model name must not share figures
    peak, bw = cached_figures("hardware", f"{cpu_id}|{isa}|{threads}", measure, remeasure)
    return float(peak), float(bw)


def cached_figures(table: str, key: str, measure: Callable[[], Any],
                   remeasure: bool = False) -> Any:
    """``key`` of the machine-figure table ``table``.json in the user's cache folder;
    ``measure()`` fills it on a miss (or with ``remeasure``), so figures are taken once."""
    cache = cache_dir() / f"{table}.json"
    try:
        figures = json.loads(cache.read_text())
    except (OSError, json.JSONDecodeError):
        figures = {}
    if key not in figures or remeasure:
        figures[key] = measure()
        write_text(cache, json.dumps(figures, indent=1, sort_keys=True))
    return figures[key]
