"""The pydantic models of ``gpuenv.toml``: validation, error messages, JSON Schema.

This is the edge where untrusted text becomes data. It is imported only when a
spec has to be validated (a cache miss in ``gpuenv.spec``) or the schema is
generated: building these models costs ~150 ms, more than the rest of ``plan``.
Every pydantic error becomes a ``SpecProblem`` with the file, the line and the
dotted key, and a "did you mean" hint for misspelt keys.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Mapping
from datetime import date
from typing import Annotated, Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
)

from gpuenv._marker import TARGET_NAME_PATTERN, TARGET_NAME_RULE
from gpuenv._tomlpos import Path as KeyPath
from gpuenv._tomlpos import line_of
from gpuenv._validation import parsed_by
from gpuenv.errors import SpecError, SpecProblem
from gpuenv.spec import _values as v
from gpuenv.spec._render import render_path

VersionSpec = Annotated[str, AfterValidator(v.version_spec)]
PythonSpec = Annotated[str, AfterValidator(v.python_version)]
CudaSpec = Annotated[str, AfterValidator(v.cuda)]
DriverSpec = Annotated[str, AfterValidator(v.driver)]
CCSpec = Annotated[str, AfterValidator(v.compute_capability)]
GpuSpec = Annotated[str, AfterValidator(v.gpu)]
ToolkitSpec = Annotated[str, AfterValidator(v.toolkit)]
RequirementSpec = Annotated[str, parsed_by(Requirement, InvalidRequirement, v.not_a_requirement)]
UrlSpec = Annotated[str, AfterValidator(v.url)]
ExcludeNewer = Annotated[str, AfterValidator(v.exclude_newer)]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=64)]
# A target names a project pointer (.gpuenv/<target>, beside <target>.previous) and a
# store prefix: no dots, so nothing collides with ".previous" (see gpuenv._marker).
TargetName = Annotated[str, Field(pattern=TARGET_NAME_PATTERN)]

_show = v.show

# --- models ---------------------------------------------------------------------------------


class _Model(BaseModel):
    # strict: a TOML string is never coerced into a number or a boolean ("300", "yes")
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False, strict=True)


ProjectPath = Annotated[str, AfterValidator(v.project_path)]


class Project(_Model):
    name: Name = Field(description="The project's name; shown in prompts and prefix names.")
    description: str | None = None
    path: ProjectPath | Literal[False] | None = Field(
        default=None,
        description='The Python project installed editable into every target ("." : the '
        'directory of gpuenv.toml). Omitted: "." when a pyproject.toml or setup.py sits '
        "beside gpuenv.toml; false: none.",
    )


class Stack(_Model):
    python: PythonSpec = Field(description='Python version ("3.11") or range (">=3.10").')
    torch: VersionSpec = Field(
        default="*",
        description='torch version or PEP 440 specifier: "2.4.*", "2.4.1", ">=2.4,<2.6".',
    )
    torchvision: VersionSpec | Literal[False] | None = Field(
        default=None,
        description="Omitted: the release paired with torch, when one exists. "
        '"*" or a specifier: required, and must match the pairing. false: not installed.',
    )
    torchaudio: VersionSpec | Literal[False] | None = Field(
        default=None, description="Like torchvision."
    )
    cuda: CudaSpec = Field(
        default="auto", description='"auto", or the CUDA runtime the wheels are built for ("12.4").'
    )
    driver_compat: Literal["strict", "minor"] = Field(
        default="strict",
        alias="driver-compat",
        description='"strict": a build needs its CUDA release\'s own minimum driver. '
        '"minor": NVIDIA\'s CUDA minor-version compatibility (any 12.x on driver >= 525.60.13).',
    )
    toolkit: ToolkitSpec | None = Field(
        default=None,
        description='A CUDA toolkit (nvcc, headers) in the prefix: "12.4", '
        '"auto" (the wheels\' CUDA), '
        'or an existing one: "system:/usr/local/cuda-12.4".',
    )
    same_torch: bool = Field(
        default=True,
        alias="same-torch",
        description="true: every target gets the same torch release (the newest all of them "
        "can run); false: each target its own newest. A target's own torch key always wins.",
    )


class TargetPip(_Model):
    dependencies: list[RequirementSpec] = Field(
        default_factory=list, description="Requirements locked and installed for this target only."
    )


class Target(_Model):
    gpu: GpuSpec | None = Field(
        default=None,
        description='A GPU name ("H100", "RTX 4060 Ti"), "none" for a CPU build, "mps" for '
        'a Mac\'s Apple GPU, or "detect".',
    )
    compute_capability: CCSpec | None = Field(
        default=None, alias="compute-capability", description='e.g. "9.0"; instead of or with gpu.'
    )
    driver: DriverSpec | None = Field(
        default=None, description='The NVIDIA driver on that machine ("550.54.15"), or "detect".'
    )
    platform: Literal["linux-64", "linux-aarch64", "osx-arm64", "win-64"] | None = Field(
        default=None,
        description='"linux-64", "linux-aarch64", "osx-arm64" (Apple silicon: gpu "none" or '
        '"mps") or "win-64". Omitted: the GPU\'s own platform (aarch64 for GH200, GB200, GB10 '
        'and Jetson; osx-arm64 for gpu = "mps"), else linux-64.',
    )
    torch: VersionSpec | None = Field(
        default=None,
        description="torch for this target only (a version or specifier), instead of "
        "[stack] torch; the target then leaves the project's shared torch.",
    )
    glibc: Annotated[str, AfterValidator(v.glibc)] = Field(
        default="2.28", description="glibc of the target machines (conda's __glibc)."
    )
    build: Literal["pypi"] | None = Field(
        default=None,
        description='"pypi" (CPU targets): PyPI\'s default torch build, a CUDA build that also '
        "runs on a CPU, locked from the default index alone, instead of the CPU build from the "
        "PyTorch index: for networks that reach PyPI only. It brings the CUDA libraries "
        "(several GB more to download and store).",
    )
    pip: TargetPip | None = Field(
        default=None, description="pip packages for this target only, besides [pip]'s."
    )


EnvName = Annotated[str, AfterValidator(v.env_name)]
EnvValue = Annotated[str, AfterValidator(v.env_value)]
ArchEntry = Annotated[str, AfterValidator(v.arch_entry)]


class Build(_Model):
    """How one package is built from source. Every key is optional: gpuenv's knowledge
    base has defaults for the well-known extension packages (flash-attn, xformers, apex,
    ...), and a package with no wheel for the target is built with build isolation."""

    no_build_isolation: StrictBool | None = Field(
        default=None,
        alias="no-build-isolation",
        description="Build in the prefix, against its torch, instead of an isolated "
        "environment (needed by packages whose setup.py imports torch).",
    )
    against_torch: StrictBool | None = Field(
        default=None,
        alias="against-torch",
        description="The build compiles against torch: torch's wheel is a build input. "
        "Default: the knowledge base's, else the same as no-build-isolation.",
    )
    toolkit: StrictBool | None = Field(
        default=None,
        description="The build needs nvcc: a CUDA toolkit matched to torch's CUDA is added.",
    )
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict,
        description="Environment variables for the build, passed as they are (never "
        "through a shell). gpuenv's own (TORCH_CUDA_ARCH_LIST, CUDA_HOME, MAX_JOBS, CC, "
        "CXX) cannot be set here.",
    )
    max_jobs: StrictInt | None = Field(
        default=None,
        ge=1,
        le=1024,
        alias="max-jobs",
        description="At most this many parallel compile jobs (default: cores, or fewer "
        "where free memory is short).",
    )
    extra_archs: list[ArchEntry] = Field(
        default_factory=list,
        alias="extra-archs",
        description='Arch entries compiled besides the target\'s GPUs, e.g. ["8.0", "9.0+PTX"].',
    )
    build_requires: list[RequirementSpec] | None = Field(
        default=None,
        alias="build-requires",
        description="What a build in the prefix needs installed first (locked like any "
        "other pip package).",
    )
    requires_dist: list[RequirementSpec] | None = Field(
        default=None,
        alias="requires-dist",
        description="The package's own dependencies, for packages whose metadata cannot be "
        "read without importing torch.",
    )
    host_compiler: Annotated[str, Field(pattern=r"^gcc-[0-9]{1,2}$")] | None = Field(
        default=None,
        alias="host-compiler",
        description='The host compiler, "gcc-12" (default: one this machine has that nvcc '
        "accepts, recorded in the lock).",
    )


class Pip(_Model):
    dependencies: list[RequirementSpec] = Field(default_factory=list)
    index_url: UrlSpec | None = Field(default=None, alias="index-url")
    extra_index_urls: list[UrlSpec] = Field(default_factory=list, alias="extra-index-urls")
    torch_index: UrlSpec | None = Field(
        default=None,
        alias="torch-index",
        description="Base of the per-build torch indexes (<base>/cu124/); PyTorch's by default.",
    )
    exclude_newer: ExcludeNewer | None = Field(
        default=None,
        alias="exclude-newer",
        description='Resolve pip packages as of this day ("2021-03-02", UTC) or instant '
        '("2021-03-02T12:00:00Z"): releases uploaded later are ignored, except the torch '
        "family's, which the plan chooses, and exact pins. gpuenv import writes the day its "
        "files date from.",
    )
    exclude_newer_package: Annotated[
        dict[Name, ExcludeNewer], AfterValidator(v.days_by_package)
    ] = Field(
        default_factory=dict,
        alias="exclude-newer-package",
        description='A day of its own for some packages, by name: { sympy = "2023-12-14" } '
        "(what a torch newer than the files requires: gpuenv import writes them).",
    )
    build: Annotated[dict[Name, Build], AfterValidator(v.distinct_names)] = Field(
        default_factory=dict,
        description="Packages built from source, by name: "
        '[pip.build.flash-attn] max-jobs = 4, env = { FOO = "1" }.',
    )
    groups: Annotated[dict[Name, list[RequirementSpec]], AfterValidator(v.distinct_names)] = Field(
        default_factory=dict,
        description='Dependency groups, by name: dev = ["pytest"]. Locked for every target; '
        "installed with install --group NAME or --all-groups (dev by default).",
    )


ChannelSpec = Annotated[str, AfterValidator(v.channel)]


class Conda(_Model):
    channels: list[ChannelSpec] = Field(default_factory=lambda: ["conda-forge"])
    dependencies: dict[str, str] | list[str] = Field(default_factory=dict)
    python: bool = Field(
        default=True,
        description="true: conda supplies the Python (stack.python); false: conda packages "
        "(a toolkit, say) beside a virtual environment made from a Python on the machine.",
    )

    def dependency_names(self) -> list[str]:
        if isinstance(self.dependencies, dict):
            return list(self.dependencies)
        return [re.split(r"[\s=<>!~\[]", d.strip(), maxsplit=1)[0] for d in self.dependencies]


class Verify(_Model):
    extra: list[str] = Field(
        default_factory=list,
        description="Python statements the probe also runs, e.g. 'import flash_attn'.",
    )
    timeout: int = Field(default=300, ge=10, le=3600, description="Probe time limit, seconds.")


# The validation model; the rest of gpuenv sees the frozen ``gpuenv.spec.Spec``.
class SpecModel(_Model):
    """A gpuenv.toml file."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        title="gpuenv.toml",
    )

    project: Project
    stack: Stack
    targets: dict[TargetName, Target] = Field(min_length=1)
    pip: Pip = Field(default_factory=Pip)
    conda: Conda | None = None
    verify: Verify = Field(default_factory=Verify)


