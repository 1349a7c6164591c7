"""The compatibility knowledge base as frozen values, and the pure queries over it.

Facts constrain; the package index decides what exists. Every value carries the
``source`` it came from, so a decision can cite it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from enum import Enum
from functools import cached_property

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpuenv.versions import ArchTarget, ComputeCapability, CudaVersion, DriverVersion, arch_covering


class DriverCompat(str, Enum):
    """How a driver's fitness for a CUDA build is judged.

    ``strict``: the build's CUDA release needs its own minimum driver (the driver's
    reported "CUDA Version" is a ceiling). ``minor``: NVIDIA's minor-version
    compatibility, any 12.x build runs on the 12.x family floor, with limits (no PTX JIT
    of newer PTX; some features need the newer driver).
    """

    STRICT = "strict"
    MINOR = "minor"


@dataclass(frozen=True)
class Provenance:
    """Where a fact was read: the data file and entry (named in messages), whether the
    data marks it unverified, and whether it came from the user's facts file."""

    where: str = ""  # "torch.toml: series 2.11, build cu130 (linux-64)"
    unverified: str | None = None  # the data's reason for marking it unverified
    user_file: str | None = None  # the user's facts file it came from, if any
    seen: bool = False  # seen on the torch index by the last lock, not in the data

    def label(self) -> str:
        """ " (unverified)" / " (from your facts file PATH)" / " (seen on the index, not in
        the knowledge base)" for a reason's end."""
        parts = []
        if self.seen:
            parts.append("seen on the index, not in the knowledge base")
        elif self.unverified:
            parts.append("unverified")
        if self.user_file:
            parts.append(f"from your facts file {self.user_file}")
        return f" ({'; '.join(parts)})" if parts else ""


NO_PROVENANCE = Provenance()


@dataclass(frozen=True)
class CudaRelease:
    """One CUDA toolkit release: the Linux (and Windows) driver it needs at least, and the
    compute capabilities its nvcc can generate code for."""

    version: CudaVersion
    linux_driver_min: DriverVersion
    windows_driver_min: DriverVersion | None
    arch_min: ComputeCapability | None
    arch_max: ComputeCapability | None
    source: str
    provenance: Provenance = NO_PROVENANCE


@dataclass(frozen=True)
class CudaFamily:
    """Minor-version compatibility floor of one CUDA major."""

    major: int
    linux_driver_min: DriverVersion
    source: str
    windows_driver_min: DriverVersion | None = None
    # NVIDIA's nvcc wheel for this major, from its first minor on (None: no wheel)
    nvcc_wheel: str | None = None
    nvcc_wheel_from: CudaVersion | None = None


@dataclass(frozen=True)
class DriverRange:
    """The NVIDIA driver branches that drive one compute capability: from ``first`` on
    (a branch major such as 570), up to and including ``last`` (None: still supported)."""

    first: int | None
    last: int | None
    source: str | None

    def admits(self, driver: DriverVersion) -> bool:
        major = driver.key[0]
        return (self.first is None or major >= self.first) and (
            self.last is None or major <= self.last
        )

    def describe(self) -> str:
        if self.first is not None and self.last is not None:
            return f"driver branches R{self.first} to R{self.last}"
        if self.first is not None:
            return f"driver branch R{self.first} or newer"
        if self.last is not None:
            return f"driver branches up to R{self.last}"
        return "any driver"


@dataclass(frozen=True)
class Architecture:
    """One GPU architecture: its compute capabilities and the driver branches that drive it."""

    name: str
    compute_capabilities: tuple[ComputeCapability, ...]
    source: str
    driver_first: int | None = None
    driver_last: int | None = None
    driver_first_by_cc: tuple[tuple[ComputeCapability, int], ...] = ()
    driver_source: str | None = None
    provenance: Provenance = NO_PROVENANCE

    def drivers(self, cc: ComputeCapability) -> DriverRange:
        first = dict(self.driver_first_by_cc).get(cc, self.driver_first)
        return DriverRange(first, self.driver_last, self.driver_source)


