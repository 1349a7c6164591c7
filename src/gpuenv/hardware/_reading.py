"""What one detection source answered; ``_detect`` merges these in order."""

from __future__ import annotations

from dataclasses import dataclass

from gpuenv.hardware.model import GpuFacts
from gpuenv.versions import CudaVersion, DriverVersion


@dataclass(frozen=True)
class Reading:
    """One source's answer. ``gpus`` is None when the source could not say (not found,
    failed) and ``()`` when it says "no GPU"; ``no_gpu_reason`` then says why."""

    source: str
    driver_version: DriverVersion | None = None
    cuda_driver_version: CudaVersion | None = None
    gpus: tuple[GpuFacts, ...] | None = None
    no_gpu_reason: str | None = None
    notes: tuple[str, ...] = ()
    library: str | None = None
    """The shared library the source loaded (NVML only)."""
