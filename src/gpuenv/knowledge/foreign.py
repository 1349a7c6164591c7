"""Facts about what other tools and images put into an environment, as frozen values:
container images (``images.toml``), conda's CUDA packages and names (``conda_cuda.toml``,
``conda_names.toml``) and the companion packages tied to torch (``companions.toml``).

Only ``gpuenv import`` loads them (``foreign_knowledge()``, once per process): the
files are validated against ``_foreign_schema`` on every load, and any problem is a
``FileFormatError`` naming the file and the entry. The builds work (#13) reads
``Companion.build`` and ``Companion.compiled_against_torch``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpuenv.versions import ComputeCapability

FOREIGN_FILES = (
    "images.toml",
    "conda_cuda.toml",
    "conda_names.toml",
    "companions.toml",
    "old_sdists.toml",
    "torch_dates.toml",
)


@dataclass(frozen=True)
class Sourced:
    """Where a foreign fact comes from, and whether the data marks it unverified."""

    source: str
    unverified: bool


@dataclass(frozen=True)
class NgcRelease:
    """One ``nvcr.io/nvidia/pytorch:<release>-py3`` container."""

    release: str
    torch: str  # NVIDIA's build of an upstream commit: "1.13.0a0+d0d6b1f"
    upstream: Version  # the published release that commit preceded
    cuda: str  # "11.8.0"
    cudnn: str | None
    python: str
    os: str
    fact: Sourced


@dataclass(frozen=True)
class CondaCudaPackage:
    """One conda CUDA package and what it says of the paper's torch build (``means``: its
    CUDA, a CPU build, a toolkit, or runtime libraries torch's wheels carry)."""

    name: str
    means: str  # "build", "cpu", "toolkit" or "runtime"
    note: str
    fact: Sourced


@dataclass(frozen=True)
class CompanionRelease:
    """The releases of a companion from ``version`` up to the next entry."""

    version: Version
    latest: Version | None
    torch: SpecifierSet
    nvcc: SpecifierSet | None
    gpu_min: ComputeCapability | None
    gpu_max: ComputeCapability | None
    fact: Sourced
    plain: bool = False  # these releases are not tied to torch: an ordinary requirement
    cpu: str | None = None  # "works", "degraded", "none": the companion's, for these
    cuda: SpecifierSet | None = None  # the CUDA releases its wheels carry binaries for
    wheels: tuple[str, ...] = ()  # find-links pages with their prebuilt wheel: "cu113/torch1.10"

    @property
    def landing(self) -> Version:
        """The version a move to this entry installs: its newest known release."""
        return self.latest or self.version


@dataclass(frozen=True)
class CompanionArch:
    """From ``since`` on, a companion's prebuilt wheels carry code for compute capability
    ``cc``; older wheels need a source build on those GPUs."""

    cc: ComputeCapability
    since: Version
    fact: Sourced
    # What the older wheels lack for ``cc``, where it is not all their code: "LLM.int8()
    # (8-bit matmul, load_in_8bit)" (bitsandbytes before 0.45 on Hopper); None: binaries.
    what: str | None = None


