"""``detect()``: this machine's GPUs and driver, from several sources merged in order."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gpuenv.hardware._fallback import nvidia_pci_devices, read_nvidia_smi, read_proc
from gpuenv.hardware._reading import Reading
from gpuenv.hardware._wsl import read_wsl
from gpuenv.hardware.model import (
    OVERRIDE_COMPUTE_CAP_VAR,
    OVERRIDE_CUDA_DRIVER_VAR,
    SOURCE_NVML,
    SOURCE_OVERRIDE,
    DetectOverrides,
    GpuFacts,
    HardwareFacts,
    HostPaths,
    NoGpuReason,
)
from gpuenv.versions import CudaVersion, DriverVersion

_NO_GPU_WHY = {
    NoGpuReason.NO_DRIVER: "no NVIDIA driver is installed",
    NoGpuReason.DRIVER_NOT_LOADED: "the NVIDIA driver is installed but not loaded",
    NoGpuReason.NO_DEVICES: "the NVIDIA driver is running but sees no GPU",
}


@dataclass
class _Merge:
    """Facts gathered so far: each field from the first source that has it."""

    driver: DriverVersion | None = None
    cuda: CudaVersion | None = None
    gpus: tuple[GpuFacts, ...] | None = None
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    library: str | None = None

    def add(self, reading: Reading) -> None:
        self.notes.extend(reading.notes)
        if reading.no_gpu_reason:
            self.reasons.append(reading.no_gpu_reason)
        self.library = self.library or reading.library
        if self.driver is None and reading.driver_version is not None:
            self.driver = reading.driver_version
            self.sources["driver_version"] = reading.source
        if self.cuda is None and reading.cuda_driver_version is not None:
            self.cuda = reading.cuda_driver_version
            self.sources["cuda_driver_version"] = reading.source
        if reading.gpus is None:
            return
        if self.gpus is None:
            self.gpus = reading.gpus
            self.sources["gpus"] = reading.source
            if any(g.compute_capability for g in reading.gpus):
                self.sources["compute_capability"] = reading.source
        else:
            self._fill(reading)

    def _fill(self, reading: Reading) -> None:
        """Fill GPUs' missing compute capability and memory from a later source,
        matching GPUs by UUID."""
        assert self.gpus is not None
        later = {g.uuid: g for g in reading.gpus or () if g.uuid}
        filled: list[GpuFacts] = []
        for gpu in self.gpus:
            other = later.get(gpu.uuid) if gpu.uuid else None
            if other is None:
                filled.append(gpu)
                continue
            if gpu.compute_capability is None and other.compute_capability:
                self.sources.setdefault("compute_capability", reading.source)
            filled.append(
                replace(
                    gpu,
                    compute_capability=gpu.compute_capability or other.compute_capability,
                    memory_total_bytes=gpu.memory_total_bytes or other.memory_total_bytes,
                )
            )
        self.gpus = tuple(filled)

    def complete(self) -> bool:
        return (
            self.driver is not None
            and self.cuda is not None
            and self.gpus is not None
            and all(g.compute_capability for g in self.gpus)
        )

    def reason(self) -> str:
        for reason in NoGpuReason.PRECEDENCE:
            if reason in self.reasons:
                return reason
        return NoGpuReason.NO_DRIVER


def _gather(host: HostPaths, merge: _Merge) -> None:
    if host.use_nvml:
        from gpuenv.hardware._nvml import read_nvml

        nvml = read_nvml()
        merge.add(nvml)
        if nvml.gpus is not None:  # NVML answered: the fallbacks know no more than it.
            return
    else:
        merge.notes.append("NVML: not used")
    for read in (read_proc, read_nvidia_smi):
        merge.add(read(host))
        if merge.complete():
            return


def _apply_cc_override(merge: _Merge, overrides: DetectOverrides) -> None:
    cc = overrides.compute_capability
    if cc is None:
        return
    if merge.gpus:
        merge.gpus = tuple(replace(g, compute_capability=cc) for g in merge.gpus)
    else:
        name = f"({OVERRIDE_COMPUTE_CAP_VAR})"
        merge.gpus = (GpuFacts(0, name, None, cc),)
        merge.sources["gpus"] = SOURCE_OVERRIDE
    merge.sources["compute_capability"] = SOURCE_OVERRIDE
    merge.notes.append(f"{OVERRIDE_COMPUTE_CAP_VAR}={cc} applied")


def _explain_no_gpu(host: HostPaths, reason: str) -> list[str]:
    notes = [f"no GPU: {_NO_GPU_WHY[reason]}"]
    if reason == NoGpuReason.NO_DEVICES:
        return notes
    devices = nvidia_pci_devices(host)
    if devices:
        notes.append(f"PCI: NVIDIA GPU(s) present at {', '.join(devices)} but no driver answered")
    elif devices is not None:
        notes.append("PCI: no NVIDIA GPU on the PCI bus")
    return notes


def detect(
    *, overrides: DetectOverrides | None = None, host: HostPaths | None = None
) -> HardwareFacts:
    """Detect this machine's NVIDIA GPUs and driver.

    Sources, in order. Each fact is taken from the first source that has it, and
    ``HardwareFacts.sources`` names that source:

    0. ``overrides`` (``GPUENV_OVERRIDE_CUDA_DRIVER``, ``GPUENV_OVERRIDE_COMPUTE_CAP``,
       read by the CLI, an empty value meaning absent) win over anything detected. A
       compute capability override stands for one GPU when none is found. Overridden
       facts are not ``measured``.
    1. NVML through pynvml (``libnvidia-ml.so.1``): every fact. When NVML starts,
       its answer is final, including "the driver sees no GPU".
    2. ``/proc/driver/nvidia/version`` and ``/proc/driver/nvidia/gpus/*/information``
       (driver version, GPU names and UUIDs), or ``/sys/module/nvidia/version``
       (driver version) when ``/proc/driver/nvidia`` is absent.
    3. ``nvidia-smi --query-gpu=...`` (GPUs, compute capability, memory, driver) and
       its banner (CUDA version), only while a fact is still missing. GPUs already
       listed by ``/proc`` are completed by UUID.

    "Not found" (no pynvml, no ``libnvidia-ml.so.1``, the driver not loaded, no
    ``/proc/driver/nvidia``, no nvidia-smi) moves on to the next source and leaves a
    note. NVML failing to start also moves on. Unexpected errors (a GPU lost while NVML
    reads it, a ``/proc`` file that exists but cannot be read, nvidia-smi hanging or
    printing rows we cannot parse) raise ``HardwareDetectionError``. Implausible
    numbers (a CUDA version of 0, compute capability 99.0, memory of 0 bytes) are
    dropped with a note, never reported as facts.

    No GPU is a normal answer: ``gpus`` is empty, ``no_gpu_reason`` says why (no
    driver, driver not loaded, no devices) and a note says so in words, with the PCI
    bus's view when ``/sys`` shows one. Under WSL, ``wsl`` holds the WSL facts (host
    driver, shadowing Linux driver or libcuda) and their problems are added as notes.
    ``host`` points detection at other roots (tests); the default is this machine.
    """
    host = host or HostPaths()
    overrides = overrides or DetectOverrides()
    merge = _Merge()
    if overrides.cuda_driver_version is not None:
        merge.cuda = overrides.cuda_driver_version
        merge.sources["cuda_driver_version"] = SOURCE_OVERRIDE
        merge.notes.append(f"{OVERRIDE_CUDA_DRIVER_VAR}={merge.cuda} applied")
    _gather(host, merge)
    _apply_cc_override(merge, overrides)
    gpus = merge.gpus or ()
    reason = None if gpus else merge.reason()
    notes = list(merge.notes)
    if reason:
        notes[:0] = _explain_no_gpu(host, reason)
    wsl = read_wsl(
        host,
        driver_version=merge.driver,
        driver_source=merge.sources.get("driver_version"),
        nvml_library=merge.library if merge.sources.get("gpus") == SOURCE_NVML else None,
    )
    if wsl is not None:
        notes.extend(f"WSL: {problem}" for problem in wsl.problems)
    return HardwareFacts(
        gpus=gpus,
        driver_version=merge.driver,
        cuda_driver_version=merge.cuda,
        sources=dict(merge.sources),
        measured=overrides.empty,
        notes=tuple(notes),
        wsl=wsl,
        no_gpu_reason=reason,
    )
