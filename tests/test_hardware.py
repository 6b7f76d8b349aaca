"""HardwareSpec: ISA detection, ids, serialisation, errors and the micro-benchmarks."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnnperf.errors import HardwareError
from gnnperf.features.schema import HARDWARE as FEATURE_NAMES
from gnnperf.hardware.spec import HardwareSpec, available_cores, supported_isas

V3_FLAGS = {"sse2", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16", "lahf_lm", "avx", "avx2",
            "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}


def test_isa_levels_follow_cpu_flags() -> None:
    assert supported_isas({"sse2"}) == ["x86-64"]
    assert supported_isas(V3_FLAGS) == ["x86-64", "x86-64-v2", "x86-64-v3"]
    assert supported_isas(V3_FLAGS - {"avx2"}) == ["x86-64", "x86-64-v2"]
    assert supported_isas(set()) == []


def test_local_spec_measures_and_serialises() -> None:
    spec = HardwareSpec.local("x86-64-v2", 1)
    assert spec.hw_id == "local/x86-64-v2/1t"
    assert spec.peak_gflops > 0 and spec.mem_bw_gbs > 0
    assert spec.cores == available_cores() and spec.l1d_kb > 0
    assert HardwareSpec.from_json(spec.to_json()) == spec
    assert HardwareSpec.from_dict(spec.to_dict()) == spec
    assert len(spec.feature_vector()) == len(FEATURE_NAMES)
    assert spec.target().attrs["mcpu"] == "x86-64-v2"
    # the compile target describes the machine, whatever threads the code runs with
    assert int(spec.target().attrs["num-cores"]) == spec.cores
    # cached: the second call reuses the measured figures
    assert HardwareSpec.local("x86-64-v2", 1) == spec


def test_ids_parse() -> None:
    spec = HardwareSpec.from_id("local/x86-64/1t")
    assert (spec.isa, spec.threads) == ("x86-64", 1)
    assert HardwareSpec.coerce(spec.to_dict()) == spec


@pytest.mark.parametrize("hw_id", ["remote/x86-64", "local/x86-64/xt", "local/a/b/c"])
def test_bad_ids(hw_id: str) -> None:
    with pytest.raises(HardwareError):
        HardwareSpec.from_id(hw_id)


def test_unknown_isa_and_threads_are_errors() -> None:
    with pytest.raises(HardwareError, match="unknown ISA"):
        HardwareSpec.local("x86-64-v9", 1, measure=False)
    with pytest.raises(HardwareError, match="outside"):
        HardwareSpec.local("x86-64", available_cores() + 1, measure=False)
    with pytest.raises(HardwareError, match="outside"):
        HardwareSpec.local("x86-64", 0, measure=False)


def test_isa_the_cpu_lacks_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import gnnperf.hardware.spec as hw

    monkeypatch.setattr(hw, "_cpu_flags", lambda: {"sse2"})
    with pytest.raises(HardwareError, match="does not support ISA 'x86-64-v3'"):
        HardwareSpec.local("x86-64-v3", 1, measure=False)


def test_missing_spec_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(HardwareError, match="no hardware spec file"):
        HardwareSpec.coerce(f"{tmp_path}/nope.json")


def test_figures_are_the_best_of_several_runs_and_can_be_remeasured(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import gnnperf.hardware.spec as hw

    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path))
    runs = iter([(10.0, 5.0), (30.0, 4.0), (20.0, 6.0), (50.0, 1.0), (40.0, 2.0), (45.0, 3.0)])
    monkeypatch.setattr(hw, "_probe", lambda isa, threads: next(runs))
    spec = HardwareSpec.local("x86-64", 1)
    assert (spec.peak_gflops, spec.mem_bw_gbs) == (30.0, 6.0)
    assert HardwareSpec.local("x86-64", 1) == spec  # cached: no probe runs
    again = HardwareSpec.local("x86-64", 1, remeasure=True)
    assert (again.peak_gflops, again.mem_bw_gbs) == (50.0, 3.0)
    assert HardwareSpec.local("x86-64", 1).peak_gflops == 50.0


def test_malformed_spec_dicts() -> None:
    spec = HardwareSpec.local("x86-64", 1, measure=False)
    with pytest.raises(HardwareError, match="unknown hardware spec fields"):
        HardwareSpec.from_dict({**spec.to_dict(), "gpu": 1})
    data = spec.to_dict()
    data.pop("isa")
    with pytest.raises(HardwareError, match="incomplete"):
        HardwareSpec.from_dict(data)
    with pytest.raises(HardwareError):
        HardwareSpec.from_json("[1, 2]")


# -- CPU signatures ---------------------------------------------------------------------------

ZEN = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: {model}
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse2 avx avx2 fma{extra}

processor\t: 1
vendor_id\t: AuthenticAMD
"""