@dataclass(frozen=True)
class Companion:
    """A package whose build is tied to torch and CUDA (see companions.toml)."""

    name: str
    moves: str
    build: str  # "always", "when-no-wheel", "jit", "never": when a source build is needed
    compiled_against_torch: bool
    cpu: str  # "works", "degraded", "none"
    note: str | None
    successor: str | None
    wheel_page: str | None
    releases: tuple[CompanionRelease, ...]  # ascending
    archs: tuple[CompanionArch, ...]
    fact: Sourced
    git: str | None = None  # its source when PyPI has none ("{version}": the release)
    instead: str | None = None  # what replaces it, where its documentation says so
    addons: tuple[str, ...] = ()  # an unmanaged framework's add-ons: left out with it

    def release_of(self, version: Version) -> CompanionRelease | None:
        """The entry describing ``version`` (the last one that starts at or below it)."""
        found = None
        for release in self.releases:
            if release.version <= version:
                found = release
        return found

    def releases_for(self, torch: Version) -> list[CompanionRelease]:
        return [r for r in self.releases if r.torch.contains(torch, prereleases=True)]

    def wheels_lack(self, version: Version, cc: ComputeCapability) -> CompanionArch | None:
        """The arch fact that ``version``'s prebuilt wheels predate, for this GPU."""
        for arch in self.archs:
            if arch.cc.major == cc.major and cc >= arch.cc and version < arch.since:
                return arch
        return None

    def cpu_of(self, version: Version | None) -> str:
        """How ``version`` runs without a GPU (the release's own word, else the
        companion's)."""
        release = self.release_of(version) if version is not None else None
        return release.cpu if release is not None and release.cpu else self.cpu

    def cpu_since(self) -> CompanionRelease | None:
        """The first release whose CPU support "works", when a later one brought it."""
        return next((r for r in self.releases if r.cpu == "works"), None)

    def page_for(self, torch: Version, build: str) -> str | None:
        if self.wheel_page is None:
            return None
        series = f"{torch.major}.{torch.minor}"
        return self.wheel_page.format(series=series, build=build)


@dataclass(frozen=True)
class PythonFloor:
    """The oldest release of ``package`` with wheels for Python ``python``: when a
    reproduction's Python moves, an older pin moves up to it."""

    package: str
    python: str
    version: Version
    fact: Sourced


@dataclass(frozen=True)
class TorchConstraint:
    """What the torch releases ``torch`` require of ``package`` without their wheels
    declaring it (or declared exactly, where a pin would not resolve beside it), and why."""

    torch: SpecifierSet
    package: str
    requires: SpecifierSet
    why: str
    fact: Sourced
    beside: str | None = None  # applies only when this package is in the environment
    # applies to the files' exact pins only: the wheels declare it, so the resolver
    # finds the release for a package the files leave open (sympy beside torch 2.6)
    pins_only: bool = False
    # applies only where a file asks for the package: a torch does not need it, and a
    # spec that never named it gets nothing added (transformers' torch floors)
    asked_only: bool = False


@dataclass(frozen=True)
class CompanionRequirement:
    """What releases of one family member accept of another (mmdet 2.20 accepts
    mmcv-full>=1.3.17,<=1.5.0), checked on the versions a reproduction writes."""

    package: str
    version: SpecifierSet
    requires: str
    specifier: SpecifierSet
    fact: Sourced


@dataclass(frozen=True)
class TorchChange:
    """An API change a reproduction crosses when it moves torch past ``since``."""

    since: Version
    what: str
    fact: Sourced
    breaks: bool = False  # code written before it fails, not only warns
    # What code affected by it contains ("torch._six", "THC/THC.h"), searched for in the
    # repository's sources: where the code was read and has none, the change is not said.
    marker: str | None = None
    # Said only where the code was read and contains ``marker``: a change of what few
    # repositories have (C++ extensions), never guessed from environment files alone.
    code_only: bool = False


@dataclass(frozen=True)
class DatedConstraint:
    """What files written before ``before`` need of ``package`` when the environment's
    day is later (a torch newer than the files): their packages with compiled code were
    built against NumPy 1, and NumPy 2 breaks them (alpaca-lora's pandas 2.0.0)."""

    package: str
    requires: SpecifierSet
    before: date
    why: str
    fact: Sourced
    python: SpecifierSet | None = None  # the Pythons it applies to (None: every one)


@dataclass(frozen=True)
class GpuOnly:
    """Packages (a glob of PyPI names) that do nothing without an NVIDIA GPU."""

    pattern: str
    what: str
    fact: Sourced


