"""``gpuenv.toml``: the spec as frozen values, and loading with located errors.

Loading a spec: parse the TOML (the standard library's ``tomllib``; ``tomli`` on
3.10 — several times faster than tomlkit, which gpuenv uses where it *writes* TOML
and comments matter), validate it with the pydantic models in ``_models`` (types,
unknown keys, formats), then check it against the knowledge base (known GPUs and
CUDA releases, contradictions between keys). Every problem of a pass is reported at
once, each with file, line and dotted key.

Validation is the slow part (building the pydantic models costs ~150 ms), so a
spec that validated once is remembered in gpuenv's cache, keyed by the file's exact
bytes, gpuenv's version and the knowledge base's data: the next ``plan`` of the same
file reads the normalised result and never imports pydantic. The rest of gpuenv
sees only the frozen dataclasses below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv import _sha256, _toml, names
from gpuenv._tomlpos import Path as KeyPath
from gpuenv._tomlpos import key_lines, line_of
from gpuenv.errors import SpecError, SpecProblem, UsageError
from gpuenv.names import normalize_name

__all__ = [
    "BuildOptions",
    "Conda",
    "LoadedSpec",
    "LocalProject",
    "Pip",
    "Project",
    "Spec",
    "Stack",
    "Target",
    "Verify",
    "check_target",
    "load_spec",
    "parse_spec_text",
    "parse_version_spec",
    "read_spec_text",
]

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

TORCH_FAMILY = frozenset(names.TORCH_FAMILY)
CONDA_TORCH_NAMES = frozenset({"pytorch", "torch", "torchvision", "torchaudio", "pytorch-cuda"})


def parse_version_spec(text: str) -> SpecifierSet:
    """``"*"`` -> any; ``"2.4.1"`` -> ``==2.4.1``; ``"2.4.*"`` -> ``==2.4.*``;
    anything else must be a PEP 440 specifier set (``">=2.4,<2.6"``)."""
    # packaging's specifiers load when a spec is validated or planned: `install` of a
    # spec read from its cache and a fresh lock never parses one (about 2.5 ms)
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    cleaned = text.strip()
    if cleaned in ("*", ""):
        return SpecifierSet()
    if cleaned[0].isdigit():
        cleaned = f"=={cleaned}"
    try:
        return SpecifierSet(cleaned)
    except InvalidSpecifier:
        raise ValueError(f'"{text}" is not a version or PEP 440 specifier (like "2.4.*")') from None


def check_target(name: str | None, known: Iterable[str]) -> None:
    """A target name given on the command line is one of ``known`` (else a usage error
    listing them)."""
    known = list(known)
    if name is not None and name not in known:
        raise UsageError(
            f"no target named {name!r}",
            hint=f"targets in this spec: {', '.join(known)}",
        )


# --- the spec as values ------------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    """``[project]``: the project's name and description, and where its own Python
    project is (``path``)."""

    name: str
    description: str | None = None
    path: str | bool | None = None  # None: "." when a Python project sits beside; False: none


@dataclass(frozen=True)
class LocalProject:
    """The Python project installed editable into every target (``[project] path``), as
    read from its own files when the spec was loaded (``gpuenv.editable.source``)."""

    root: Path  # absolute
    name: str  # PEP 503-normalised ("" when its metadata must be built to know it)
    # Its dependencies, as the lock resolves them; None: computed by its setup.py (the lock
    # refuses it, naming the fix).
    requirements: tuple[str, ...] | None = ()
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # PEP 735
    build_requires: tuple[str, ...] = ()  # [build-system] requires
    uses_torch: bool = False  # its build imports torch.utils.cpp_extension
    cuda: bool = False  # it compiles CUDA (.cu sources, CUDAExtension)
    compiled: bool = False  # it has native sources (C, C++, CUDA, Cython)
    package: bool = True  # False: no build system (its dependencies only, like uv's virtual)
    backend_path: tuple[str, ...] = ()  # [build-system] backend-path: an in-tree backend
    # The requirements files its setup.py reads (absolute): inputs of the lock too
    requirement_files: tuple[Path, ...] = ()
    # [project] optional-dependencies, by normalised extra name (static ones only)
    extras: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Stack:
    """``[stack]``: the Python, torch, torchvision and torchaudio, the CUDA, how drivers are
    judged, the toolkit, and whether the targets share one torch."""

    python: str
    torch: str = "*"
    torchvision: str | bool | None = None
    torchaudio: str | bool | None = None
    cuda: str = "auto"
    driver_compat: str = "strict"
    toolkit: str | None = None
    same_torch: bool = True


@dataclass(frozen=True)
class Target:
    """``[targets.<name>]``: the machine one target is for (a GPU or compute capability, the
    driver, the platform and glibc) and what it asks for itself."""

    gpu: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    platform: str | None = None  # None: the GPU's own platform, else linux-64
    glibc: str = "2.28"
    torch: str | None = None  # this target's own torch specifier, instead of [stack] torch
    build: str | None = None  # "pypi": a CPU target takes PyPI's default (CUDA) build
    dependencies: tuple[str, ...] = ()  # [targets.<name>.pip] dependencies: this target only

    @property
    def is_cpu(self) -> bool:
        """No NVIDIA GPU: a CPU build (``gpu = "none"``, or a Mac's MPS, whose wheel is
        the CPU one)."""
        return (self.gpu or "").strip().lower() in ("none", "mps")

    @property
    def is_mps(self) -> bool:
        return (self.gpu or "").strip().lower() == "mps"

    @property
    def uses_detect(self) -> bool:
        return (self.gpu or "").strip().lower() == "detect" or self.driver == "detect"


@dataclass(frozen=True)
class BuildOptions:
    """``[pip.build.<name>]``: how one package is built from source (None: the
    knowledge base's default, see ``gpuenv.builds.knowledge``)."""

    no_build_isolation: bool | None = None
    against_torch: bool | None = None
    toolkit: bool | None = None
    env: tuple[tuple[str, str], ...] = ()  # sorted by name
    max_jobs: int | None = None
    extra_archs: tuple[str, ...] = ()
    build_requires: tuple[str, ...] | None = None
    requires_dist: tuple[str, ...] | None = None
    host_compiler: str | None = None

    @classmethod
    def from_normalised(cls, data: Mapping[str, Any]) -> BuildOptions:
        def optional(key: str) -> tuple[str, ...] | None:
            value = data.get(key)
            return tuple(value) if value is not None else None

        return cls(
            no_build_isolation=data.get("no-build-isolation"),
            against_torch=data.get("against-torch"),
            toolkit=data.get("toolkit"),
            env=tuple(sorted(dict(data.get("env") or {}).items())),
            max_jobs=data.get("max-jobs"),
            extra_archs=tuple(data.get("extra-archs") or ()),
            build_requires=optional("build-requires"),
            requires_dist=optional("requires-dist"),
            host_compiler=data.get("host-compiler"),
        )


@dataclass(frozen=True)
class Pip:
    """``[pip]``: dependencies, indexes, the source builds' options and the dependency groups."""

    dependencies: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    torch_index: str | None = None
    # Resolve as of this day or instant (uv's --exclude-newer); the torch family is exempt.
    exclude_newer: str | None = None
    # A day of its own for some packages (normalised name -> day): uv's --exclude-newer-package.
    exclude_newer_packages: Mapping[str, str] = field(default_factory=dict)
    build: Mapping[str, BuildOptions] = field(default_factory=dict)  # by normalised name
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # [pip.groups]


@dataclass(frozen=True)
class Conda:
    """``[conda]``: the channels and dependencies, and whether conda supplies the Python."""

    channels: tuple[str, ...] = ("conda-forge",)
    dependencies: Mapping[str, str] | tuple[str, ...] = field(default_factory=dict)
    python: bool = True  # conda supplies the Python

    def dependency_names(self) -> list[str]:
        if isinstance(self.dependencies, Mapping):
            return list(self.dependencies)
        return [re.split(r"[\s=<>!~\[]", d.strip(), maxsplit=1)[0] for d in self.dependencies]


@dataclass(frozen=True)
class Verify:
    """``[verify]``: the Python statements the probe also runs, and its time limit (seconds)."""

    extra: tuple[str, ...] = ()
    timeout: int = 300


@dataclass(frozen=True)
class Spec:
    """A whole ``gpuenv.toml``, validated: one value per table."""

    project: Project
    stack: Stack
    targets: Mapping[str, Target]
    pip: Pip = field(default_factory=Pip)
    conda: Conda | None = None
    verify: Verify = field(default_factory=Verify)
    local: LocalProject | None = None  # read from disk by load_spec, never cached

    @property
    def uses_detect(self) -> bool:
        return any(t.uses_detect for t in self.targets.values())

    @classmethod
    def from_normalised(cls, data: Mapping[str, Any]) -> Spec:
        """Build from the validated, alias-keyed form ``_models.validate`` returns."""
        stack = data["stack"]
        pip = data["pip"]
        conda = data.get("conda")
        deps = conda["dependencies"] if conda else None
        return cls(
            project=Project(
                data["project"]["name"],
                data["project"].get("description"),
                data["project"].get("path"),
            ),
            stack=Stack(
                python=stack["python"],
                torch=stack["torch"],
                torchvision=stack["torchvision"],
                torchaudio=stack["torchaudio"],
                cuda=stack["cuda"],
                driver_compat=stack["driver-compat"],
                toolkit=stack["toolkit"],
                same_torch=stack.get("same-torch", True),
            ),
            targets={
                name: Target(
                    gpu=t["gpu"],
                    compute_capability=t["compute-capability"],
                    driver=t["driver"],
                    platform=t.get("platform"),
                    glibc=t["glibc"],
                    torch=t.get("torch"),
                    build=t.get("build"),
                    dependencies=tuple((t.get("pip") or {}).get("dependencies") or ()),
                )
                for name, t in data["targets"].items()
            },
            pip=Pip(
                dependencies=tuple(pip["dependencies"]),
                index_url=pip["index-url"],
                extra_index_urls=tuple(pip["extra-index-urls"]),
                torch_index=pip["torch-index"],
                exclude_newer=pip.get("exclude-newer"),
                exclude_newer_packages={
                    normalize_name(name): day
                    for name, day in sorted((pip.get("exclude-newer-package") or {}).items())
                },
                build={
                    normalize_name(name): BuildOptions.from_normalised(options)
                    for name, options in sorted((pip.get("build") or {}).items())
                },
                groups={
                    normalize_name(name): tuple(reqs)
                    for name, reqs in sorted((pip.get("groups") or {}).items())
                },
            ),
            conda=(
                Conda(
                    channels=tuple(conda["channels"]),
                    dependencies=dict(deps) if isinstance(deps, dict) else tuple(deps or ()),
                    python=conda["python"],
                )
                if conda
                else None
            ),
            verify=Verify(tuple(data["verify"]["extra"]), data["verify"]["timeout"]),
        )


@dataclass(frozen=True)
class LoadedSpec:
    """A spec loaded from ``path``: the spec, the hash of its meaning and the line of
    each key (for messages)."""

    path: Path
    spec: Spec
    content_hash: str
    lines: Mapping[KeyPath, int]

    def line(self, *path: str | int) -> int | None:
        return line_of(dict(self.lines), tuple(path))


# --- loading --------------------------------------------------------------------------------


def content_hash(normalised: Mapping[str, Any]) -> str:
    """sha256 of the validated spec in canonical form: comments, formatting and key
    order do not change it; any change of meaning does."""
    canonical = json.dumps(normalised, sort_keys=True, separators=(",", ":"))
    return "sha256:" + _sha256.hexdigest(canonical.encode())


# Arrays and inline tables nested deeper than this are refused before parsing: the
# parsers and validators recurse once per level, and a spec needs a handful.
MAX_NESTING = 100


def _too_deep(text: str) -> int | None:
    """The line where ``[``/``{`` nesting inside a value first passes ``MAX_NESTING``
    (a rough count that ignores strings: a spec anywhere near it is not a real one)."""
    depth, line = 0, 1
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return line
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch == "\n":
            line += 1
    return None


def _document(text: str, file: str) -> dict[str, Any]:
    deep = _too_deep(text)
    if deep is not None:
        message = f"values are nested more than {MAX_NESTING} levels deep"
        raise SpecError([SpecProblem(file, deep, "", message)])
    try:
        data = _toml.loads(text)
    except RecursionError:
        raise SpecError([SpecProblem(file, None, "", "nested too deeply to be a spec")]) from None
    except _toml.TomlError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        message = message.replace(" (at end of document)", "")
        line = int(match.group(1)) if match else None
        column = f" (column {match.group(2)})" if match else ""
        if match is None and "end of document" in str(exc):
            line, column = max(1, text.count("\n") + (not text.endswith("\n"))), " (at the end)"
        raise SpecError(
            [SpecProblem(file, line, "", f"not valid TOML: {message}{column}")]
        ) from None
    return data


def parse_spec_text(
    text: str, *, file: str, kb: Any | None = None, cache_dir: Path | None = None
) -> LoadedSpec:
    """Parse and validate spec text; raise ``SpecError`` listing every problem.

    ``kb`` (a ``KnowledgeBase``, or a function returning one, called only when the
    checks run) adds the checks against known GPUs and CUDA releases.
    ``cache_dir`` consults and fills the validated-spec cache there (see the module doc).
    """
    from gpuenv.spec import _cache

    key = _cache.key(text, with_knowledge=kb is not None) if cache_dir else None
    cached = _cache.read(cache_dir, key) if cache_dir and key else None
    if cached is not None:
        normalised, lines = cached
        return LoadedSpec(
            Path(file), Spec.from_normalised(normalised), content_hash(normalised), lines
        )
    raw = _document(text, file)
    lines = key_lines(text)
    from gpuenv.spec import _fast

    # A valid spec is read without pydantic (60-150 ms of imports: ``_fast``); anything
    # that reading is not sure of is validated, and explained, by the models.
    read = _fast.normalise(raw)
    if read is None:
        from gpuenv.spec import _models

        read = _models.validate(raw, file=file, lines=lines)
    normalised = read
    spec = Spec.from_normalised(normalised)
    if kb is not None:
        from gpuenv.spec._checks import check_against_knowledge

        knowledge = kb() if callable(kb) else kb
        problems = check_against_knowledge(spec, knowledge, file, lines)
        if problems:
            raise SpecError(problems)
    if cache_dir and key:
        _cache.write(cache_dir, key, normalised, lines)
    return LoadedSpec(Path(file), spec, content_hash(normalised), lines)


def read_spec_text(file: Path, *, hint: str) -> str:
    """``gpuenv.toml``'s text: a regular file of a sane size only (a FIFO would hang,
    ``/dev/zero`` never end); a missing one is a ``UsageError`` with ``hint``."""
    from gpuenv import _fs

    try:
        return _fs.read_text(file, limit=_fs.SPEC_LIMIT, what="gpuenv.toml")
    except FileNotFoundError:
        raise UsageError(f"{file}: no such file", hint=hint) from None


def load_spec(
    path: str | Path,
    *,
    kb: Any | None = None,
    cache_dir: Path | None = None,
    text: str | None = None,
) -> LoadedSpec:
    """Read ``path`` (the CLI's ``-f``) and validate it, against ``kb`` when given.
    ``text``: the spec's text as it is about to be written at ``path``, not read (``add``
    locks its edit before writing it)."""
    from gpuenv.errors import InputFileError

    file = Path(path)
    if text is not None:
        return _attached(parse_spec_text(text, file=str(file), kb=kb, cache_dir=cache_dir))
    try:
        text = read_spec_text(file, hint="create one with 'gpuenv init', or pass -f PATH")
    except IsADirectoryError:
        raise UsageError(f"{file}: is a directory, not a gpuenv.toml") from None
    except InputFileError as exc:  # UTF-16, invalid UTF-8 (with the byte offset), a FIFO
        message = exc.message.removeprefix(f"{file}: ")
        raise SpecError([SpecProblem(str(file), None, "", message, exc.hint)]) from None
    except OSError as exc:
        raise UsageError(f"{file}: cannot read: {exc.strerror}") from None
    return _attached(parse_spec_text(text, file=str(file), kb=kb, cache_dir=cache_dir))


def _attached(loaded: LoadedSpec) -> LoadedSpec:
    from gpuenv.spec._local import attach

    return attach(loaded)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of gpuenv.toml (written to schemas/gpuenv.schema.json)."""
    from gpuenv.spec._models import json_schema as build

    return build()