# --- loading ------------------------------------------------------------------------------


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated/list/dict annotations."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg)]
    return [annotation]


def _as_model(annotation: Any) -> type[BaseModel] | None:
    models = [c for c in _unwrap(annotation) if isinstance(c, type) and issubclass(c, BaseModel)]
    return models[0] if models else None


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model whose keys are allowed at ``loc`` (for "did you mean" hints)."""
    current: Any = SpecModel
    for part in loc:
        model = _as_model(current)
        if model is not None:
            field = _field(model, part)
            if field is None:
                return None
            current = field.annotation
            continue
        # Inside dict[str, X] or list[X]: the part is a key or an index.
        container = next(
            (c for c in _unwrap(current) if typing.get_origin(c) in (dict, list)), None
        )
        if container is None:
            return None
        current = typing.get_args(container)[-1]
    return _as_model(current)


def _field(model: type[BaseModel], key: str | int) -> Any:
    return next((f for n, f in model.model_fields.items() if (f.alias or n) == key), None)


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _type_name(value: Any) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)


_TYPE_ERRORS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
}


# Each explainer turns one kind of pydantic error into (message, hint, priority).
# Priority settles unions: when a value fails every member, the specific message
# (priority 1) beats "expected a string" (priority 0).
Explained = tuple[str, str | None, int]


def _unknown_key(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    import difflib  # only for a key that is wrong

    parent = _model_at(loc[:-1])
    if parent is None:
        return "unknown key", None, 1
    keys = _keys_of(parent)
    close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(keys)}"
    return "unknown key", hint, 1


def _missing_key(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    parent = _model_at(loc[:-1])
    field = _field(parent, loc[-1]) if parent is not None else None
    if field is not None and field.description:
        return "required key is missing", field.description, 1
    model = _model_at(loc)
    if model is None:
        return "required key is missing", None, 1
    required = [f.alias or n for n, f in model.model_fields.items() if f.is_required()]
    return "required key is missing", f"a table with at least: {', '.join(required)}", 1


def _bad_value(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    # The whole message, its line breaks shown: they come from the value it quotes
    # (torch = "a\nb" was reported as `stack.torch: "a`, the rest cut off).
    text = str(error["ctx"]["error"])
    return text.replace("\r", "\\r").replace("\n", "\\n"), None, 1


def _wrong_type(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    value = error.get("input")
    expected = _TYPE_ERRORS[error["type"]]
    # A TOML date or time written bare (exclude-newer = 2021-03-02) is a date, not text.
    hint = f'write it in quotes: "{value.isoformat()}"' if isinstance(value, date) else None
    return f"expected {expected}, got {_type_name(value)} {_show(value)}", hint, 0


def _out_of_range(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    ctx = error["ctx"]
    which, bound = ("at least", ctx["ge"]) if "ge" in ctx else ("at most", ctx["le"])
    return f"{_show(error.get('input'))} is out of range: must be {which} {bound}", None, 1


def _not_one_of(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    value = error.get("input")
    if error["ctx"]["expected"] == "False":
        return f'expected a version specifier ("*", "0.19.*") or false, got {_show(value)}', None, 1
    return f"{_show(value)} is not one of {error['ctx']['expected']}", None, 1


def _pattern(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    value = error.get("input")
    if error["ctx"]["pattern"] == NAME_PATTERN:
        hint = "use letters, digits, '.', '_' and '-', starting with a letter or digit"
        return f"{_show(value)} is not a valid name", hint, 1
    if error["ctx"]["pattern"] == TARGET_NAME_PATTERN:
        hint = f"use {TARGET_NAME_RULE} characters; no '.', as '<target>.previous' is rollback's"
        return f"{_show(value)} is not a valid target name", hint, 1
    return f"{_show(value)} is not allowed here (must match {error['ctx']['pattern']})", None, 1


def _too_short(loc: tuple[str | int, ...], error: Mapping[str, Any]) -> Explained:
    if isinstance(error.get("input"), dict):
        hint = 'e.g. [targets.h100] with gpu = "H100" and driver = "550.54.15"'
        return "at least one entry is required", hint, 1
    return str(error["msg"]), None, 1


_EXPLAINERS = {
    "extra_forbidden": _unknown_key,
    "missing": _missing_key,
    "value_error": _bad_value,
    "greater_than_equal": _out_of_range,
    "less_than_equal": _out_of_range,
    "literal_error": _not_one_of,
    "string_pattern_mismatch": _pattern,
    "too_short": _too_short,
    **dict.fromkeys(_TYPE_ERRORS, _wrong_type),
}


def _problem_from_error(
    error: Mapping[str, Any], file: str, lines: dict[KeyPath, int]
) -> tuple[int, SpecProblem]:
    """One pydantic error as a located problem, with its priority."""
    loc: tuple[str | int, ...] = tuple(p for p in error["loc"] if not _is_union_tag(p))
    explain = _EXPLAINERS.get(error["type"])
    message, hint, priority = explain(loc, error) if explain else (str(error["msg"]), None, 1)
    return priority, SpecProblem(file, line_of(lines, loc), render_path(loc), message, hint)


def _is_union_tag(part: str | int) -> bool:
    # pydantic adds the member type to locations inside unions ("str", "literal[False]",
    # "function-after[...]"): they are not keys of the file.
    return isinstance(part, str) and (
        part in ("str", "list[str]", "dict[str,str]", "literal[False]", "[key]")
        or part.startswith("function-after[")
    )


def _dedupe(problems: list[tuple[int, SpecProblem]]) -> list[SpecProblem]:
    """Union members each report an error for one bad value; keep the most specific."""
    best: dict[str, tuple[int, SpecProblem]] = {}
    for priority, problem in problems:
        if problem.path not in best or priority > best[problem.path][0]:
            best[problem.path] = (priority, problem)
    return [problem for _, problem in best.values()]


def validate(raw: dict[str, Any], *, file: str, lines: dict[KeyPath, int]) -> dict[str, Any]:
    """Validate parsed TOML; return it normalised (defaults filled, keys by alias)."""
    try:
        model = SpecModel.model_validate(raw)
    except ValidationError as exc:
        problems = _dedupe([_problem_from_error(e, file, lines) for e in exc.errors()])
        raise SpecError(sorted(problems, key=lambda p: (p.line or 0, p.path))) from None
    _check_target_names(model.targets, file, lines)
    normalised: dict[str, Any] = model.model_dump(mode="json", by_alias=True)
    return v.without_unset(normalised)


def _check_target_names(names: Iterable[str], file: str, lines: dict[KeyPath, int]) -> None:
    """Two targets whose names differ only in case would share pointers and prefixes
    on a case-insensitive file system (a store on macOS, a share mounted from one)."""
    seen: dict[str, str] = {}
    problems = []
    for name in names:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            problems.append(
                SpecProblem(
                    file,
                    line_of(lines, ("targets", name)),
                    f"targets.{name}",
                    f"target {name!r} differs from target {other!r} only in case",
                    "rename one: their pointers and prefixes would collide",
                )
            )
    if problems:
        raise SpecError(problems)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of gpuenv.toml (written to schemas/gpuenv.schema.json)."""
    schema = SpecModel.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