@dataclass(frozen=True)
class BuildTool:
    """A build tool release that still ships a module old setup.py files import."""

    provides: str  # "pkg_resources"
    requirement: str  # "setuptools<82"
    removed_in: str  # "setuptools 82.0.0"
    fact: Sourced


@dataclass(frozen=True)
class OldSdist:
    """Versions of a package whose sdist needs a module today's build tools lack."""

    name: str
    versions: SpecifierSet
    needs: tuple[str, ...]
    against_torch: bool
    toolkit: bool
    build_requires: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    gpu_env: tuple[tuple[str, str], ...]
    requires_dist: tuple[str, ...]
    fact: Sourced


@dataclass(frozen=True)
class TorchDate:
    """When a torch release was published (``torch_dates.toml``)."""

    version: Version
    published: date
    fact: Sourced


@dataclass(frozen=True)
class ForeignKnowledge:
    """Everything ``gpuenv import`` knows of other tools and images, from the files of
    ``FOREIGN_FILES``: images and their Pythons, conda's CUDA packages and names, the
    companions, and the facts a moved torch or Python drags along."""

    pytorch_image_python: dict[str, tuple[str, Sourced]]  # torch series -> Python
    os_python: dict[str, tuple[str, Sourced]]  # "ubuntu20.04" -> Python
    ngc: dict[str, NgcRelease]
    conda_cuda: dict[str, CondaCudaPackage]
    build_patterns: tuple[re.Pattern[str], ...]
    renames: dict[str, str]  # conda name -> PyPI name
    conda_only: frozenset[str]
    runtime_patterns: tuple[str, ...]
    companions: dict[str, Companion]
    python_floors: tuple[PythonFloor, ...]
    torch_constraints: tuple[TorchConstraint, ...]
    torch_changes: tuple[TorchChange, ...]
    companion_requirements: tuple[CompanionRequirement, ...] = ()
    gpu_only: tuple[GpuOnly, ...] = ()
    dated_constraints: tuple[DatedConstraint, ...] = ()
    build_tools: dict[str, BuildTool] = field(default_factory=dict)  # by module provided
    old_sdists: tuple[OldSdist, ...] = ()
    torch_dates: tuple[TorchDate, ...] = ()  # ascending by version
    platform_only: tuple[tuple[str, str], ...] = ()  # (conda name or "prefix*", platform)
    repositories: dict[str, str] = field(default_factory=dict)  # "host/owner/repo" -> PyPI
    # a module's name asked as a requirement -> (the PyPI project that installs it, why)
    modules: dict[str, tuple[str, str]] = field(default_factory=dict)

    def repository_project(self, repository: str, subdirectory: str | None = None) -> str | None:
        """The PyPI project a repository (``host/owner/name``) builds, where its name is
        not the repository's (``github.com/pytorch/vision``: torchvision), or the one its
        folder ``subdirectory`` builds (the repository's own where the folder is not
        known). Owner and name are matched in any case, as the hosts match them
        (``NVlabs``, ``nvlabs``)."""
        if subdirectory:
            found = self.repositories.get(repository_key(repository, subdirectory))
            if found is not None:
                return found
        return self.repositories.get(repository.lower())

    # --- conda -------------------------------------------------------------------------

    def pypi_name(self, conda_name: str) -> str:
        return self.renames.get(conda_name, conda_name)

    def is_conda_runtime(self, name: str) -> bool:
        """One of conda's runtime libraries (a conda-only tool such as libsndfile is not,
        though its name matches "lib*")."""
        if name in self.conda_only or name in self.renames:
            return False
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.runtime_patterns)

    def only_on(self, name: str) -> str | None:
        """The one platform a conda package exists for ("win-64"), or None."""
        for pattern, platform in self.platform_only:
            if fnmatch.fnmatchcase(name, pattern):
                return platform
        return None

    def build_cuda(self, build: str) -> str | None:
        """The torch build a conda build string names: "cu113", "cpu", or None."""
        for pattern in self.build_patterns:
            match = pattern.search(build)
            if match is None:
                continue
            groups = match.groupdict()
            if "major" in groups:
                return f"cu{int(groups['major'])}{groups['minor']}"
            return "cpu"
        return None

    # --- packages -------------------------------------------------------------------------

    def companion(self, name: str) -> Companion | None:
        return self.companions.get(name)

    def python_floor(self, package: str, python: str) -> PythonFloor | None:
        return next(
            (f for f in self.python_floors if f.package == package and f.python == python), None
        )

    def constraints_for(self, torch: Version) -> list[TorchConstraint]:
        return [c for c in self.torch_constraints if c.torch.contains(torch, prereleases=True)]

    def gpu_only_for(self, name: str) -> GpuOnly | None:
        return next((g for g in self.gpu_only if fnmatch.fnmatchcase(name, g.pattern)), None)

    def old_sdist(self, name: str, version: Version) -> OldSdist | None:
        """The entry saying ``name`` ``version``'s sdist needs an old build tool."""
        return next(
            (
                s
                for s in self.old_sdists
                if s.name == name and s.versions.contains(version, prereleases=True)
            ),
            None,
        )

    # --- torch release dates -----------------------------------------------------------------

    def torch_published(self, version: Version) -> date | None:
        """The day torch ``version`` (its public part) was published; None when unknown."""
        public = Version(version.public)
        return next((d.published for d in self.torch_dates if d.version == public), None)

    def torch_current_on(self, day: date) -> TorchDate | None:
        """The newest torch release published on or before ``day`` (None before 1.0)."""
        out = [d for d in self.torch_dates if d.published <= day]
        return max(out, key=lambda d: d.version) if out else None

    def changes_between(self, old: Version, new: Version) -> list[TorchChange]:
        """API changes crossed moving torch from ``old`` up to ``new``."""
        return [c for c in self.torch_changes if old < c.since <= new]


