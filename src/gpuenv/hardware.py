"""What a machine has: GPUs, driver, the newest CUDA the driver runs.

``HardwareFacts`` is the one record every other layer consumes (plan, lock, verify,
doctor). Detection itself is added by the hardware-detection work; until then only
declared facts (from the spec) exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion


@dataclass(frozen=True)
class GpuFacts:
    index: int
    name: str
    uuid: str | None
    compute_capability: ComputeCapability | None
    memory_total_bytes: int | None = None


@dataclass(frozen=True)
class HardwareFacts:
    """GPUs and driver of one machine, with where each fact came from.

    ``sources`` maps a fact ("driver_version", "gpus", "cuda_driver_version") to how
    it was obtained: "nvml", "proc", "nvidia-smi", "override", "declared", "file".
    ``measured`` is True only when the facts were read from this machine.
    """

    gpus: tuple[GpuFacts, ...]
    driver_version: DriverVersion | None
    cuda_driver_version: CudaVersion | None
    sources: Mapping[str, str] = field(default_factory=dict)
    measured: bool = False
    notes: tuple[str, ...] = ()

    @property
    def min_compute_capability(self) -> ComputeCapability | None:
        ccs = [g.compute_capability for g in self.gpus if g.compute_capability is not None]
        return min(ccs) if ccs else None