@dataclass(frozen=True)
class GpuModel:
    """A GPU users name: its compute capability, its segment (datacenter, workstation,
    consumer, embedded) and the other names that find it."""

    name: str
    cc: ComputeCapability
    segment: str
    aliases: tuple[str, ...]
    source: str
    # The only platform such machines exist on ("linux-aarch64" for Grace and Jetson
    # systems); None: any.
    platform: str | None = None
    # For Jetson boards whose GPU runs only NVIDIA's L4T (JetPack) builds: what NVIDIA
    # publishes instead of PyTorch's aarch64 wheels. None: PyTorch's wheels apply.
    l4t: str | None = None
    provenance: Provenance = NO_PROVENANCE


@dataclass(frozen=True)
class JetPack:
    """One JetPack release: its Jetson Linux (L4T), the CUDA it ships and runs, the driver
    nvidia-smi reports on it (numbered apart from desktop drivers; None before JetPack 6,
    which had no nvidia-smi) and the boards it supports."""

    version: str
    l4t: str
    cuda: CudaVersion
    driver: DriverVersion | None
    gpus: tuple[str, ...]
    source: str
    provenance: Provenance = NO_PROVENANCE

    def describe(self) -> str:
        return f"JetPack {self.version} (L4T {self.l4t})"


@dataclass(frozen=True)
class TorchBuild:
    """One build of a torch release (``tag``: ``cu121``, ``cpu``) on one platform: the CUDA
    it is for, its compiled arch list, and the cuDNN and NCCL its wheels depend on."""

    tag: str
    cuda: CudaVersion | None
    arch: tuple[ArchTarget, ...]
    cudnn: str | None
    nccl: str | None
    source: str
    platform: str = "linux-64"
    python: SpecifierSet | None = None  # narrower than the release's, for this build only
    provenance: Provenance = NO_PROVENANCE
    # Served by the PyTorch index outside the release's official CUDA matrix.
    off_matrix: bool = False
    # osx-arm64: the oldest macOS its wheels install on (their macosx_X_Y tag)
    macos: str | None = None

    @property
    def is_cpu(self) -> bool:
        return self.cuda is None

    def covering(self, gpu: ComputeCapability) -> ArchTarget | None:
        return arch_covering(self.arch, gpu)

    @property
    def arch_text(self) -> str:
        return ", ".join(str(a) for a in self.arch)


@dataclass(frozen=True)
class TorchRelease:
    """One torch release. ``builds`` and ``pypi_default`` describe Linux x86_64 (what
    most callers want); ``on(platform)`` gives the same release as another platform
    sees it (its own builds, arch lists and PyPI build)."""

    version: Version
    torchvision: Version | None
    torchaudio: Version | None
    python: SpecifierSet
    pypi_default: str | None
    builds: tuple[TorchBuild, ...]
    source: str
    platform: str = "linux-64"
    all_builds: tuple[TorchBuild, ...] = ()  # every platform's
    pypi_defaults: tuple[tuple[str, str], ...] = ()  # (platform, tag) for every platform
    provenance: Provenance = NO_PROVENANCE
    # The Pythons PyPI's wheels cover, where the PyTorch index has more (experimental ones)
    pypi_python: SpecifierSet | None = None
    # Pythons the torch index was seen to serve that the data lacks (``plan._seen``)
    seen_pythons: tuple[str, ...] = ()
    # other torchvision releases made for this torch (torchvision 0.11.0 beside 0.11.1)
    torchvision_also: tuple[Version, ...] = ()

    def paired(self, package: str) -> tuple[Version, ...]:
        """The torchvision/torchaudio releases made for this torch, the one to write first."""
        first = self.torchvision if package == "torchvision" else self.torchaudio
        also = self.torchvision_also if package == "torchvision" else ()
        return (first, *also) if first is not None else ()

    def on_pypi(self, python: str) -> bool:
        """Whether PyPI has wheels of this release for ``python``."""
        return self.pypi_python is None or self.pypi_python.contains(python)

    def on(self, platform: str) -> TorchRelease:
        """This release for ``platform``: its builds there, and PyPI's build there."""
        if platform == self.platform:
            return self
        return replace(
            self,
            platform=platform,
            builds=tuple(b for b in self.all_builds if b.platform == platform),
            pypi_default=dict(self.pypi_defaults).get(platform),
        )

    def build(self, tag: str) -> TorchBuild | None:
        return next((b for b in self.builds if b.tag == tag), None)

    def pypi_cuda_build(self) -> TorchBuild | None:
        """PyPI's own build of this release on its platform when it is a CUDA build
        (the one a network that reaches PyPI alone can install); None when PyPI's build
        is the CPU one or not known."""
        build = self.build(self.pypi_default) if self.pypi_default else None
        return build if build is not None and build.cuda is not None else None

    def python_of(self, build: TorchBuild) -> SpecifierSet:
        """The Pythons ``build`` has wheels for."""
        return build.python if build.python is not None else self.python

    @property
    def cuda_builds(self) -> tuple[TorchBuild, ...]:
        return tuple(b for b in self.builds if not b.is_cpu)

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(b.tag for b in self.builds)