# --- loading ------------------------------------------------------------------------------
#
# Converters take the validated files as plain dicts (``model_dump(mode="json")``), so the
# same code builds the values from a fresh validation and from the cache.

Raw = dict[str, Any]


def _sourced(raw: Raw) -> Sourced:
    return Sourced(raw["source"], bool(raw.get("unverified")))


def _cc(text: str | None) -> ComputeCapability | None:
    return ComputeCapability.parse(text) if text else None


def _release(raw: Raw) -> CompanionRelease:
    return CompanionRelease(
        version=Version(raw["version"]),
        latest=Version(raw["latest"]) if raw.get("latest") else None,
        torch=SpecifierSet(raw["torch"]),
        nvcc=SpecifierSet(raw["nvcc"]) if raw.get("nvcc") else None,
        gpu_min=_cc(raw.get("gpu_min")),
        gpu_max=_cc(raw.get("gpu_max")),
        fact=_sourced(raw),
        plain=bool(raw.get("plain")),
        cpu=raw.get("cpu"),
        cuda=SpecifierSet(raw["cuda"]) if raw.get("cuda") else None,
        wheels=tuple(raw.get("wheels", ())),
    )


def _companion(raw: Raw) -> Companion:
    archs = tuple(
        CompanionArch(
            ComputeCapability.parse(a["cc"]), Version(a["since"]), _sourced(a), a.get("what")
        )
        for a in raw.get("arch", [])
    )
    return Companion(
        name=raw["name"],
        moves=raw["moves"],
        build=raw["build"],
        compiled_against_torch=raw["compiled_against_torch"],
        cpu=raw["cpu"],
        note=raw.get("note"),
        successor=raw.get("successor"),
        wheel_page=raw.get("wheel_page"),
        releases=tuple(
            sorted((_release(r) for r in raw.get("release", [])), key=lambda r: r.version)
        ),
        archs=archs,
        fact=_sourced(raw),
        git=raw.get("git"),
        instead=raw.get("instead"),
        addons=tuple(raw.get("addons", ())),
    )


