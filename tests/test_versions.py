from __future__ import annotations

import pytest

from gpuenv.versions import (
    ArchTarget,
    ComputeCapability,
    CudaVersion,
    DriverVersion,
    VersionFormatError,
    arch_covering,
)


def test_driver_versions_compare_numerically_and_keep_their_text() -> None:
    old = DriverVersion.parse("535.104.05")
    assert str(old) == "535.104.05"
    assert old < DriverVersion.parse("550.54.14") < DriverVersion.parse("550.54.15")
    assert DriverVersion.parse("570.26") < DriverVersion.parse("570.86.15")
    assert DriverVersion.parse("535.104.05") == DriverVersion.parse("535.104.5")


@pytest.mark.parametrize("bad", ["55o.54", "550", "", "v550.54", "550.54.15.1.2"])
def test_bad_driver_versions_are_refused(bad: str) -> None:
    with pytest.raises(VersionFormatError):
        DriverVersion.parse(bad)


def test_cuda_versions_and_tags_round_trip() -> None:
    assert CudaVersion.parse("12.4").tag == "cu124"
    assert CudaVersion.from_tag("cu118") == CudaVersion(11, 8)
    assert CudaVersion.from_tag("cu102") == CudaVersion(10, 2)
    assert CudaVersion.from_tag("cu130") == CudaVersion(13, 0)
    assert CudaVersion.from_nvml(12040) == CudaVersion(12, 4)
    assert str(CudaVersion.from_nvml(13000)) == "13.0"
    with pytest.raises(VersionFormatError):
        CudaVersion.from_tag("cpu")


def test_compute_capability_spellings() -> None:
    assert ComputeCapability.parse("9.0") == ComputeCapability.parse("sm_90") == (9, 0)
    assert ComputeCapability.parse("12.0").sm == "sm_120"
    assert ComputeCapability.parse("compute_86") == (8, 6)
    assert ComputeCapability(8, 9) > ComputeCapability(8, 6)


def test_sass_covers_same_major_newer_minor_only() -> None:
    sm60 = ArchTarget.parse("6.0")
    assert sm60.runs_on(ComputeCapability(6, 1))
    assert not sm60.runs_on(ComputeCapability(7, 0))
    assert not ArchTarget.parse("3.7").runs_on(ComputeCapability(3, 5))


def test_ptx_covers_every_newer_gpu() -> None:
    ptx = ArchTarget.parse("9.0+PTX")
    assert ptx.ptx
    assert ptx.runs_on(ComputeCapability(12, 0))
    assert not ptx.runs_on(ComputeCapability(8, 9))
    assert str(ptx) == "9.0+PTX"


def test_arch_covering_prefers_exact_then_sass_then_ptx() -> None:
    arch = tuple(ArchTarget.parse(a) for a in ["7.0", "8.0", "8.6", "9.0+PTX"])
    assert arch_covering(arch, ComputeCapability(8, 6)) == ArchTarget.parse("8.6")
    assert arch_covering(arch, ComputeCapability(8, 9)) == ArchTarget.parse("8.6")
    assert arch_covering(arch, ComputeCapability(12, 0)) == ArchTarget.parse("9.0+PTX")
    assert arch_covering(arch, ComputeCapability(6, 1)) is None
    assert "JIT" in ArchTarget.parse("9.0+PTX").how(ComputeCapability(12, 0))