def test_two_cpus_with_one_model_name_get_two_signature_ids() -> None:
    from gnnperf.hardware.cpu_identity import read_signature

    zen3 = read_signature(2, {"l1d_kb": 32, "l2_kb": 512, "l3_kb": 32768},
                          ZEN.format(model=1, extra=""))
    zen4 = read_signature(2, {"l1d_kb": 32, "l2_kb": 1024, "l3_kb": 32768},
                          ZEN.format(model=17, extra=" avx512f avx512_vnni"))
    assert zen3.model_name == zen4.model_name == "AMD EPYC"
    assert zen3.id != zen4.id and zen3.id.startswith("amd-f25m1s1-")
    assert zen4.flags == ("avx2", "avx512f", "avx512_vnni")
    # any one field tells them apart, the L2 size alone included
    same_but_l2 = read_signature(2, {"l1d_kb": 32, "l2_kb": 1024, "l3_kb": 32768},
                                 ZEN.format(model=1, extra=""))
    assert same_but_l2.id != zen3.id
    assert read_signature(2, {"l1d_kb": 32, "l2_kb": 512, "l3_kb": 32768},
                          ZEN.format(model=1, extra="")).id == zen3.id


def test_specs_carry_their_signature_and_legacy_specs_get_a_partial_one() -> None:
    from gnnperf.hardware.cpu_identity import CpuSignature

    spec = HardwareSpec.local("x86-64", 1, measure=False)
    assert spec.signature is not None and spec.cpu_id == spec.cpu_signature.id
    again = HardwareSpec.from_json(spec.to_json())
    assert again.cpu_id == spec.cpu_id and again.signature == spec.signature
    assert CpuSignature.from_dict(spec.signature).to_dict() == spec.signature
    legacy = HardwareSpec.from_dict({**spec.to_dict(), "signature": None})
    assert legacy.cpu_signature.legacy and "-legacy-" in legacy.cpu_id
    assert legacy.cpu_signature.matches(spec.cpu_signature)
    moved = HardwareSpec.from_dict({**spec.to_dict(), "signature": None,
                                    "l2_kb": spec.l2_kb * 2 + 1})
    assert not moved.cpu_signature.matches(spec.cpu_signature)
    with pytest.raises(HardwareError, match="CPU signature"):
        HardwareSpec.from_dict({**spec.to_dict(), "signature": {"vendor": "x"}})


def test_reference_times_are_hardware_features_with_a_missing_flag() -> None:
    from dataclasses import replace

    spec = HardwareSpec.local("x86-64-v3", 1, measure=False)
    names = list(FEATURE_NAMES)
    plain = dict(zip(names, spec.feature_vector(), strict=True))
    assert plain["ref_missing"] == 1.0 and plain["log2_ref_gemm_ms"] == 0.0
    timed = replace(spec, reference_ms={"gemm": 2.0, "stream": 8.0, "chain": 0.25})
    feats = dict(zip(names, timed.feature_vector(), strict=True))
    assert (feats["log2_ref_gemm_ms"], feats["log2_ref_stream_ms"],
            feats["log2_ref_chain_ms"], feats["ref_missing"]) == (1.0, 3.0, -2.0, 0.0)
    # the static part is untouched by the machine's state
    assert [feats[n] for n in names[:12]] == [plain[n] for n in names[:12]]
    partial = replace(spec, reference_ms={"gemm": 2.0})
    assert dict(zip(names, partial.feature_vector(), strict=True))["ref_missing"] == 1.0


def test_this_machine_is_described_by_its_reference_times_measured_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gnnperf.measure import local
    from gnnperf.measure.local import with_reference_figures

    monkeypatch.setenv("GNNPERF_CACHE_DIR", str(tmp_path))
    spec = HardwareSpec.local("x86-64-v3", 1, measure=False)
    described = with_reference_figures(spec)
    assert set(described.reference_ms) == {"gemm", "stream", "chain"}
    assert all(v > 0 for v in described.reference_ms.values())
    assert described.feature_vector()[-1] == 0.0
    calls = []
    monkeypatch.setattr(local, "measure_reference", lambda *a, **k: calls.append(a) or {})
    assert local.with_reference_figures is with_reference_figures
    assert with_reference_figures(spec).reference_ms == described.reference_ms  # cached
    assert with_reference_figures(described) is described  # already described
    assert not calls