def _ngc(raw: Raw) -> NgcRelease:
    return NgcRelease(
        release=raw["release"],
        torch=raw["torch"],
        upstream=Version(raw["upstream"]),
        cuda=raw["cuda"],
        cudnn=raw.get("cudnn"),
        python=raw["python"],
        os=raw["os"],
        fact=_sourced(raw),
    )


def _images(raw: Raw) -> dict[str, Any]:
    return {
        "pytorch_image_python": {
            i["series"]: (i["python"], _sourced(i)) for i in raw["pytorch_image"]
        },
        "os_python": {o["os"]: (o["python"], _sourced(o)) for o in raw["os_python"]},
        "ngc": {n["release"]: _ngc(n) for n in raw["ngc_pytorch"]},
    }


def _conda(cuda: Raw, names: Raw) -> dict[str, Any]:
    return {
        "conda_cuda": {
            p["name"]: CondaCudaPackage(p["name"], p["means"], p["note"], _sourced(p))
            for p in cuda["package"]
        },
        "build_patterns": tuple(re.compile(b["pattern"]) for b in cuda["build_string"]),
        "renames": {r["conda"]: r["pypi"] for r in names["rename"]},
        "conda_only": frozenset(c["name"] for c in names["conda_only"]),
        "runtime_patterns": tuple(r["name"] for r in names["runtime"]),
        "platform_only": tuple((p["name"], p["platform"]) for p in names["platform_only"]),
        "repositories": {
            repository_key(r["repository"], r.get("subdirectory")): r["pypi"]
            for r in names.get("repository", ())
        },
        "modules": {m["module"]: (m["pypi"], m["why"]) for m in names.get("module", ())},
    }


def repository_key(repository: str, subdirectory: str | None = None) -> str:
    """The key of ``repository`` (``host/owner/name``, any case) or of its folder."""
    key = repository.lower()
    return f"{key}#{subdirectory.strip('/')}" if subdirectory else key


def _packages(raw: Raw) -> dict[str, Any]:
    changes = (
        TorchChange(
            Version(c["since"]),
            c["what"],
            _sourced(c),
            bool(c.get("breaks")),
            c.get("marker"),
            bool(c.get("code_only")),
        )
        for c in raw["torch_change"]
    )
    return {
        "companions": {c["name"]: _companion(c) for c in raw["companion"]},
        "python_floors": tuple(
            PythonFloor(f["package"], f["python"], Version(f["version"]), _sourced(f))
            for f in raw["python_floor"]
        ),
        "torch_constraints": tuple(
            TorchConstraint(
                SpecifierSet(c["torch"]),
                c["package"],
                SpecifierSet(c["requires"]),
                c["why"],
                _sourced(c),
                c.get("beside"),
                bool(c.get("pins_only", False)),
                bool(c.get("asked_only", False)),
            )
            for c in raw["torch_constraint"]
        ),
        "torch_changes": tuple(sorted(changes, key=lambda c: c.since)),
        "companion_requirements": tuple(
            CompanionRequirement(
                r["package"],
                SpecifierSet(r["version"]),
                r["requires"],
                SpecifierSet(r["specifier"]),
                _sourced(r),
            )
            for r in raw.get("companion_requirement", [])
        ),
        "gpu_only": tuple(
            GpuOnly(g["pattern"], g["what"], _sourced(g)) for g in raw.get("gpu_only", [])
        ),
        "dated_constraints": tuple(
            DatedConstraint(
                c["package"],
                SpecifierSet(c["requires"]),
                date.fromisoformat(c["before"]),
                c["why"],
                _sourced(c),
                SpecifierSet(c["python"]) if c.get("python") else None,
            )
            for c in raw.get("dated_constraint", [])
        ),
    }


