"""Pure parsers for the texts hardware detection reads, and the plausibility checks.

Every function here takes a string and returns values or ``None``; nothing reads a
file or starts a process, so each is tested on texts in the formats real machines
print (``tests/fixtures/hardware/``). Standard library and ``gpuenv.versions`` only.
The ``/proc`` text itself is read by ``gpuenv.hardware.proctext``, which the run-time
fingerprint uses without the typed values built here. Results are ``NamedTuple``s
(cheaper to define than dataclasses; detection's start-up time is budgeted).

"Implausible" numbers (a CUDA version of 0, a compute capability of 99.0, a memory
size of zero) are rejected here, so a broken driver or a garbled line never becomes a
fact that plan or a verification record trusts.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from gpuenv.hardware.proctext import (
    plausible_driver_text,
    plausible_uuid,
    proc_driver_version,
    proc_fields,
)
from gpuenv.versions import (
    ComputeCapability,
    CudaVersion,
    DriverVersion,
    VersionFormatError,
)

__all__ = [
    "NvidiaSmiGpu",
    "ProcGpu",
    "SmiFailure",
    "classify_nvidia_smi_failure",
    "is_nvidia_gpu_pci",
    "parse_nvidia_smi_banner",
    "parse_nvidia_smi_csv",
    "parse_proc_gpu_information",
    "parse_proc_version",
    "parse_sys_module_version",
    "parse_wsl_kernel_release",
    "plausible_compute_capability",
    "plausible_cuda_driver_version",
    "plausible_driver_version",
    "plausible_memory_bytes",
    "plausible_uuid",
]

# Patterns are kept as text: ``re`` compiles each on first use and caches it.
_SMI_BANNER_RE = r"Driver Version:\s*(?P<driver>[\d.]+)\s+CUDA Version:\s*(?P<cuda>\d+\.\d+|N/A)"
_WSL2_RE = r"(?i)microsoft-standard-wsl2|\bwsl2\b"
_WSL1_RE = r"(?i)-microsoft$"

# Largest GPU memory we believe: 16 TiB (today's largest parts have under 300 GiB).
_MAX_MEMORY_BYTES = 16 << 40
# Smallest and largest CUDA releases a driver may report (NVML's 1000 * major + 10 * minor).
_MIN_CUDA = CudaVersion(2, 0)
_MAX_CUDA = CudaVersion(49, 9)
NVIDIA_PCI_VENDOR = 0x10DE
# PCI base class 0x03 is "display controller" (VGA 0x0300, 3D controller 0x0302).
_PCI_DISPLAY_CLASS = 0x03


# ---- plausibility ------------------------------------------------------------------


def plausible_driver_version(text: str | None) -> DriverVersion | None:
    """A driver version such as ``550.54.15``, or ``None`` for anything else."""
    if not text or not plausible_driver_text(text.strip()):
        return None
    return DriverVersion.parse(text)


def plausible_cuda_driver_version(value: int | None) -> CudaVersion | None:
    """NVML's integer CUDA version (12040 -> 12.4), or ``None`` when implausible."""
    if value is None or value % 10 != 0:
        return None
    version = CudaVersion.from_nvml(value)
    return version if _MIN_CUDA <= version <= _MAX_CUDA else None


def plausible_compute_capability(major: int, minor: int) -> ComputeCapability | None:
    """Compute capabilities run from 1.0 (Tesla, 2006) to the low teens today."""
    if 1 <= major <= 19 and 0 <= minor <= 9:
        return ComputeCapability(major, minor)
    return None


def plausible_memory_bytes(value: int | None) -> int | None:
    if value is None or not 0 < value <= _MAX_MEMORY_BYTES:
        return None
    return value


# ---- /proc and /sys ----------------------------------------------------------------


def parse_proc_version(text: str) -> DriverVersion | None:
    """The kernel module's version from ``/proc/driver/nvidia/version``."""
    return plausible_driver_version(proc_driver_version(text))


def parse_sys_module_version(text: str) -> DriverVersion | None:
    """``/sys/module/nvidia/version`` holds just the version (``550.54.15``)."""
    return plausible_driver_version(text.strip())


class ProcGpu(NamedTuple):
    """One ``/proc/driver/nvidia/gpus/<bus>/information`` file."""

    model: str | None
    uuid: str | None
    bus_location: str | None
    uuid_unreadable: bool = False


def parse_proc_gpu_information(text: str) -> ProcGpu:
    """``Key:<tabs> value`` lines; the keys we use are Model, GPU UUID, Bus Location."""
    fields = proc_fields(text)
    uuid = plausible_uuid(fields.get("gpu uuid"))
    return ProcGpu(
        model=fields.get("model") or None,
        uuid=uuid,
        bus_location=fields.get("bus location") or None,
        uuid_unreadable=uuid is None,
    )


