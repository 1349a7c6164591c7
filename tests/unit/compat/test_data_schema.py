"""The knowledge base's full schema, enforced on the shipped data files.

Run-time loading converts entries without pydantic (start-up cost, see
``gpuenv.compat._load``); this test is where unknown keys, missing sources and
malformed versions are caught, before they ship.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

import pytest
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gpuenv.compat._data import DATA_FILES, read_data
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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Sourced(_Strict):
    source: Url
    checked: date


class RawFamily(_Sourced):
    major: int
    linux_driver_min: Driver


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


class RawGpu(_Sourced):
    name: str
    cc: CC
    segment: str = Field(pattern=r"^(datacenter|consumer|workstation|embedded)$")
    aliases: list[str] = []


class RawGpuFile(_Strict):
    schema_version: int = Field(alias="schema")
    architecture: list[RawArchitecture]
    gpu: list[RawGpu]


class RawRelease(_Strict):
    torch: Pep440
    torchvision: Pep440 | None = None
    torchaudio: Pep440 | None = None
    pypi_default: str | None = Field(default=None, pattern=r"^(cpu|cu\d{3,4})$")
    python: Specifier | None = None


class RawBuild(_Sourced):
    tag: str = Field(pattern=r"^(cpu|cu\d{3,4})$")
    arch: list[Arch] = []
    cudnn: str | None = None
    nccl: str | None = None
    only: list[Pep440] | None = None


class RawSeries(_Sourced):
    minor: str = Field(pattern=r"^\d+\.\d+$")
    python: Specifier
    releases: list[RawRelease]
    builds: list[RawBuild]


class RawTorchFile(_Strict):
    schema_version: int = Field(alias="schema")
    series: list[RawSeries]


MODELS: dict[str, type[_Strict]] = {
    "cuda.toml": RawCudaFile,
    "gpus.toml": RawGpuFile,
    "torch.toml": RawTorchFile,
}


@pytest.mark.parametrize("name", DATA_FILES)
def test_data_file_matches_schema(name: str) -> None:
    MODELS[name].model_validate(read_data(name))


def test_every_data_file_has_a_schema() -> None:
    assert set(MODELS) == set(DATA_FILES)


def test_schema_rejects_an_entry_without_source() -> None:
    data = read_data("cuda.toml")
    broken = dict(data)
    broken["release"] = [{k: v for k, v in data["release"][0].items() if k != "source"}]
    with pytest.raises(ValueError, match="source"):
        RawCudaFile.model_validate(broken)