_BRAND_PREFIXES = ("nvidia", "geforce", "tesla")
_TOKEN_SPLIT = re.compile(r"[\s\-_/]+")


def gpu_tokens(name: str) -> tuple[str, ...]:
    """Normalise a GPU name for matching: lowercase tokens, brand prefixes dropped.

    "NVIDIA GeForce RTX 4060 Ti" -> ("rtx", "4060", "ti");
    "NVIDIA A100-SXM4-80GB" -> ("a100", "sxm4", "80gb").
    """
    tokens = [t for t in _TOKEN_SPLIT.split(name.strip().lower()) if t]
    while len(tokens) > 1 and tokens[0] in _BRAND_PREFIXES:
        tokens.pop(0)
    return tuple(tokens)


@dataclass(frozen=True)
class KnowledgeBase:
    """The whole compatibility knowledge base (CUDA releases and families, GPU architectures
    and models, torch releases, JetPacks) and the queries the planner asks of it."""

    cuda_releases: tuple[CudaRelease, ...]
    cuda_families: tuple[CudaFamily, ...]
    architectures: tuple[Architecture, ...]
    gpus: tuple[GpuModel, ...]
    torch_releases: tuple[TorchRelease, ...]  # newest first
    facts_file: str | None = None  # the user's facts file merged over the shipped data
    jetpacks: tuple[JetPack, ...] = ()  # oldest first

    # --- CUDA and drivers -------------------------------------------------------

    def cuda(self, version: CudaVersion) -> CudaRelease | None:
        return next((c for c in self.cuda_releases if c.version == version), None)

    def family(self, major: int) -> CudaFamily | None:
        return next((f for f in self.cuda_families if f.major == major), None)

    def nvcc_wheel(self, version: CudaVersion) -> str | None:
        """NVIDIA's pip package of nvcc for CUDA ``version`` (None: it has none)."""
        family = self.family(version.major)
        if family is None or family.nvcc_wheel is None or family.nvcc_wheel_from is None:
            return None
        return family.nvcc_wheel if version >= family.nvcc_wheel_from else None

    def driver_floor(
        self, version: CudaVersion, mode: DriverCompat, platform: str = "linux-64"
    ) -> DriverVersion | None:
        """The lowest driver that runs a build for ``version`` under ``mode``: Linux's, or
        on ``win-64`` the Windows driver's (NVIDIA lists no Windows minimum per release
        from 13.0 on: the Linux minimum's branch then)."""
        release = self.cuda(version)
        family = self.family(version.major)
        if platform == "win-64":
            if mode is DriverCompat.STRICT and release is not None:
                # NVIDIA lists "N/A" from 13.0 on (no driver in the toolkit): the Linux
                # minimum's branch, which Windows drivers share ("R595" -> 595.00)
                branch = DriverVersion.parse(f"{release.linux_driver_min.key[0]}.00")
                return release.windows_driver_min or branch
            return family.windows_driver_min if family else None
        if mode is DriverCompat.MINOR and family is not None:
            return family.linux_driver_min
        return release.linux_driver_min if release else None

    def newest_cuda_for_driver(
        self, driver: DriverVersion, platform: str = "linux-64"
    ) -> CudaVersion | None:
        """The newest CUDA release whose minimum driver is met: what ``nvidia-smi``
        prints as "CUDA Version" for this driver."""
        fits = [
            c.version
            for c in self.cuda_releases
            if (floor := self.driver_floor(c.version, DriverCompat.STRICT, platform)) is not None
            and floor <= driver
        ]
        return max(fits) if fits else None

    # --- GPUs ---------------------------------------------------------------------

    def jetpacks_of(self, gpu: GpuModel) -> tuple[JetPack, ...]:
        """The JetPack releases that support a Jetson board, oldest first (none: not a
        Jetson)."""
        name = gpu_tokens(gpu.name)
        return tuple(j for j in self.jetpacks if any(gpu_tokens(g) == name for g in j.gpus))

    def jetpack_running(self, gpu: GpuModel, driver: DriverVersion) -> JetPack | None:
        """The JetPack release of ``gpu`` whose driver is ``driver`` (of several with one
        driver, the newest the data does not mark unverified)."""
        found = [j for j in self.jetpacks_of(gpu) if j.driver == driver]
        found.sort(key=lambda j: (j.provenance.unverified is None, j.version.split(".")))
        return found[-1] if found else None

    def architecture_of(self, cc: ComputeCapability) -> str | None:
        found = self.architecture(cc)
        return found.name if found else None

    def architecture(self, cc: ComputeCapability) -> Architecture | None:
        return next((a for a in self.architectures if cc in a.compute_capabilities), None)

    def drivers_for(self, cc: ComputeCapability) -> DriverRange:
        """The driver branches that drive a GPU of compute capability ``cc``."""
        found = self.architecture(cc)
        return found.drivers(cc) if found else DriverRange(None, None, None)

    @cached_property
    def _alias_tokens(self) -> tuple[tuple[tuple[str, ...], GpuModel], ...]:
        """Every name and alias as tokens, computed once (find_gpu runs per target)."""
        out = []
        for gpu in self.gpus:
            out.append((gpu_tokens(gpu.name), gpu))
            out.extend((gpu_tokens(alias), gpu) for alias in gpu.aliases)
        return tuple(out)

    def _aliases(self) -> Iterator[tuple[tuple[str, ...], GpuModel]]:
        yield from self._alias_tokens

    @cached_property
    def _found_gpus(self) -> dict[str, GpuModel | None]:
        return {}

    def find_gpu(self, name: str) -> GpuModel | None:
        """Match a user's or NVML's GPU name: the longest known name whose tokens
        begin the given name ("NVIDIA H100 80GB HBM3" -> H100). Each name is matched
        once: a lock asks about 30 times per target (four targets: 9 ms of scanning)."""
        found = self._found_gpus
        if name not in found:
            found[name] = self._match_gpu(name)
        return found[name]

    def _match_gpu(self, name: str) -> GpuModel | None:
        wanted = gpu_tokens(name)
        best: tuple[int, GpuModel] | None = None
        for tokens, gpu in self._aliases():
            if (
                tokens
                and wanted[: len(tokens)] == tokens
                and (best is None or len(tokens) > best[0])
            ):
                best = (len(tokens), gpu)
        return best[1] if best else None

    def suggest_gpus(self, name: str, limit: int = 3) -> list[str]:
        import difflib  # only for a name that matched nothing

        names = {" ".join(tokens): gpu.name for tokens, gpu in self._aliases()}
        close = difflib.get_close_matches(" ".join(gpu_tokens(name)), list(names), n=limit * 3)
        seen: list[str] = []
        for key in close:
            if names[key] not in seen:
                seen.append(names[key])
        return seen[:limit]

    # --- torch ----------------------------------------------------------------------

    def torch_release(self, version: Version | str) -> TorchRelease | None:
        wanted = Version(str(version))
        return next((r for r in self.torch_releases if r.version == wanted), None)

    @property
    def newest_torch(self) -> TorchRelease | None:
        return self.torch_releases[0] if self.torch_releases else None

    def torch_matching(self, spec: SpecifierSet) -> list[TorchRelease]:
        """Releases matching ``spec``, newest first (pre-releases never)."""
        return [r for r in self.torch_releases if spec.contains(r.version, prereleases=False)]

    def release_for_companion(self, package: str, version: Version) -> TorchRelease | None:
        """The torch release a torchvision/torchaudio version was released with."""
        for release in self.torch_releases:
            if version in release.paired(package):
                return release
        return None


def sorted_releases(releases: Iterable[TorchRelease]) -> tuple[TorchRelease, ...]:
    return tuple(sorted(releases, key=lambda r: r.version, reverse=True))
