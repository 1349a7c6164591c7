"""The pure parsers of gpuenv.hardware.parse, on captured-format fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.hardware import parse, proctext
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hardware"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("proc-version-550-proprietary.txt", "550.54.15"),
        ("proc-version-550-open.txt", "550.54.15"),
        ("proc-version-535-open-aarch64.txt", "535.129.03"),
        ("proc-version-390.txt", "390.157"),
    ],
)
def test_proc_version_banners(name: str, version: str) -> None:
    parsed = parse.parse_proc_version(fixture(name))
    assert parsed is not None
    assert parsed.text == version  # leading zeros kept: 535.129.03


@pytest.mark.parametrize(
    "text",
    [
        "",
        "GCC version:  gcc version 12.3.0\n",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  9.0  today\n",  # implausible
    ],
)
def test_proc_version_rejects(text: str) -> None:
    assert parse.parse_proc_version(text) is None


def test_sys_module_version() -> None:
    assert parse.parse_sys_module_version("550.54.15\n") == DriverVersion.parse("550.54.15")
    assert parse.parse_sys_module_version("garbage\n") is None


def test_proc_gpu_information() -> None:
    gpu = parse.parse_proc_gpu_information(fixture("proc-gpu-information-h100.txt"))
    assert gpu.model == "NVIDIA H100 80GB HBM3"
    assert gpu.uuid == "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11"
    assert gpu.bus_location == "0000:18:00.0"
    assert not gpu.uuid_unreadable


def test_proc_gpu_information_uuid_not_known_yet() -> None:
    gpu = parse.parse_proc_gpu_information(fixture("proc-gpu-information-uninitialised.txt"))
    assert gpu.model == "Tesla T4"
    assert gpu.uuid is None
    assert gpu.uuid_unreadable


def test_nvidia_smi_csv() -> None:
    rows = parse.parse_nvidia_smi_csv(fixture("nvidia-smi-query-h100x2.csv"))
    assert [r.gpu_index for r in rows] == [0, 1]
    first = rows[0]
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.uuid == "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11"
    assert first.memory_total_bytes == 81559 << 20
    assert first.driver_version == DriverVersion.parse("550.54.15")
    assert first.compute_capability == ComputeCapability(9, 0)


def test_nvidia_smi_csv_without_compute_cap() -> None:
    fields = tuple(f for f in parse.SMI_FIELDS if f != "compute_cap")
    (row,) = parse.parse_nvidia_smi_csv(fixture("nvidia-smi-query-no-compute-cap.csv"), fields)
    assert row.name == "Tesla T4"
    assert row.compute_capability is None
    assert row.driver_version == DriverVersion.parse("470.223.02")


def test_nvidia_smi_csv_name_with_comma_and_missing_values() -> None:
    text = "0, Odd, Name, [N/A], [Not Supported], 550.54.15, 8.9\n"
    (row,) = parse.parse_nvidia_smi_csv(text)
    assert row.name == "Odd, Name"
    assert row.uuid is None
    assert row.memory_total_bytes is None
    assert row.compute_capability == ComputeCapability(8, 9)


@pytest.mark.parametrize("text", ["garbage", "0, too, few\n"])
def test_nvidia_smi_csv_rejects_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        parse.parse_nvidia_smi_csv(text)


def test_nvidia_smi_banner() -> None:
    driver, cuda = parse.parse_nvidia_smi_banner(fixture("nvidia-smi-banner.txt"))
    assert driver == DriverVersion.parse("550.54.15")
    assert cuda == CudaVersion(12, 4)


def test_nvidia_smi_banner_under_wsl_reports_the_windows_driver() -> None:
    driver, cuda = parse.parse_nvidia_smi_banner(fixture("nvidia-smi-banner-wsl.txt"))
    assert driver == DriverVersion.parse("546.33")
    assert cuda == CudaVersion(12, 3)


def test_nvidia_smi_banner_absent() -> None:
    assert parse.parse_nvidia_smi_banner("nothing here") == (None, None)


@pytest.mark.parametrize(
    ("name", "reason", "field"),
    [
        ("nvidia-smi-no-driver.txt", "driver-not-loaded", None),
        ("nvidia-smi-no-devices.txt", "no-devices", None),
        ("nvidia-smi-bad-field.txt", None, "compute_cap"),
    ],
)
def test_nvidia_smi_failures(name: str, reason: str | None, field: str | None) -> None:
    failure = parse.classify_nvidia_smi_failure(fixture(name))
    assert failure.reason == reason
    assert failure.bad_field == field


def test_nvidia_smi_unknown_failure() -> None:
    assert parse.classify_nvidia_smi_failure("Segmentation fault") == parse.SmiFailure(None)


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("osrelease-wsl2.txt", 2),
        ("osrelease-wsl2-custom.txt", 2),
        ("osrelease-wsl1.txt", 1),
        ("osrelease-azure.txt", None),
    ],
)
def test_wsl_kernel_release(name: str, version: int | None) -> None:
    assert parse.parse_wsl_kernel_release(fixture(name)) == version


@pytest.mark.parametrize(
    ("vendor", "pci_class", "expected"),
    [
        ("0x10de\n", "0x030200\n", True),  # 3D controller (data-centre GPUs)
        ("0x10de\n", "0x030000\n", True),  # VGA controller
        ("0x10de\n", "0x040300\n", False),  # the GPU's HDMI audio function
        ("0x8086\n", "0x030000\n", False),
        ("junk", "0x030000", False),
    ],
)
def test_nvidia_gpu_pci(vendor: str, pci_class: str, expected: bool) -> None:
    assert parse.is_nvidia_gpu_pci(vendor, pci_class) is expected


def test_plausibility() -> None:
    assert parse.plausible_cuda_driver_version(12040) == CudaVersion(12, 4)
    assert parse.plausible_cuda_driver_version(13000) == CudaVersion(13, 0)
    for bogus in (None, 0, -1, 12041, 999_990):
        assert parse.plausible_cuda_driver_version(bogus) is None
    assert parse.plausible_compute_capability(9, 0) == ComputeCapability(9, 0)
    assert parse.plausible_compute_capability(0, 0) is None
    assert parse.plausible_compute_capability(99, 0) is None
    assert parse.plausible_memory_bytes(0) is None
    assert parse.plausible_memory_bytes(1 << 60) is None
    assert parse.plausible_memory_bytes(80 << 30) == 80 << 30
    assert parse.plausible_driver_version("550.54.15") == DriverVersion.parse("550.54.15")
    assert parse.plausible_driver_version("12.4") is None
    assert parse.plausible_uuid(" GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11\n") is not None
    assert parse.plausible_uuid("????????-????-????-????-????????????") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11", True),
        ("MIG-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11", True),
        ("GPU-5B3BB5E9-8A4C-4C6E-9A51-2B1F3C0D7E11", True),
        ("GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e1", False),  # short last group
        ("GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e1g", False),  # not hex
        ("XYZ-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11", False),
        ("GPU-5b3bb5e9-8a4c-4c6e-9a51", False),
        ("5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11", False),
    ],
)
def test_uuid_shapes(text: str, expected: bool) -> None:
    assert (proctext.plausible_uuid(text) is not None) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("550.54.15", True),
        ("390.157", True),
        ("1050.1.2", True),
        ("55.1", False),
        ("0550.54.15", False),
        ("550", False),
        ("550.54.15.1", False),
        ("550.5415.1", False),
        ("550.x.15", False),
        ("\uff15\uff15\uff10.54.15", False),  # full-width digits: isdigit() but not ASCII
    ],
)
def test_driver_text(text: str, expected: bool) -> None:
    assert proctext.plausible_driver_text(text) is expected
    assert (parse.plausible_driver_version(text) is not None) is expected
