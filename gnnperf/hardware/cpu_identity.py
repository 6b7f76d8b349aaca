"""Which CPU a label was measured on: the signature hardware ids are derived from.

"AMD EPYC" names at least two CPUs in this pool (Zen 3 with 512 KiB L2 per core and
AVX2; Zen 4 with 1 MiB L2 and AVX-512) whose speeds differ by 15-40%, so a model name
(or a hand-given ``--host-tag``) cannot keep their labels apart. A :class:`CpuSignature`
is what tells CPUs apart from inside a guest: vendor, family, model and stepping, the
ISA extensions that change generated code (AVX2, AVX-512, VNNI, AMX), the per-core L1d
and L2 and the shared L3, and the core count the guest has. Its :attr:`CpuSignature.id`
(readable prefix + hash of every field) is the machine part of a hardware id, so two
CPUs never share one.

Records measured before signatures existed carry only the model name, caches and cores;
:func:`signature_of_hw` reads those as a partial (``legacy``) signature, so their ids stay
as they were and they still group by CPU.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: The ISA extensions that change what TVM generates or how fast it runs (cpuinfo names).
SIGNATURE_FLAGS: tuple[str, ...] = ("avx2", "avx512f", "avx512_vnni", "amx_tile")

_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


@dataclass(frozen=True)
class CpuSignature:
    """What identifies a CPU from inside a guest (``None``: not recorded, legacy records)."""

    vendor: str
    family: int | None
    model: int | None
    stepping: int | None
    flags: tuple[str, ...] | None
    l1d_kb: int
    l2_kb: int
    l3_kb: int
    cores: int
    model_name: str = ""

    @property
    def legacy(self) -> bool:
        """Read from a record that predates signatures (family/model/flags unknown)."""
        return self.family is None

    @property
    def id(self) -> str:
        """``amd-f25m17s1-3f9c2a`` (``amd-legacy-…`` for a partial signature).

        The hash covers every field but the model name, so CPUs that differ in any of
        them (a cache size, a flag, the stepping) get different ids.
        """
        body = {k: v for k, v in asdict(self).items() if k != "model_name"}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:6]
        vendor = _VENDORS.get(self.vendor) or re.sub(r"[^a-z0-9]", "", self.vendor.lower())
        middle = "legacy" if self.legacy else f"f{self.family}m{self.model}s{self.stepping}"
        return f"{vendor or 'cpu'}-{middle}-{digest}"

    def matches(self, other: CpuSignature) -> bool:
        """Could both describe one CPU? A legacy signature is compared on what it knows."""
        if not (self.legacy or other.legacy):
            return self.id == other.id
        known = ("vendor", "l1d_kb", "l2_kb", "l3_kb", "cores")
        return all(getattr(self, k) == getattr(other, k) for k in known)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["flags"] = list(self.flags) if self.flags is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CpuSignature:
        flags = data.get("flags")
        return cls(
            vendor=str(data["vendor"]),
            family=_opt_int(data.get("family")),
            model=_opt_int(data.get("model")),
            stepping=_opt_int(data.get("stepping")),
            flags=tuple(flags) if flags is not None else None,
            l1d_kb=int(data["l1d_kb"]),
            l2_kb=int(data["l2_kb"]),
            l3_kb=int(data["l3_kb"]),
            cores=int(data["cores"]),
            model_name=str(data.get("model_name", "")),
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def parse_cpuinfo(text: str) -> dict[str, str]:
    """The fields of the first processor block of ``/proc/cpuinfo``."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def read_signature(cores: int, caches_kb: dict[str, int],
                   cpuinfo: str | None = None) -> CpuSignature:
    """This machine's signature; ``cpuinfo`` (the text of ``/proc/cpuinfo``) for tests."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields = parse_cpuinfo(cpuinfo)
    flags = set(fields.get("flags", "").split())

    def number(key: str) -> int:
        value = fields.get(key, "")
        return int(value) if value.isdigit() else -1  # -1: the kernel does not report it

    return CpuSignature(
        vendor=fields.get("vendor_id", "unknown"),
        family=number("cpu family"),
        model=number("model"),
        stepping=number("stepping"),
        flags=tuple(f for f in SIGNATURE_FLAGS if f in flags),
        l1d_kb=int(caches_kb.get("l1d_kb", 0)),
        l2_kb=int(caches_kb.get("l2_kb", 0)),
        l3_kb=int(caches_kb.get("l3_kb", 0)),
        cores=int(cores),
        model_name=fields.get("model name", ""),
    )


def signature_of_hw(hw: Mapping[str, Any]) -> CpuSignature:
    """The CPU signature of a record's stored hardware spec.

    Specs written since signatures exist carry theirs; older ones are read as a partial
    signature from the model name, caches and cores they stored.
    """
    if hw.get("signature"):
        return CpuSignature.from_dict(hw["signature"])
    name = str(hw.get("cpu_model", ""))
    vendor = ("GenuineIntel" if "intel" in name.lower()
              else "AuthenticAMD" if "amd" in name.lower() else name or "unknown")
    return CpuSignature(vendor=vendor, family=None, model=None, stepping=None, flags=None,
                        l1d_kb=int(hw.get("l1d_kb", 0)), l2_kb=int(hw.get("l2_kb", 0)),
                        l3_kb=int(hw.get("l3_kb", 0)), cores=int(hw.get("cores", 0)),
                        model_name=name)
