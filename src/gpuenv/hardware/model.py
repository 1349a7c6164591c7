"""What a machine has: GPUs, driver, the newest CUDA the driver runs, and WSL facts.

``HardwareFacts`` is the one record every other layer consumes (plan, lock, verify,
doctor). It comes from ``detect()`` on this machine, from a facts file
(``facts_from_json``), or from a target declared in the spec. Standard library and
``gpuenv.versions`` only, so it is cheap to import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuenv.hardware._identity import Fingerprint
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

TYPE_CHECKING = False  # typing stays off the import (this module is cheap to import)
if TYPE_CHECKING:
    from typing import TypeVar

    _V = TypeVar("_V")

__all__ = [
    "OVERRIDE_COMPUTE_CAP_VAR",
    "OVERRIDE_CUDA_DRIVER_VAR",
    "SOURCE_DECLARED",
    "SOURCE_FILE",
    "SOURCE_NVIDIA_SMI",
    "SOURCE_NVML",
    "SOURCE_OVERRIDE",
    "SOURCE_PROC",
    "SOURCE_SYS",
    "DetectOverrides",
    "GpuFacts",
    "HardwareFacts",
    "HostPaths",
    "NoGpuReason",
    "WslFacts",
]

# Values of ``HardwareFacts.sources``.
SOURCE_NVML = "nvml"
SOURCE_PROC = "proc"
SOURCE_SYS = "sys"
SOURCE_NVIDIA_SMI = "nvidia-smi"
SOURCE_OVERRIDE = "override"
SOURCE_DECLARED = "declared"
SOURCE_FILE = "file"

# The environment variables the CLI reads (once) into ``DetectOverrides``.
OVERRIDE_CUDA_DRIVER_VAR = "GPUENV_OVERRIDE_CUDA_DRIVER"
OVERRIDE_COMPUTE_CAP_VAR = "GPUENV_OVERRIDE_COMPUTE_CAP"


class NoGpuReason:
    """Why a machine reports no GPU (``HardwareFacts.no_gpu_reason``)."""

    NO_DRIVER = "no-driver"
    """Neither NVML, the kernel module nor nvidia-smi is present."""
    DRIVER_NOT_LOADED = "driver-not-loaded"
    """The user-space driver is installed but the kernel module is not loaded."""
    NO_DEVICES = "no-devices"
    """The driver runs and sees no GPU."""

    # The most specific reason wins when sources disagree about why nothing was found.
    PRECEDENCE = (NO_DEVICES, DRIVER_NOT_LOADED, NO_DRIVER)


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as detection saw it: its index, name, UUID, compute capability and memory."""

    index: int
    name: str
    uuid: str | None
    compute_capability: ComputeCapability | None
    memory_total_bytes: int | None = None


