"""The fallbacks when NVML is missing or fails: ``/proc``, ``/sys``, then nvidia-smi.

File-system reads treat "not there" (``FileNotFoundError``, ``NotADirectoryError``) as
"this source has nothing to say"; any other ``OSError`` (permission denied, an I/O
error) is unexpected and raises ``HardwareDetectionError``.
"""

from __future__ import annotations

from pathlib import Path

from gpuenv.errors import ExternalToolError, HardwareDetectionError
from gpuenv.hardware._reading import Reading
from gpuenv.hardware.model import (
    SOURCE_NVIDIA_SMI,
    SOURCE_PROC,
    SOURCE_SYS,
    GpuFacts,
    HostPaths,
    NoGpuReason,
)
from gpuenv.hardware.parse import (
    SMI_FIELDS,
    classify_nvidia_smi_failure,
    is_nvidia_gpu_pci,
    parse_nvidia_smi_banner,
    parse_nvidia_smi_csv,
    parse_proc_gpu_information,
    parse_proc_version,
    parse_sys_module_version,
)

NVIDIA_SMI_TIMEOUT_S = 15.0


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise HardwareDetectionError(f"cannot read {path}: {exc.strerror or exc}") from exc


def list_dir(path: Path) -> list[Path] | None:
    """The folder's entries, sorted, or None when it does not exist."""
    try:
        return sorted(path.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise HardwareDetectionError(f"cannot list {path}: {exc.strerror or exc}") from exc


# ---- /proc/driver/nvidia and /sys/module/nvidia ------------------------------------


def _proc_gpus(gpus_dir: Path, notes: list[str]) -> tuple[GpuFacts, ...] | None:
    entries = list_dir(gpus_dir)
    if entries is None:
        return None
    gpus: list[GpuFacts] = []
    # The folders are named by PCI bus id; NVML numbers GPUs in PCI bus order too.
    for index, entry in enumerate(entries):
        text = read_text(entry / "information")
        if text is None:
            continue
        info = parse_proc_gpu_information(text)
        if info.uuid_unreadable:
            notes.append(f"/proc: GPU {entry.name} has no readable UUID yet")
        gpus.append(GpuFacts(index, info.model or "unknown NVIDIA GPU", info.uuid, None, None))
    return tuple(gpus)


def read_proc(host: HostPaths) -> Reading:
    """Driver version and GPUs (name, UUID) from the kernel module's files.

    ``/proc`` has no compute capability, memory size or CUDA version; the next source
    (nvidia-smi) or the plan's GPU table fills those.
    """
    base = host.proc / "driver" / "nvidia"
    version_text = read_text(base / "version")
    if version_text is None:
        return _read_sys_module(host)
    notes: list[str] = []
    driver = parse_proc_version(version_text)
    if driver is None:
        notes.append(f"/proc: could not read a driver version from {base / 'version'}")
    gpus = _proc_gpus(base / "gpus", notes)
    reason = NoGpuReason.NO_DEVICES if gpus == () else None
    if reason:
        notes.append("/proc: the NVIDIA kernel driver is loaded but lists no GPU")
    return Reading(SOURCE_PROC, driver, None, gpus, reason, tuple(notes))


def _read_sys_module(host: HostPaths) -> Reading:
    text = read_text(host.sys / "module" / "nvidia" / "version")
    if text is None:
        note = "/proc: no /proc/driver/nvidia (the NVIDIA kernel driver is not loaded)"
        return Reading(SOURCE_PROC, no_gpu_reason=NoGpuReason.NO_DRIVER, notes=(note,))
    return Reading(SOURCE_SYS, driver_version=parse_sys_module_version(text))


def nvidia_pci_devices(host: HostPaths) -> list[str] | None:
    """Bus ids of NVIDIA display/3D controllers in ``/sys/bus/pci/devices`` (None when
    that folder is absent): a GPU is there even when no driver is (WSL and most
    containers show no PCI GPU)."""
    devices = list_dir(host.sys / "bus" / "pci" / "devices")
    if devices is None:
        return None
    found: list[str] = []
    for device in devices:
        vendor = read_text(device / "vendor")
        pci_class = read_text(device / "class")
        if vendor and pci_class and is_nvidia_gpu_pci(vendor, pci_class):
            found.append(device.name)
    return found


# ---- nvidia-smi --------------------------------------------------------------------


def _which_nvidia_smi(host: HostPaths) -> str | None:
    import shutil

    found = shutil.which("nvidia-smi", path=host.search_path)
    if found is None and (host.wsl_lib / "nvidia-smi").is_file():
        found = str(host.wsl_lib / "nvidia-smi")
    return found


def _run_smi(argv: list[str]) -> tuple[int, str]:
    from gpuenv import _proc

    try:
        result = _proc.run(argv, timeout=NVIDIA_SMI_TIMEOUT_S, check=False, what="nvidia-smi")
    except ExternalToolError as exc:
        raise HardwareDetectionError(
            exc.message, hint="a hung nvidia-smi usually means a driver problem: check dmesg"
        ) from exc
    return result.returncode, result.stdout + result.stderr


def _query(smi: str) -> tuple[int, str, tuple[str, ...]]:
    """The CSV query, retried without a field an older nvidia-smi does not know."""
    fields: tuple[str, ...] = SMI_FIELDS
    while True:
        query = "--query-gpu=" + ",".join(fields)
        code, output = _run_smi([smi, query, "--format=csv,noheader,nounits"])
        bad = classify_nvidia_smi_failure(output).bad_field if code else None
        if bad not in fields or bad in ("index", "name"):
            return code, output, fields
        fields = tuple(f for f in fields if f != bad)


def read_nvidia_smi(host: HostPaths) -> Reading:
    """GPUs, driver version, compute capability and memory from ``nvidia-smi
    --query-gpu``, and the CUDA version from its banner."""
    smi = _which_nvidia_smi(host)
    if smi is None:
        return Reading(SOURCE_NVIDIA_SMI, notes=("nvidia-smi: not found",))
    code, output, fields = _query(smi)
    if code:
        failure = classify_nvidia_smi_failure(output)
        first = next((line for line in output.splitlines() if line.strip()), "no output")
        note = f"nvidia-smi: exit {code}: {first.strip()}"
        none: tuple[GpuFacts, ...] | None = () if failure.reason == NoGpuReason.NO_DEVICES else None
        return Reading(SOURCE_NVIDIA_SMI, gpus=none, no_gpu_reason=failure.reason, notes=(note,))
    try:
        rows = parse_nvidia_smi_csv(output, fields)
    except ValueError as exc:
        raise HardwareDetectionError(f"nvidia-smi: {exc}") from exc
    gpus = tuple(
        GpuFacts(r.gpu_index, r.name, r.uuid, r.compute_capability, r.memory_total_bytes)
        for r in rows
    )
    driver = next((r.driver_version for r in rows if r.driver_version), None)
    banner_code, banner = _run_smi([smi])
    banner_driver, cuda = parse_nvidia_smi_banner(banner) if banner_code == 0 else (None, None)
    return Reading(
        SOURCE_NVIDIA_SMI,
        driver_version=driver or banner_driver,
        cuda_driver_version=cuda,
        gpus=gpus,
        no_gpu_reason=NoGpuReason.NO_DEVICES if not gpus else None,
    )
