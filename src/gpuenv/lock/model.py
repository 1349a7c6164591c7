"""The lock in memory, and the two-method protocol every resolver backend follows.

Backends (``lock.uv`` for pip artifacts, ``lock.rattler`` for conda records) take a
frozen request and return exact artifacts: URL and hashes, and the dependency edges
of this resolution. They never read the spec or the plan; orchestration builds the
requests. A resolution that cannot succeed raises ``NoCompatiblePlan`` (exit 3) with
the tool's explanation in plain words; a tool that fails for any other reason
(network, crash, timeout) raises ``ExternalToolError`` (exit 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol
from urllib.parse import unquote, urlsplit

from gpuenv._network import Mirrors
from gpuenv.names import TORCH_FAMILY, normalize_name

if TYPE_CHECKING:  # annotations only: a lock without builds never loads the build model
    from pathlib import Path

    from gpuenv.builds.model import BuildEntry


@dataclass(frozen=True)
class PipPackage:
    """One pip artifact, exactly: a wheel (or sdist) URL and its sha256."""

    name: str  # PEP 503-normalised
    version: str
    url: str  # canonical, redacted (gpuenv._redact): never a credential
    sha256: str
    index: str | None = None  # the index it was found on (canonical, redacted)
    requires: tuple[str, ...] = ()  # normalised names of its dependencies in this resolution
    # Its bytes, where the index said (PEP 691/700 JSON pages; an HTML page has none): the
    # install's disk check needs no request for it, and a stored copy of another size is
    # damaged before anything is hashed.
    size: int | None = None

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])  # "%2B" -> "+"


@dataclass(frozen=True)
class CondaPackage:
    """One conda record, exactly: enough to install it again without a solve."""

    name: str
    version: str
    build: str
    build_number: int
    channel: str
    subdir: str
    url: str
    sha256: str
    md5: str
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    size: int | None = None
    noarch: str | None = None  # "python" or "generic": decides how the package is linked


@dataclass(frozen=True)
class PipRequest:
    """Resolve ``requirements`` for one target's Python and platform."""

    requirements: tuple[str, ...]  # PEP 508, e.g. "torch==2.4.1", "transformers>=4.44"
    python: str  # "3.11" (or an exact "3.11.9" when conda supplies Python)
    platform: str = "linux-64"  # or "linux-aarch64", "osx-arm64", "win-64"
    glibc: str = "2.28"  # the manylinux level of the target machines
    default_index: str | None = None  # None: the tool's default index
    extra_indexes: tuple[str, ...] = ()
    # The chosen build's index (".../cu124"): the torch family comes only from here.
    # None: the default index serves the torch family (PyPI's build is the chosen one).
    torch_index: str | None = None
    torch_family: tuple[str, ...] = TORCH_FAMILY
    preferences: tuple[PipPackage, ...] = ()  # existing pins to keep while they still fit
    cache_dir: Path | None = None
    # Packages to build from source: their sdist is locked even where wheels exist.
    no_binary: tuple[str, ...] = ()
    # (name, requirements): a package's dependencies, for packages whose metadata cannot be
    # read without building them (a setup.py that imports torch); uv's dependency-metadata.
    dependency_metadata: tuple[tuple[str, tuple[str, ...]], ...] = ()
    macos: str | None = None  # osx-arm64: the oldest macOS of the target machines ("14.0")
    # Resolve through these; the packages returned carry the canonical URLs.
    mirrors: Mirrors = field(default_factory=Mirrors)
    # [pip] exclude-newer as the UTC instant uv excludes from ("2021-03-03T00:00:00Z"):
    # later uploads are ignored, except the torch family's (the plan chose those).
    exclude_newer: str | None = None
    # [pip] exclude-newer-package: (name, cutoff instant) for packages with a day of their
    # own, or (name, "false") for one exempt (NVIDIA's nvcc wheel of the plan's CUDA)
    exclude_newer_packages: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CondaRequest:
    """Solve ``specs`` for one target, with that target's virtual packages."""

    specs: tuple[str, ...]  # match specs, e.g. "cuda-nvcc 12.4.*", "python 3.11.*"
    channels: tuple[str, ...]  # names ("conda-forge") or URLs (file:// included)
    platform: str = "linux-64"
    # The target's complete list (__cuda, __cuda_arch, __glibc, __linux, __unix):
    # never this machine's. A CPU target has no __cuda.
    virtual_packages: Mapping[str, str] = field(default_factory=dict)
    preferences: tuple[CondaPackage, ...] = ()  # locked records to keep while they still fit
    cache_dir: Path | None = None
    # Solve through these; the records returned carry the canonical URLs.
    mirrors: Mirrors = field(default_factory=Mirrors)