def is_nvidia_gpu_pci(vendor: str, pci_class: str) -> bool:
    """``/sys/bus/pci/devices/*/vendor`` and ``class`` (hex text) name an NVIDIA GPU."""
    try:
        vendor_id = int(vendor.strip(), 16)
        class_id = int(pci_class.strip(), 16)
    except ValueError:
        return False
    return vendor_id == NVIDIA_PCI_VENDOR and (class_id >> 16) == _PCI_DISPLAY_CLASS


def parse_wsl_kernel_release(text: str) -> int | None:
    """2 for a WSL2 kernel (``5.15.146.1-microsoft-standard-WSL2``), 1 for WSL1
    (``4.4.0-19041-Microsoft``), ``None`` for any other kernel release."""
    release = text.strip()
    if re.search(_WSL2_RE, release):
        return 2
    if re.search(_WSL1_RE, release):
        return 1
    return None


# ---- nvidia-smi --------------------------------------------------------------------

# The query gpuenv sends, in this order; ``compute_cap`` needs a 510+ driver's nvidia-smi.
SMI_FIELDS = ("index", "name", "uuid", "memory.total", "driver_version", "compute_cap")


class NvidiaSmiGpu(NamedTuple):
    gpu_index: int
    """nvidia-smi's GPU index (``index`` would hide ``tuple.index``)."""
    name: str
    uuid: str | None
    memory_total_bytes: int | None
    driver_version: DriverVersion | None
    compute_capability: ComputeCapability | None


def _smi_value(text: str) -> str | None:
    value = text.strip()
    return None if not value or value.startswith("[") or value == "N/A" else value


def _smi_cc(text: str | None) -> ComputeCapability | None:
    if text is None:
        return None
    try:
        cc = ComputeCapability.parse(text)
    except VersionFormatError:
        return None
    return plausible_compute_capability(cc.major, cc.minor)


def _smi_mib(text: str | None) -> int | None:
    if text is None or not text.isdigit():
        return None
    return plausible_memory_bytes(int(text) << 20)


def parse_nvidia_smi_csv(text: str, fields: tuple[str, ...] = SMI_FIELDS) -> list[NvidiaSmiGpu]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``.

    Raises ``ValueError`` for a row that does not have the fields asked for. A name
    with a comma in it is rejoined (the name is the only free-text field).
    """
    rows: list[NvidiaSmiGpu] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        extra = len(parts) - len(fields)
        if extra < 0 or not parts[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi line: {line.strip()!r}")
        name_at = fields.index("name")
        if extra:
            parts[name_at : name_at + extra + 1] = [", ".join(parts[name_at : name_at + extra + 1])]
        row = dict(zip(fields, (_smi_value(p) for p in parts), strict=True))
        rows.append(
            NvidiaSmiGpu(
                gpu_index=int(parts[0]),
                name=row.get("name") or "unknown NVIDIA GPU",
                uuid=plausible_uuid(row.get("uuid")),
                memory_total_bytes=_smi_mib(row.get("memory.total")),
                driver_version=plausible_driver_version(row.get("driver_version")),
                compute_capability=_smi_cc(row.get("compute_cap")),
            )
        )
    return rows


def parse_nvidia_smi_banner(text: str) -> tuple[DriverVersion | None, CudaVersion | None]:
    """Driver and CUDA version from the header of plain ``nvidia-smi`` output."""
    match = re.search(_SMI_BANNER_RE, text)
    if not match:
        return None, None
    cuda: CudaVersion | None = None
    if match.group("cuda") != "N/A":
        parsed = CudaVersion.parse(match.group("cuda"))
        cuda = parsed if _MIN_CUDA <= parsed <= _MAX_CUDA else None
    return plausible_driver_version(match.group("driver")), cuda


class SmiFailure(NamedTuple):
    """What a failing nvidia-smi meant: ``reason`` is a ``NoGpuReason`` value or None."""

    reason: str | None
    bad_field: str | None = None


def classify_nvidia_smi_failure(output: str) -> SmiFailure:
    """nvidia-smi exits non-zero for "no driver", "no devices" and a field it does not
    know (older drivers lack ``compute_cap``); anything else is an unknown failure."""
    text = output.lower()
    if "couldn't communicate with the nvidia driver" in text or "driver not loaded" in text:
        return SmiFailure("driver-not-loaded")
    if "no devices were found" in text:
        return SmiFailure("no-devices")
    field = re.search(r'field "([^"]+)" is not a valid field to query', text)
    if field:
        return SmiFailure(None, bad_field=field.group(1))
    return SmiFailure(None)
