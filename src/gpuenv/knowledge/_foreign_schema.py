"""The schema of the data files about things outside a gpuenv spec: container images,
conda's CUDA packages and names, and the companion packages tied to torch.

These files are read only by ``gpuenv import`` (never on ``plan``'s or ``run``'s path),
so they are validated on every load: unknown keys, a missing ``source`` or ``checked``
date, an unparsable version or specifier all fail loudly, naming the file and entry.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuenv._validation import parsed_by
from gpuenv.versions import ComputeCapability, VersionFormatError

Pep440 = Annotated[str, parsed_by(Version, InvalidVersion)]
Specifier = Annotated[str, parsed_by(SpecifierSet, InvalidSpecifier)]
CC = Annotated[str, parsed_by(ComputeCapability.parse, VersionFormatError)]
Regex = Annotated[
    str, parsed_by(re.compile, re.error, lambda _, exc: f"not a regular expression: {exc}")
]
Python = Annotated[str, Field(pattern=r"^3\.\d{1,2}$")]
CudaFull = Annotated[str, Field(pattern=r"^\d{1,2}\.\d{1,2}(\.\d{1,3})?$")]
Url = Annotated[str, Field(pattern=r"^https://\S+$")]
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*\*?$|^_\*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Sourced(_Strict):
    source: Url
    checked: date
    unverified: bool = False


# --- images.toml ------------------------------------------------------------------------


class RawPytorchImage(_Sourced):
    series: Annotated[str, Field(pattern=r"^\d+\.\d+$")]
    python: Python


class RawOsPython(_Sourced):
    os: Annotated[str, Field(pattern=r"^[a-z]+\d+(\.\d+)?$")]
    python: Python


class RawNgc(_Sourced):
    release: Annotated[str, Field(pattern=r"^\d{2}\.\d{2}$")]
    torch: Pep440
    upstream: Pep440
    cuda: CudaFull
    cudnn: str | None = None
    python: Python
    os: str


CudaMinor = Annotated[str, Field(pattern=r"^\d{1,2}\.\d{1,2}$")]
CudnnMajor = Annotated[str, Field(pattern=r"^\d{1,2}$")]
ImageRef = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9./_-]*(:[A-Za-z0-9._-]+)?$")]


class RawCudaImageRelease(_Strict):
    version: CudaFull
    cudnn: dict[CudnnMajor, Annotated[str, Field(pattern=r"^cudnn\d*$")]]


class RawCudaImages(_Sourced):
    """nvidia/cuda per CUDA release, for ``export dockerfile``."""

    repository: ImageRef
    os: Annotated[str, Field(pattern=r"^[a-z]+\d+(\.\d+)?$")]
    releases: dict[CudaMinor, RawCudaImageRelease]


class RawImage(_Sourced):
    image: ImageRef


class RawMicromamba(RawImage):
    binary: Annotated[str, Field(pattern=r"^/\S+$")]


class RawUvImage(_Sourced):
    repository: ImageRef


class RawImagesFile(_Strict):
    schema_version: int = Field(alias="schema")
    pytorch_image: list[RawPytorchImage]
    os_python: list[RawOsPython]
    ngc_pytorch: list[RawNgc]
    cuda_images: RawCudaImages = Field(alias="cuda-images")
    cpu_image: RawImage = Field(alias="cpu-image")
    micromamba: RawMicromamba
    uv: RawUvImage


# --- conda_cuda.toml, conda_names.toml --------------------------------------------------


class RawCondaCudaPackage(_Sourced):
    name: Name
    means: Literal["build", "cpu", "toolkit", "runtime"]
    note: str


class RawBuildString(_Sourced):
    pattern: Regex


class RawCondaCudaFile(_Strict):
    schema_version: int = Field(alias="schema")
    package: list[RawCondaCudaPackage]
    build_string: list[RawBuildString]


class RawRename(_Sourced):
    conda: Name
    pypi: Name


class RawNamed(_Sourced):
    name: Name


class RawPlatformOnly(_Sourced):
    name: Name
    platform: Literal["win-64"]


class RawRepository(_Sourced):
    repository: str = Field(pattern=r"^[a-z0-9.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    # a folder of it, as ``#subdirectory=`` names it: the project that folder builds
    subdirectory: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
    pypi: Name


class RawModule(_Sourced):
    module: Name  # normalised, as a requirement names it ("pil")
    pypi: Name
    why: str


class RawCondaNamesFile(_Strict):
    schema_version: int = Field(alias="schema")
    rename: list[RawRename]
    conda_only: list[RawNamed]
    runtime: list[RawNamed]
    platform_only: list[RawPlatformOnly] = []
    repository: list[RawRepository] = []
    module: list[RawModule] = []


# --- companions.toml --------------------------------------------------------------------


class RawCompanionRelease(_Sourced):
    version: Pep440
    latest: Pep440 | None = None
    torch: Specifier
    plain: bool = False
    nvcc: Specifier | None = None
    gpu_min: CC | None = None
    gpu_max: CC | None = None
    cuda: Specifier | None = None  # the CUDA releases its wheels carry binaries for
    cpu: Literal["works", "degraded", "none"] | None = None  # the companion's, for these
    # find-links pages with a prebuilt wheel of these releases: "<build>/torch<X.Y>"
    wheels: list[Annotated[str, Field(pattern=r"^(cu\d+|cpu)/torch\d+\.\d+$")]] = Field(
        default_factory=list
    )


class RawCompanionArch(_Sourced):
    cc: CC
    since: Pep440
    what: str | None = None  # what older wheels lack for cc, when not all their code


class RawCompanion(_Sourced):
    name: Name
    moves: Literal[
        "paired",
        "wheel-page",
        "source",
        "jit",
        "cuda-binaries",
        "torch-pinned",
        "cuda-suffix",
        "unmanaged",
    ]
    build: Literal["always", "when-no-wheel", "jit", "never"]
    compiled_against_torch: bool
    cpu: Literal["works", "degraded", "none"]
    note: str | None = None
    successor: Name | None = None
    wheel_page: Url | None = None
    # where it installs from when PyPI has no such project ("{version}": the release)
    git: Annotated[str, Field(pattern=r"^git\+https://[^\s@]+(@[^\s@]*)?$")] | None = None
    instead: str | None = None  # what replaces it, where its own documentation says so
    # an unmanaged framework's add-ons (glob patterns of PyPI names): left out with it
    addons: list[Annotated[str, Field(pattern=r"^[a-z0-9*][a-z0-9.*-]*$")]] = Field(
        default_factory=list
    )
    release: list[RawCompanionRelease] = Field(default_factory=list)
    arch: list[RawCompanionArch] = Field(default_factory=list)


class RawPythonFloor(_Sourced):
    package: Name
    python: Python
    version: Pep440


class RawTorchConstraint(_Sourced):
    torch: Specifier
    package: Name
    requires: Specifier
    why: str
    beside: Name | None = None
    pins_only: bool = False  # only the files' exact pins (the wheels declare it)
    asked_only: bool = False  # only where a file asks for the package: nothing added


class RawDatedConstraint(_Sourced):
    package: Name
    requires: Specifier
    before: date  # applies to files written before this day
    why: str
    python: Specifier | None = None  # the Pythons it applies to


class RawCompanionRequirement(_Sourced):
    package: Name
    version: Specifier
    requires: Name
    specifier: Specifier


class RawTorchChange(_Sourced):
    since: Pep440
    what: str
    breaks: bool = False
    marker: Annotated[str, Field(min_length=4)] | None = None  # searched for in the code
    code_only: bool = False  # said only where the code was read and has the marker


class RawGpuOnly(_Sourced):
    pattern: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._*-]*$")]
    what: str


class RawCompanionsFile(_Strict):
    schema_version: int = Field(alias="schema")
    companion: list[RawCompanion]
    python_floor: list[RawPythonFloor]
    torch_constraint: list[RawTorchConstraint]
    torch_change: list[RawTorchChange]
    companion_requirement: list[RawCompanionRequirement] = Field(default_factory=list)
    gpu_only: list[RawGpuOnly] = Field(default_factory=list)
    dated_constraint: list[RawDatedConstraint] = Field(default_factory=list)


# --- old_sdists.toml ---------------------------------------------------------------------


RequirementText = Annotated[str, parsed_by(Requirement, InvalidRequirement)]
EnvMap = dict[Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$")], str]


class RawTool(_Sourced):
    provides: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]*$")]
    requirement: RequirementText
    removed_in: str


class RawOldSdist(_Sourced):
    name: Name
    versions: Specifier
    needs: list[str]
    against_torch: bool
    toolkit: bool = False
    build_requires: list[RequirementText] = Field(default_factory=list)
    env: EnvMap = Field(default_factory=dict)
    gpu_env: EnvMap = Field(default_factory=dict)
    requires_dist: list[RequirementText]


class RawOldSdistsFile(_Strict):
    schema_version: int = Field(alias="schema")
    tool: list[RawTool]
    sdist: list[RawOldSdist]


# --- torch_dates.toml -------------------------------------------------------------------


class RawTorchDate(_Sourced):
    torch: Pep440
    published: date


class RawTorchDatesFile(_Strict):
    schema_version: int = Field(alias="schema")
    release: list[RawTorchDate] = Field(min_length=1)

    @field_validator("release")
    @classmethod
    def _dates_follow_versions(cls, release: list[RawTorchDate]) -> list[RawTorchDate]:
        """Each release once, and within a series a later release is never older: a swapped
        or mistyped date would move every era it dates."""
        seen: dict[Version, date] = {}
        for entry in release:
            version = Version(entry.torch)
            if version in seen:
                raise ValueError(f"torch {version} is listed twice")
            seen[version] = entry.published
        for version, published in seen.items():
            for other, when in seen.items():
                same = (other.major, other.minor) == (version.major, version.minor)
                if same and other < version and when > published:
                    raise ValueError(f"torch {version} ({published}) predates {other} ({when})")
        return release


SCHEMAS: dict[str, type[BaseModel]] = {
    "images.toml": RawImagesFile,
    "conda_cuda.toml": RawCondaCudaFile,
    "conda_names.toml": RawCondaNamesFile,
    "companions.toml": RawCompanionsFile,
    "old_sdists.toml": RawOldSdistsFile,
    "torch_dates.toml": RawTorchDatesFile,
}