@dataclass(frozen=True)
class WslFacts:
    """Windows Subsystem for Linux: the GPU is the Windows host's, reached through the
    libraries in ``/usr/lib/wsl/lib``. A Linux NVIDIA driver or ``libcuda.so`` installed
    inside the distribution shadows them and breaks CUDA; these fields say so.
    """

    version: int
    """1 or 2. WSL1 has no GPU access at all."""
    kernel_release: str | None
    wsl_lib_dir: str | None
    """``/usr/lib/wsl/lib`` when present: the host driver's libraries."""
    host_driver_version: DriverVersion | None
    """The Windows driver's version, as NVML or nvidia-smi report it inside WSL."""
    nvml_library: str | None = None
    """The ``libnvidia-ml.so`` NVML actually loaded, when NVML was used."""
    shadowing_libcuda: tuple[str, ...] = ()
    """``libcuda.so*`` files outside ``/usr/lib/wsl/lib`` that the loader may pick first."""
    linux_driver_files: tuple[str, ...] = ()
    """Traces of a Linux NVIDIA driver installed inside WSL (libnvidia-ml, a kernel
    module's ``/proc/driver/nvidia``, a Linux ``nvidia-smi``)."""

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per thing wrong with this WSL setup (empty when healthy)."""
        found: list[str] = []
        if self.version == 1:
            found.append("WSL1 has no GPU support: convert it with 'wsl --set-version NAME 2'")
        elif self.wsl_lib_dir is None:
            found.append(
                "WSL2 without /usr/lib/wsl/lib: the Windows NVIDIA driver is missing or too old"
            )
        if self.linux_driver_files:
            found.append(
                "a Linux NVIDIA driver is installed inside WSL and shadows the host's: "
                + ", ".join(self.linux_driver_files)
            )
        if (
            self.nvml_library
            and self.wsl_lib_dir
            and not self.nvml_library.startswith(self.wsl_lib_dir)
        ):
            found.append(f"NVML loaded {self.nvml_library}, not the host's from {self.wsl_lib_dir}")
        if self.shadowing_libcuda:
            found.append(
                "a libcuda.so outside /usr/lib/wsl/lib shadows the host driver's: "
                + ", ".join(self.shadowing_libcuda)
            )
        return tuple(found)


@dataclass(frozen=True)
class HardwareFacts:
    """GPUs and driver of one machine, with where each fact came from.

    ``sources`` maps a fact ("driver_version", "gpus", "cuda_driver_version",
    "compute_capability") to how it was obtained: "nvml", "proc", "sys", "nvidia-smi",
    "override", "declared", "file". ``measured`` is True only when every fact was read
    from this machine (no override, no file). ``no_gpu_reason`` says why ``gpus`` is
    empty (a ``NoGpuReason`` value); ``notes`` say the same and more, in words.
    """

    gpus: tuple[GpuFacts, ...]
    driver_version: DriverVersion | None
    cuda_driver_version: CudaVersion | None
    sources: Mapping[str, str] = field(default_factory=dict)
    measured: bool = False
    notes: tuple[str, ...] = ()
    wsl: WslFacts | None = None
    no_gpu_reason: str | None = None

    @property
    def min_compute_capability(self) -> ComputeCapability | None:
        """The lowest compute capability: on a mixed machine, what constrains wheels."""
        ccs = [g.compute_capability for g in self.gpus if g.compute_capability is not None]
        return min(ccs) if ccs else None

    def fingerprint(self) -> Fingerprint:
        """The same identity ``gpuenv.hardware.fingerprint.fingerprint()`` reads cheaply."""
        return Fingerprint.of(
            str(self.driver_version) if self.driver_version else None,
            (g.uuid for g in self.gpus if g.uuid),
            source=self.sources.get("gpus", "none"),
        )


@dataclass(frozen=True)
class DetectOverrides:
    """Facts forced from outside (``GPUENV_OVERRIDE_*``), applied before detection.

    ``cuda_driver_version`` replaces the driver's CUDA version; ``compute_capability``
    replaces every GPU's (and stands for one GPU when none is detected), so a machine
    without a GPU can plan for one. Facts with an override are not ``measured``.
    """

    cuda_driver_version: CudaVersion | None = None
    compute_capability: ComputeCapability | None = None

    @property
    def empty(self) -> bool:
        return self.cuda_driver_version is None and self.compute_capability is None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> DetectOverrides:
        """From ``GPUENV_OVERRIDE_CUDA_DRIVER`` and ``GPUENV_OVERRIDE_COMPUTE_CAP`` in
        ``environ`` (the CLI passes ``os.environ``, read once there)."""
        return cls.from_values(
            cuda_driver=environ.get(OVERRIDE_CUDA_DRIVER_VAR, "").strip(),
            compute_cap=environ.get(OVERRIDE_COMPUTE_CAP_VAR, "").strip(),
        )

    @classmethod
    def from_values(cls, *, cuda_driver: str | None, compute_cap: str | None) -> DetectOverrides:
        """Parse the variables' text; an empty or missing value means "absent".

        Raises ``UsageError`` (exit 2) naming the variable for a malformed value.
        """
        cuda = _override(
            OVERRIDE_CUDA_DRIVER_VAR,
            cuda_driver,
            CudaVersion.parse,
            "give the newest CUDA the driver supports, like 12.4, or leave it empty",
        )
        cc = _override(
            OVERRIDE_COMPUTE_CAP_VAR,
            compute_cap,
            ComputeCapability.parse,
            "give a compute capability like 9.0, or leave it empty",
        )
        return cls(cuda_driver_version=cuda, compute_capability=cc)


def _override(var: str, text: str | None, parse: Callable[[str], _V], hint: str) -> _V | None:
    """An override variable's value parsed (None: empty or missing); a malformed one is a
    ``UsageError`` naming the variable."""
    from gpuenv.errors import UsageError
    from gpuenv.versions import VersionFormatError

    try:
        return parse(text) if text else None
    except VersionFormatError as exc:
        raise UsageError(f"{var}: {exc}", hint=hint) from exc


@dataclass(frozen=True)
class HostPaths:
    """Where detection looks: the real machine by default; tests point these at fixture
    trees. ``root`` holds ``usr/lib/wsl/lib`` and the system library folders.
    ``search_path`` is where nvidia-smi is looked for (None: the ``PATH`` variable).
    ``use_nvml=False`` behaves as if ``libnvidia-ml.so.1`` were absent."""

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    root: Path = Path("/")
    search_path: str | None = None
    use_nvml: bool = True

    @property
    def wsl_lib(self) -> Path:
        return self.root / "usr" / "lib" / "wsl" / "lib"