def _old_sdists(raw: Raw) -> dict[str, Any]:
    def env(table: dict[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(table.items()))

    return {
        "build_tools": {
            t["provides"]: BuildTool(t["provides"], t["requirement"], t["removed_in"], _sourced(t))
            for t in raw["tool"]
        },
        "old_sdists": tuple(
            OldSdist(
                name=s["name"],
                versions=SpecifierSet(s["versions"]),
                needs=tuple(s["needs"]),
                against_torch=s["against_torch"],
                toolkit=s["toolkit"],
                build_requires=tuple(s["build_requires"]),
                env=env(s["env"]),
                gpu_env=env(s["gpu_env"]),
                requires_dist=tuple(s["requires_dist"]),
                fact=_sourced(s),
            )
            for s in raw["sdist"]
        ),
    }


def _torch_dates(raw: Raw) -> dict[str, Any]:
    dates = (
        TorchDate(Version(r["torch"]), date.fromisoformat(r["published"]), _sourced(r))
        for r in raw["release"]
    )
    return {"torch_dates": tuple(sorted(dates, key=lambda d: d.version))}


def _validated(name: str) -> Raw:
    """One data file, checked against its schema (unknown keys, sources, versions)."""
    from pydantic import ValidationError

    from gpuenv.errors import FileFormatError
    from gpuenv.knowledge._data import read_data
    from gpuenv.knowledge._foreign_schema import SCHEMAS

    try:
        model = SCHEMAS[name].model_validate(read_data(name))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise FileFormatError(
            f"knowledge/data/{name}: {where}: {first['msg']}",
            hint="the knowledge base shipped with gpuenv is damaged; reinstall gpuenv",
        ) from None
    dumped: Raw = model.model_dump(mode="json", by_alias=True)
    return dumped


def _digest() -> str:
    from gpuenv.knowledge._data import files_digest

    return files_digest(FOREIGN_FILES)


def _raw_files(cache_dir: Path | None) -> dict[str, Raw]:
    """The validated files. Building the schema costs ~0.15 s, so what validated is kept
    in gpuenv's cache as JSON, keyed by the files' digest (edited data is a miss)."""
    if cache_dir is None:
        return {name: _validated(name) for name in FOREIGN_FILES}
    cached = cache_dir / "foreign" / f"{_digest()}.json"
    try:
        data: dict[str, Raw] = json.loads(cached.read_text(encoding="utf-8"))
        if set(data) == set(FOREIGN_FILES):
            return data
    except (OSError, ValueError):
        pass
    data = {name: _validated(name) for name in FOREIGN_FILES}
    try:
        from gpuenv._fs import atomic_write_text

        atomic_write_text(cached, json.dumps(data, separators=(",", ":")), durable=False)
    except OSError:
        pass  # the cache is a courtesy
    return data


def load_foreign_knowledge(cache_dir: Path | None = None) -> ForeignKnowledge:
    raw = _raw_files(cache_dir)
    try:
        return ForeignKnowledge(
            **_images(raw["images.toml"]),
            **_conda(raw["conda_cuda.toml"], raw["conda_names.toml"]),
            **_packages(raw["companions.toml"]),
            **_old_sdists(raw["old_sdists.toml"]),
            **_torch_dates(raw["torch_dates.toml"]),
        )
    except (KeyError, TypeError, ValueError) as exc:  # a damaged cache entry
        from gpuenv.errors import FileFormatError

        raise FileFormatError(
            f"knowledge/data: the foreign-format facts do not load: {type(exc).__name__}: {exc}",
            hint="remove gpuenv's cache directory, or reinstall gpuenv",
        ) from exc


@lru_cache(maxsize=1)
def foreign_knowledge() -> ForeignKnowledge:
    """The foreign-format facts, loaded once per process (validated, then cached in
    gpuenv's cache directory when the CLI configured one: ``gpuenv._settings``)."""
    from gpuenv import _settings

    return load_foreign_knowledge(_settings.cache_dir)