class PipResolver(Protocol):
    def resolve(self, request: PipRequest) -> tuple[PipPackage, ...]: ...

    def describe(self) -> str: ...


class CondaSolver(Protocol):
    def resolve(self, request: CondaRequest) -> tuple[CondaPackage, ...]: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class LockedHardware:
    """The hardware a target was locked for (assumed, not this machine's)."""

    cpu: bool
    gpu: str | None
    compute_capabilities: tuple[str, ...]
    driver: str | None
    driver_cuda: str | None
    source: str  # "declared", "measured" or "file"


@dataclass(frozen=True)
class StackSummary:
    """The plan's stack as a target's lock records it: the Python, the CUDA and its wheel tag,
    the torch family's versions, cuDNN and NCCL, the arch list, and the index torch comes from."""

    python: str
    cuda: str | None
    cu_tag: str
    torch: str
    torchvision: str | None
    torchaudio: str | None
    cudnn: str | None
    nccl: str | None
    arch_list: tuple[str, ...]
    index: str  # the chosen build's index (redacted)


@dataclass(frozen=True)
class WheelFacts:
    """Facts read at lock time from the resolved wheels' own metadata (``METADATA``),
    not from gpuenv's knowledge base: what the installed environment will really hold."""

    requires_python: str | None = None  # torch's Requires-Python
    cuda_runtime: str | None = None  # torch's pin on nvidia-cuda-runtime(-cuXX) / cuda-toolkit
    cudnn: str | None = None  # torch's pin on nvidia-cudnn-cuXX
    nccl: str | None = None  # torch's pin on nvidia-nccl-cuXX
    torchvision_requires: str | None = None  # torchvision's requirement on torch
    torchaudio_requires: str | None = None  # torchaudio's requirement on torch


@dataclass(frozen=True)
class LockedTarget:
    """One target of ``gpuenv.lock``: the hardware and stack it was locked for, the hash of
    the spec parts it came from, and everything it installs (conda, pip and builds), with
    what the wheels' own metadata said."""

    name: str
    input_hash: str  # hash of the spec parts this target depends on (staleness)
    platform: str
    hardware: LockedHardware
    stack: StackSummary
    virtual_packages: Mapping[str, str]
    conda: tuple[CondaPackage, ...] = ()
    pip: tuple[PipPackage, ...] = ()
    builds: tuple[BuildEntry, ...] = ()  # packages compiled at install (gpuenv.builds)
    wheel_facts: WheelFacts | None = None  # None: not read (an older lock, or unreadable)
    # Per dependency group, the locked packages only that group brings (lock.extras).
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def pip_package(self, name: str) -> PipPackage | None:
        wanted = normalize_name(name)
        return next((p for p in self.pip if p.name == wanted), None)

    @cached_property
    def content_hash(self) -> str:
        """sha256 over the target's whole table as written in gpuenv.lock (everything but
        the hash itself, see ``lock._integrity``): names the store prefix, and binds the
        completion marker and verification records to exactly this locked content."""
        from gpuenv.lock._table import target_content_hash

        return target_content_hash(self)


@dataclass(frozen=True)
class Lock:
    """A whole ``gpuenv.lock``: the hash of the spec it was made from, and every target's lock."""

    spec_hash: str
    targets: Mapping[str, LockedTarget]

    def target(self, name: str) -> LockedTarget | None:
        return self.targets.get(name)
