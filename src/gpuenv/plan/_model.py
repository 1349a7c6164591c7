"""The planner's values: what it sees of a target, what the spec asks, what it decides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import SpecifierSet

from gpuenv.knowledge import DriverCompat, JetPack, Provenance
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl"
KNOWN_PYTHONS = tuple(f"3.{minor}" for minor in range(8, 16))


@dataclass(frozen=True)
class TargetHardware:
    """One target's hardware as the planner sees it."""

    cpu: bool
    gpu_name: str | None
    compute_capabilities: tuple[ComputeCapability, ...]
    driver: DriverVersion | None
    source: str  # "declared", "measured" or "file"
    platform: str = "linux-64"
    glibc: str = "2.28"
    # A Jetson: the JetPack releases its board has (oldest first), and the one its driver
    # is (None: a driver no JetPack release names, judged like a desktop one).
    jetpacks: tuple[JetPack, ...] = ()
    jetpack: JetPack | None = None
    mps: bool = False  # a Mac's Apple GPU (the CPU build's wheels run it through MPS)

    @property
    def jetson(self) -> bool:
        return bool(self.jetpacks)

    @property
    def min_cc(self) -> ComputeCapability | None:
        return min(self.compute_capabilities) if self.compute_capabilities else None

    def describe(self) -> str:
        where = "" if self.platform == "linux-64" else f", {self.platform}"
        if self.mps:
            return f"Apple GPU (MPS){where}"
        if self.cpu:
            return f"CPU only{where}"
        ccs = ", ".join(cc.sm for cc in sorted(set(self.compute_capabilities)))
        return f"{self.gpu_name or 'GPU'} ({ccs}), driver {self.driver}{where}"


@dataclass(frozen=True)
class Constraints:
    """What the spec asks of one target."""

    torch: SpecifierSet
    torch_text: str
    python: str
    cuda: CudaVersion | None
    mode: DriverCompat
    torchvision: str | bool | None
    torchaudio: str | bool | None
    torch_key: str = "stack.torch"  # the spec key torch came from (a target's own wins)
    pypi_build: bool = False  # a CPU target's build = "pypi": PyPI's default build
    exclude_newer: str | None = None  # [pip] exclude-newer: pip packages as of this day
    exclude_newer_packages: tuple[tuple[str, str], ...] = ()  # ... and these as of their own


@dataclass(frozen=True)
class UnverifiedFact:
    """A fact a decision rests on that the data marks unverified."""

    fact: str  # "torch 2.15.0 cu130 build"
    where: str  # the data entry
    why: str  # the data's own note

    def to_json(self) -> dict[str, str]:
        return {"fact": self.fact, "where": self.where, "why": self.why}

    @classmethod
    def of(cls, fact: str, provenance: Provenance) -> UnverifiedFact | None:
        if not provenance.unverified:
            return None
        return cls(fact, provenance.where, provenance.unverified)


@dataclass(frozen=True)
class TargetPlan:
    """What the planner decided for one target: the Python, the torch family, the build
    (CUDA, wheel tag, arch list, cuDNN, NCCL) and the index it comes from, how the driver
    was judged, the conda virtual packages, and the reasons and unverified facts behind it."""

    target: str
    hardware: TargetHardware
    python: str
    torch: str
    torchvision: str | None
    torchaudio: str | None
    cuda: str | None
    cu_tag: str
    arch_list: tuple[str, ...]
    cudnn: str | None
    nccl: str | None
    index_url: str
    pypi_default: bool
    driver_compat: str
    driver_cuda: str | None
    virtual_packages: Mapping[str, str]
    reasons: tuple[str, ...]
    unverified: tuple[UnverifiedFact, ...] = ()
    # "shared": the project's one torch; "own": this target's torch key; "free":
    # same-torch = false
    torch_choice: str = "shared"

    def to_json(self) -> dict[str, Any]:
        hw = self.hardware
        return {
            "cuda": self.cuda,
            "cu_tag": self.cu_tag,
            "torch": self.torch,
            "torchvision": self.torchvision,
            "torchaudio": self.torchaudio,
            "python": self.python,
            "arch_list": list(self.arch_list),
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "index_url": self.index_url,
            "pypi_default": self.pypi_default,
            "driver_compat": self.driver_compat,
            "torch_choice": self.torch_choice,
            "hardware": {
                "cpu": hw.cpu,
                "gpu": hw.gpu_name,
                "compute_capabilities": [str(c) for c in hw.compute_capabilities],
                "driver": str(hw.driver) if hw.driver else None,
                "driver_cuda": self.driver_cuda,
                "source": hw.source,
                "platform": hw.platform,
            },
            "virtual_packages": dict(self.virtual_packages),
            "reasons": list(self.reasons),
            "unverified": [u.to_json() for u in self.unverified],
        }


@dataclass(frozen=True)
class Plan:
    """Every target's plan, and the notices about the project as a whole."""

    targets: tuple[TargetPlan, ...]
    notices: tuple[str, ...] = field(default=())  # project-wide, e.g. a newer torch exists

    def target(self, name: str) -> TargetPlan:
        return next(t for t in self.targets if t.target == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "targets": {t.target: t.to_json() for t in self.targets},
            "notices": list(self.notices),
        }
