"""The pydantic models of gpuenv.lock: the schema validation run on a lock gpuenv has
not seen before (a cache miss in ``lock.format``), and the source of the JSON Schema.
The content hashes and consistency checks are in ``lock._integrity``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpuenv._validation import Problem, schema_problems


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


class HardwareModel(_Model):
    cpu: bool
    gpu: str | None = None
    compute_capabilities: list[str] = Field(default_factory=list, alias="compute-capabilities")
    driver: str | None = None
    driver_cuda: str | None = Field(default=None, alias="driver-cuda")
    source: str


class StackModel(_Model):
    python: str
    cuda: str | None = None
    cu_tag: str = Field(alias="cu-tag")
    torch: str
    torchvision: str | None = None
    torchaudio: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    arch_list: list[str] = Field(default_factory=list, alias="arch-list")
    index: str


class CondaModel(_Model):
    name: str
    version: str
    build: str
    build_number: int = Field(alias="build-number")
    channel: str
    subdir: str
    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    md5: str = Field(pattern=r"^[0-9a-f]{32}$")
    depends: list[str] = Field(default_factory=list)
    constrains: list[str] = Field(default_factory=list)
    size: int | None = None
    noarch: str | None = Field(default=None, pattern=r"^(python|generic)$")


class PipModel(_Model):
    name: str
    version: str
    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int | None = Field(default=None, ge=0)
    index: str | None = None
    requires: list[str] = Field(default_factory=list)


class BuildModel(_Model):
    """A package compiled at install: its source and build inputs; ``identity`` is their
    hash (gpuenv.builds.model.compute_identity) and names its entry in the build cache."""

    name: str
    version: str
    identity: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    source: str = Field(pattern=r"^(sdist|git)$")
    url: str
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    requires: list[str] = Field(default_factory=list)
    max_jobs: int | None = Field(default=None, ge=1, alias="max-jobs")
    against_torch: bool = Field(alias="against-torch")
    no_build_isolation: bool = Field(alias="no-build-isolation")
    torch: str | None = None
    torch_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$", alias="torch-sha256")
    cuda: str | None = None
    toolkit: str | None = None
    arch_list: str | None = Field(default=None, alias="arch-list")
    python: str
    platform: str
    host_compiler: str | None = Field(default=None, alias="host-compiler")
    build_requires: list[str] = Field(default_factory=list, alias="build-requires")
    env: dict[str, str] = Field(default_factory=dict)


class WheelFactsModel(_Model):
    """Facts read from the resolved wheels' metadata at lock time."""

    requires_python: str | None = Field(default=None, alias="requires-python")
    cuda_runtime: str | None = Field(default=None, alias="cuda-runtime")
    cudnn: str | None = None
    nccl: str | None = None
    torchvision_requires: str | None = Field(default=None, alias="torchvision-requires")
    torchaudio_requires: str | None = Field(default=None, alias="torchaudio-requires")


class TargetModel(_Model):
    content_hash: str = Field(alias="content-hash", pattern=r"^sha256:[0-9a-f]{64}$")
    input_hash: str = Field(alias="input-hash")
    platform: str
    hardware: HardwareModel
    stack: StackModel
    virtual_packages: dict[str, str] = Field(default_factory=dict, alias="virtual-packages")
    conda: list[CondaModel] = Field(default_factory=list)
    pip: list[PipModel] = Field(default_factory=list)
    builds: list[BuildModel] = Field(default_factory=list)
    wheel_facts: WheelFactsModel | None = Field(default=None, alias="wheel-facts")
    groups: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per dependency group, the locked packages only that group brings.",
    )


class LockFileModel(_Model):
    """gpuenv.lock"""

    lock_version: int = Field(alias="lock-version")
    spec_hash: str = Field(alias="spec-hash")
    targets: dict[str, TargetModel] = Field(default_factory=dict)


def problems(raw: dict[str, Any]) -> list[Problem]:
    """Every schema problem of a parsed lock: (location, message); empty when valid."""
    return schema_problems(LockFileModel, raw)


def json_schema() -> dict[str, Any]:
    schema = LockFileModel.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpuenv.lock"
    return schema
