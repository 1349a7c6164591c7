"""The full schema of the knowledge-base files (pydantic), and the check of a user's file.

The shipped data files are checked against these models by the test suite
(``tests/knowledge/test_data_schema.py``), not on every run: importing pydantic and
building the models costs more than the whole plan. A user's facts file is checked
with them when gpuenv first reads it (its parsed form is then cached by digest, like the
shipped data): it is input from disk, and believed only once it passed.

A user's facts file has the shape of the shipped files, in one file: any of cuda.toml's
``[[family]]``/``[[release]]``, gpus.toml's ``[[architecture]]``/``[[gpu]]`` and
torch.toml's ``[[series]]``, plus ``schema = 1``.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gpuenv._validation import Problem, schema_problems
from gpuenv.versions import (
    ArchTarget,
    ComputeCapability,
    CudaVersion,
    DriverVersion,
    VersionFormatError,
)


def _check(parse: Any) -> Any:
    def validator(value: str) -> str:
        try:
            parse(value)
        except (VersionFormatError, InvalidVersion, InvalidSpecifier) as exc:
            raise ValueError(str(exc)) from exc
        return value

    return AfterValidator(validator)


Driver = Annotated[str, _check(DriverVersion.parse)]
Cuda = Annotated[str, _check(CudaVersion.parse)]
CC = Annotated[str, _check(ComputeCapability.parse)]
Arch = Annotated[str, _check(ArchTarget.parse)]
Pep440 = Annotated[str, _check(Version)]
Specifier = Annotated[str, _check(SpecifierSet)]
Url = Annotated[str, Field(pattern=r"^https://\S+$")]
Branch = Annotated[str, Field(pattern=r"^\d{3}$")]  # a driver branch: "570"
Tag = Annotated[str, Field(pattern=r"^(cpu|cu\d{2,4})$")]
# the same order as the spec's Literal: typing caches equal Literals (order-blind), and the
# JSON schema of whichever model loads second would take the first one's order
Platform = Literal["linux-64", "linux-aarch64", "osx-arm64", "win-64"]
Unverified = Annotated[str, Field(min_length=3)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Sourced(_Strict):
    source: Url
    checked: date
    unverified: Unverified | None = None


class RawFamily(_Sourced):
    major: int
    linux_driver_min: Driver
    windows_driver_min: Driver | None = None
    nvcc_wheel: str | None = None
    nvcc_wheel_from: Cuda | None = None
    nvcc_wheel_source: Url | None = None


class RawCudaRelease(_Sourced):
    cuda: Cuda
    linux_driver_min: Driver
    windows_driver_min: Driver | None = None
    arch_min: CC | None = None
    arch_max: CC | None = None


class RawCudaFile(_Strict):
    schema_version: int = Field(alias="schema")
    family: list[RawFamily]
    release: list[RawCudaRelease]


class RawArchitecture(_Sourced):
    name: str
    compute_capabilities: list[CC]
    driver_first: Branch | None = None
    driver_last: Branch | None = None
    driver_first_by_cc: dict[CC, Branch] = {}
    driver_source: Url | None = None


class RawGpu(_Sourced):
    name: str
    cc: CC
    segment: str = Field(pattern=r"^(datacenter|consumer|workstation|embedded)$")
    aliases: list[str] = []
    platform: Platform | None = None
    l4t: str | None = None


class RawJetPack(_Sourced):
    jetpack: str = Field(pattern=r"^\d+\.\d+(\.\d+)?$")
    l4t: str = Field(pattern=r"^\d+\.\d+(\.\d+)?$")
    cuda: Cuda
    driver: Driver | None = None
    gpus: list[str] = Field(min_length=1)


class RawGpuFile(_Strict):
    schema_version: int = Field(alias="schema")
    architecture: list[RawArchitecture]
    gpu: list[RawGpu]
    jetpack: list[RawJetPack] = []


class RawRelease(_Strict):
    torch: Pep440
    torchvision: Pep440 | None = None
    # torchvision releases also made for this torch (a same-day re-release: 0.11.0 and 0.11.1
    # for 1.10.0); ``torchvision`` is the one a move writes
    torchvision_also: list[Pep440] = []
    torchaudio: Pep440 | None = None
    pypi_default: Tag | None = None
    pypi_default_aarch64: Tag | None = None
    pypi_default_win: Tag | None = None
    pypi_default_osx: Tag | None = None
    python: Specifier | None = None
    unverified: Unverified | None = None


class RawBuild(_Sourced):
    tag: Tag
    platform: Platform = "linux-64"
    arch: list[Arch] = []
    cudnn: str | None = None
    nccl: str | None = None
    python: Specifier | None = None
    only: list[Pep440] | None = None
    off_matrix: bool = False
    macos: str | None = Field(default=None, pattern=r"^\d+\.\d+$")  # osx-arm64: oldest macOS


class RawSeries(_Sourced):
    minor: str = Field(pattern=r"^\d+\.\d+$")
    python: Specifier
    pypi_python: Specifier | None = None
    releases: list[RawRelease]
    builds: list[RawBuild]


class RawTorchFile(_Strict):
    schema_version: int = Field(alias="schema")
    series: list[RawSeries]


class RawFactsFile(_Strict):
    """A user's facts file: entries of any shipped file, merged over the shipped data."""

    schema_version: int = Field(alias="schema")
    family: list[RawFamily] = []
    release: list[RawCudaRelease] = []
    architecture: list[RawArchitecture] = []
    gpu: list[RawGpu] = []
    series: list[RawSeries] = []


MODELS: dict[str, type[_Strict]] = {
    "cuda.toml": RawCudaFile,
    "gpus.toml": RawGpuFile,
    "torch.toml": RawTorchFile,
}


def validate_facts_file(raw: dict[str, Any]) -> list[Problem]:
    """Every problem of a user's facts file as (location, message); empty when valid."""
    return schema_problems(RawFactsFile, raw)
