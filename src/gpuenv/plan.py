"""Choose a stack per target, and say why.

``make_plan`` is pure: the spec, the knowledge base and (for ``detect`` targets)
measured hardware facts in; a ``Plan`` out. For each target it keeps only the torch
builds the driver can run and whose arch list covers every GPU, takes the newest
torch release matching the spec that has such a build, then that release's newest
such CUDA. Every decision is recorded as a sentence in ``reasons``. When nothing
fits it raises ``NoCompatiblePlan`` naming each obstacle and concrete alternatives,
found by relaxing one constraint at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpuenv.compat import DriverCompat, KnowledgeBase, TorchBuild, TorchRelease
from gpuenv.errors import Alternative, NoCompatiblePlan
from gpuenv.hardware import HardwareFacts
from gpuenv.spec import Spec, Target, parse_version_spec
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

    @property
    def min_cc(self) -> ComputeCapability | None:
        return min(self.compute_capabilities) if self.compute_capabilities else None

    def describe(self) -> str:
        if self.cpu:
            return "CPU only"
        ccs = ", ".join(cc.sm for cc in sorted(set(self.compute_capabilities)))
        return f"{self.gpu_name or 'GPU'} ({ccs}), driver {self.driver}"


@dataclass(frozen=True)
class Constraints:
    """What the spec asks of every target."""

    torch: SpecifierSet
    torch_text: str
    python: str
    cuda: CudaVersion | None
    mode: DriverCompat
    torchvision: str | bool | None
    torchaudio: str | bool | None


@dataclass(frozen=True)
class TargetPlan:
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
        }


@dataclass(frozen=True)
class Plan:
    targets: tuple[TargetPlan, ...]

    def target(self, name: str) -> TargetPlan:
        return next(t for t in self.targets if t.target == name)

    def to_json(self) -> dict[str, Any]:
        return {"targets": {t.target: t.to_json() for t in self.targets}}


@dataclass
class _Search:
    """Why each candidate was rejected, collected while searching."""

    release_notes: list[str] = field(default_factory=list)
    build_notes: dict[str, list[str]] = field(default_factory=dict)
    obstacles: list[str] = field(default_factory=list)


# --- hardware ------------------------------------------------------------------------------


def target_hardware(
    name: str, target: Target, kb: KnowledgeBase, detected: HardwareFacts | None
) -> TargetHardware:
    gpu = (target.gpu or "").strip()
    common = {"platform": target.platform, "glibc": target.glibc}
    if gpu.lower() == "none":
        return TargetHardware(True, None, (), None, "declared", **common)
    wants_detect = gpu.lower() == "detect" or target.driver == "detect"
    if wants_detect and detected is None:
        raise NoCompatiblePlan(
            f"target '{name}' asks to detect this machine's hardware, but no facts were given",
            target=name,
        )
    if gpu.lower() == "detect":
        assert detected is not None
        ccs = tuple(g.compute_capability for g in detected.gpus if g.compute_capability)
        if not ccs:
            why = "; ".join(detected.notes) or "no NVIDIA GPU found"
            raise NoCompatiblePlan(
                f"target '{name}': gpu = \"detect\", but this machine has no usable GPU ({why})",
                target=name,
                alternatives=[Alternative("plan a CPU build", {f"targets.{name}.gpu": "none"})],
            )
        names = sorted({g.name for g in detected.gpus})
        gpu_name = " + ".join(names)
    else:
        model = kb.find_gpu(gpu) if gpu else None
        declared_cc = target.compute_capability
        cc = ComputeCapability.parse(declared_cc) if declared_cc else (model.cc if model else None)
        if cc is None:  # spec validation normally catches this first
            raise NoCompatiblePlan(f"target '{name}': unknown GPU {gpu!r}", target=name)
        ccs = (cc,)
        gpu_name = model.name if model else (gpu or f"compute capability {cc}")
    if target.driver == "detect":
        assert detected is not None
        if detected.driver_version is None:
            raise NoCompatiblePlan(
                f"target '{name}': driver = \"detect\", but no NVIDIA driver was found here",
                target=name,
                alternatives=[
                    Alternative("declare the driver", {f"targets.{name}.driver": "550.54.15"})
                ],
            )
        driver = detected.driver_version
    else:
        assert target.driver is not None
        driver = DriverVersion.parse(target.driver)
    source = (
        ("measured" if detected and detected.measured else "file") if wants_detect else "declared"
    )
    return TargetHardware(False, gpu_name, ccs, driver, source, **common)


# --- the search --------------------------------------------------------------------------------


def spec_text(spec: SpecifierSet) -> str:
    """A specifier set with lower bounds first (">=3.8,<3.13"), for messages."""
    return (
        ",".join(sorted((str(s) for s in spec), key=lambda s: (not s.startswith(">"), s))) or "any"
    )


def _python_for(release: TorchRelease, wanted: str) -> str | None:
    """The Python to use with ``release``: the exact one asked for, or the newest in range."""
    if wanted in KNOWN_PYTHONS:
        return wanted if release.python.contains(wanted) else None
    # A bare version gpuenv has no release data for ("3.99") matches nothing: that
    # is an unsatisfiable plan, not an invalid specifier.
    spec = SpecifierSet(f"=={wanted}.*" if wanted[:1].isdigit() else wanted)
    fits = [p for p in KNOWN_PYTHONS if spec.contains(p) and release.python.contains(p)]
    return fits[-1] if fits else None


def _companion_problem(
    release: TorchRelease, package: str, wanted: str | bool | None
) -> str | None:
    paired = release.torchvision if package == "torchvision" else release.torchaudio
    if wanted is None or wanted is False:
        return None
    if paired is None:
        return f"torch {release.version} has no paired {package} release"
    assert isinstance(wanted, str)
    if not parse_version_spec(wanted).contains(paired, prereleases=True):
        return (
            f"{package} {wanted} does not pair with torch {release.version} "
            f"(it pairs with {package} {paired})"
        )
    return None


def _build_problems(
    build: TorchBuild, hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    """Why ``build`` cannot serve ``hw`` (empty when it can)."""
    assert build.cuda is not None and hw.driver is not None
    problems = []
    if c.cuda is not None and build.cuda != c.cuda:
        problems.append(f"CUDA {build.cuda}, not the requested {c.cuda}")
    floor = kb.driver_floor(build.cuda, c.mode)
    if floor is None:
        problems.append(f"CUDA {build.cuda} is not in the knowledge base")
    elif hw.driver < floor:
        problems.append(f"needs driver >= {floor} ({c.mode.value}), target has {hw.driver}")
    for cc in sorted(set(hw.compute_capabilities)):
        if build.covering(cc) is None:
            problems.append(f"arch list ({build.arch_text}) does not cover {cc.sm}")
    return problems


def _fitting_builds(
    release: TorchRelease,
    hw: TargetHardware,
    c: Constraints,
    kb: KnowledgeBase,
    notes: _Search | None,
) -> list[TorchBuild]:
    fits = []
    for build in release.cuda_builds:
        problems = _build_problems(build, hw, c, kb)
        if notes is not None:
            notes.build_notes.setdefault(str(release.version), []).append(
                f"{build.tag}: " + ("fits" if not problems else "; ".join(problems))
            )
        if not problems:
            fits.append(build)
    return fits


def _search(
    releases: Iterable[TorchRelease],
    hw: TargetHardware,
    c: Constraints,
    kb: KnowledgeBase,
    notes: _Search | None = None,
) -> tuple[TorchRelease, TorchBuild, str] | None:
    """The newest release (then the newest CUDA) that fits, with its Python."""
    for release in releases:
        python = _python_for(release, c.python)
        if python is None:
            if notes is not None:
                notes.release_notes.append(
                    f"torch {release.version} skipped: "
                    f"supports Python {spec_text(release.python)}, not {c.python}"
                )
            continue
        companion = _companion_problem(release, "torchvision", c.torchvision) or _companion_problem(
            release, "torchaudio", c.torchaudio
        )
        if companion:
            if notes is not None:
                notes.release_notes.append(f"torch {release.version} skipped: {companion}")
            continue
        if hw.cpu:
            cpu = release.build("cpu")
            if cpu is not None:
                return release, cpu, python
            if notes is not None:
                notes.release_notes.append(f"torch {release.version} skipped: no CPU build")
            continue
        fits = _fitting_builds(release, hw, c, kb, notes)
        if fits:
            best = max(fits, key=lambda b: b.cuda or CudaVersion(0, 0))
            return release, best, python
        if notes is not None:
            notes.release_notes.append(f"torch {release.version} skipped: no build fits")
    return None


# --- explaining a choice ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Choice:
    name: str
    release: TorchRelease
    build: TorchBuild
    python: str
    hw: TargetHardware
    index_url: str


def _python_reason(choice: _Choice, c: Constraints) -> str:
    supports = spec_text(choice.release.python)
    if choice.python == c.python:
        return (
            f"python {choice.python}: as asked (torch {choice.release.version} supports {supports})"
        )
    version = choice.release.version
    return f"python {choice.python}: newest in {c.python!r} that torch {version} supports"


def _gpu_reasons(choice: _Choice, c: Constraints, kb: KnowledgeBase, notes: _Search) -> list[str]:
    hw, build = choice.hw, choice.build
    assert hw.driver is not None and build.cuda is not None
    if c.mode is DriverCompat.STRICT:
        ceiling = kb.newest_cuda_for_driver(hw.driver)
        reasons = [
            f"driver {hw.driver} runs CUDA builds up to {ceiling} "
            "(strict: each CUDA release's minimum driver)"
        ]
    else:
        reasons = [
            f"driver {hw.driver}: CUDA minor-version compatibility "
            '(opted in with driver-compat = "minor")'
        ]
    own = f"{build.tag}:"
    notes_here = notes.build_notes.get(str(choice.release.version), [])
    reasons.extend(note for note in notes_here if not note.startswith(own))
    covers = (build.covering(cc) for cc in sorted(set(hw.compute_capabilities)))
    how = "; ".join(
        cov.how(cc)
        for cc, cov in zip(sorted(set(hw.compute_capabilities)), covers, strict=True)
        if cov
    )
    why = "as asked" if c.cuda is not None else "newest CUDA that fits"
    floor = kb.driver_floor(build.cuda, c.mode)
    reasons.append(f"{build.tag} chosen ({why}): driver {hw.driver} >= {floor}; {how}")
    return reasons


def _package_reasons(choice: _Choice, c: Constraints) -> list[str]:
    release, build = choice.release, choice.build
    reasons = []
    companions = [
        f"{package} {version}"
        for package, version, wanted in (
            ("torchvision", release.torchvision, c.torchvision),
            ("torchaudio", release.torchaudio, c.torchaudio),
        )
        if version is not None and wanted is not False
    ]
    if companions:
        reasons.append(f"{', '.join(companions)}: released with torch {release.version}")
    if build.cudnn or build.nccl:
        reasons.append(
            f"{build.tag} wheels bring cuDNN {build.cudnn or '-'} and NCCL {build.nccl or '-'}"
        )
    if release.pypi_default == build.tag:
        reasons.append(
            f"index {choice.index_url}; PyPI's plain torch {release.version} is this same build, "
            "so the default index also serves it"
        )
    else:
        default = release.pypi_default or "unknown"
        reasons.append(
            f"index {choice.index_url}: PyPI's plain torch {release.version} is {default}, "
            f"not {build.tag}"
        )
    return reasons


def _reasons(choice: _Choice, c: Constraints, kb: KnowledgeBase, notes: _Search) -> list[str]:
    reasons = [f"target {choice.name}: {choice.hw.describe()} ({choice.hw.source})"]
    reasons.extend(notes.release_notes)
    reasons.append(
        f"torch {choice.release.version}: newest release matching {c.torch_text!r} that fits"
    )
    reasons.append(_python_reason(choice, c))
    if choice.hw.cpu:
        reasons.append("cpu build: the target has no GPU")
    else:
        reasons.extend(_gpu_reasons(choice, c, kb, notes))
    reasons.extend(_package_reasons(choice, c))
    return reasons


def _virtual_packages(hw: TargetHardware, kb: KnowledgeBase) -> dict[str, str]:
    packages = {"__glibc": hw.glibc, "__linux": "5.10", "__unix": "0"}
    if hw.driver is not None:
        ceiling = kb.newest_cuda_for_driver(hw.driver)
        if ceiling is not None:
            packages["__cuda"] = str(ceiling)
    if hw.min_cc is not None:
        packages["__cuda_arch"] = str(hw.min_cc)
    return dict(sorted(packages.items()))


# --- when nothing fits ------------------------------------------------------------------------


def _cuda_obstacles(
    releases: list[TorchRelease], hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    if c.cuda is None:
        return []
    found = []
    if not any(r.build(c.cuda.tag) for r in releases):
        available = ", ".join(b.tag for b in releases[0].cuda_builds)
        found.append(
            f"no torch {c.torch_text} build for {c.cuda.tag} "
            f"(torch {releases[0].version} has: {available})"
        )
    floor = kb.driver_floor(c.cuda, c.mode)
    if hw.driver is not None and floor is not None and hw.driver < floor:
        found.append(f"CUDA {c.cuda} needs driver >= {floor}; this target has {hw.driver}")
    return found


def _gpu_obstacles(
    releases: list[TorchRelease], hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    builds = [b for r in releases for b in r.cuda_builds]
    found = [
        f"no torch {c.torch_text} build has kernels for {cc.sm} "
        f"({kb.architecture_of(cc) or 'this architecture'})"
        for cc in sorted(set(hw.compute_capabilities))
        if not any(b.covering(cc) for b in builds)
    ]
    assert hw.driver is not None
    floors = [kb.driver_floor(b.cuda, c.mode) for b in builds if b.cuda is not None]
    if not any(f is not None and hw.driver >= f for f in floors):
        found.append(
            f"driver {hw.driver} is older than every torch {c.torch_text} CUDA build needs"
        )
    return found


def _obstacles(
    releases: list[TorchRelease], hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    """The distinct reasons nothing fits, most decisive first."""
    if not releases:
        return [f"no torch release gpuenv knows matches {c.torch_text!r}"]
    found = _cuda_obstacles(releases, hw, c, kb)
    if not any(_python_for(r, c.python) for r in releases):
        newest = releases[0]
        found.append(
            f"no torch {c.torch_text} release supports Python {c.python} "
            f"({newest.version} supports {spec_text(newest.python)})"
        )
    if not hw.cpu:
        found.extend(_gpu_obstacles(releases, hw, c, kb))
    for package, wanted in (("torchvision", c.torchvision), ("torchaudio", c.torchaudio)):
        problems = {_companion_problem(r, package, wanted) for r in releases}
        if None not in problems:
            found.append(sorted(p for p in problems if p)[0])
    return found or ["no build of the matching torch releases fits this target"]


@dataclass(frozen=True)
class _Problem:
    """An unsatisfiable target, as the alternative finders see it."""

    name: str
    hw: TargetHardware
    c: Constraints
    kb: KnowledgeBase
    matching: list[TorchRelease]

    def search(self, **changes: Any) -> tuple[TorchRelease, TorchBuild, str] | None:
        pool = changes.pop("pool", self.matching)
        hw = changes.pop("hw", self.hw)
        return _search(pool, hw, replace(self.c, **changes), self.kb)


def _describe(found: tuple[TorchRelease, TorchBuild, str]) -> str:
    release, build, python = found
    return f"torch {release.version} {build.tag} (python {python})"


def _alt_cuda(p: _Problem) -> Alternative | None:
    found = p.search(cuda=None) if p.c.cuda is not None else None
    if found is None:
        return None
    return Alternative(
        f"use CUDA {found[1].cuda} instead: {_describe(found)}", {"stack.cuda": str(found[1].cuda)}
    )


def _alt_driver(p: _Problem) -> Alternative | None:
    if p.hw.cpu or p.hw.driver is None:
        return None
    unlimited = replace(p.hw, driver=DriverVersion.parse("9999.0"))
    for pool in (p.matching, list(p.kb.torch_releases)):
        found = p.search(pool=pool, hw=unlimited)
        if found is None or found[1].cuda is None:
            continue
        floor = p.kb.driver_floor(found[1].cuda, p.c.mode)
        if floor is None or floor <= p.hw.driver:
            return None  # the driver is not what stands in the way
        changes = {f"targets.{p.name}.driver": f">={floor}"}
        if pool is not p.matching:
            changes["stack.torch"] = f"=={found[0].version}"
        return Alternative(f"install NVIDIA driver >= {floor} for {_describe(found)}", changes)
    return None


def _alt_minor_compat(p: _Problem) -> Alternative | None:
    if p.hw.cpu or p.c.mode is DriverCompat.MINOR:
        return None
    found = p.search(mode=DriverCompat.MINOR)
    if found is None:
        return None
    return Alternative(
        f"opt into CUDA minor-version compatibility: {_describe(found)}",
        {"stack.driver-compat": "minor"},
    )


def _alt_other_torch(p: _Problem) -> Alternative | None:
    found = p.search(pool=[r for r in p.kb.torch_releases if r not in p.matching])
    if found is None:
        return None
    return Alternative(
        f"another torch release: {_describe(found)}", {"stack.torch": f"=={found[0].version}"}
    )


def _alt_python(p: _Problem) -> Alternative | None:
    found = p.search(python=">=3.8")
    if found is None or found[2] == p.c.python:
        return None
    return Alternative(f"another Python: {_describe(found)}", {"stack.python": found[2]})


def _alt_companions(p: _Problem) -> list[Alternative]:
    alternatives = []
    for package in ("torchvision", "torchaudio"):
        if not isinstance(getattr(p.c, package), str):
            continue
        found = p.search(**{package: None})
        if found is not None:
            paired = getattr(found[0], package)
            alternatives.append(
                Alternative(
                    f"{package} {paired}, the release paired with torch {found[0].version}",
                    {f"stack.{package}": str(paired)},
                )
            )
    return alternatives


def _alt_cpu(p: _Problem) -> Alternative | None:
    if p.hw.cpu:
        return None
    cpu = replace(p.hw, cpu=True, compute_capabilities=())
    found = p.search(hw=cpu) or p.search(hw=cpu, pool=list(p.kb.torch_releases))
    if found is None:
        return None
    return Alternative(f"a CPU build: {_describe(found)}", {f"targets.{p.name}.gpu": "none"})


def _alternatives(problem: _Problem) -> list[Alternative]:
    """Concrete changes that would work, each found by relaxing one constraint."""
    candidates = [
        _alt_cuda(problem),
        _alt_driver(problem),
        _alt_minor_compat(problem),
        _alt_other_torch(problem),
        _alt_python(problem),
        *_alt_companions(problem),
        _alt_cpu(problem),
    ]
    unique: list[Alternative] = []
    for alternative in candidates:
        if alternative is not None and all(alternative.changes != u.changes for u in unique):
            unique.append(alternative)
    return unique


# --- entry point -----------------------------------------------------------------------------


def _requested_cuda(spec: Spec) -> CudaVersion | None:
    """``cuda``, or else a toolkit pinned to a CUDA version: the wheels must be built for
    the toolkit's CUDA, or extensions compiled with it break (spec checks refuse a
    toolkit and a cuda that disagree)."""
    stack = spec.stack
    if stack.cuda != "auto":
        return CudaVersion.parse(stack.cuda)
    toolkit = stack.toolkit
    if toolkit and toolkit != "auto" and not toolkit.startswith("system:"):
        return CudaVersion.parse(toolkit)
    return None


def constraints(spec: Spec) -> Constraints:
    stack = spec.stack
    return Constraints(
        torch=parse_version_spec(stack.torch),
        torch_text=stack.torch,
        python=stack.python,
        cuda=_requested_cuda(spec),
        mode=DriverCompat(stack.driver_compat),
        torchvision=stack.torchvision,
        torchaudio=stack.torchaudio,
    )


def plan_target(
    name: str,
    spec: Spec,
    kb: KnowledgeBase,
    *,
    detected: HardwareFacts | None = None,
    torch_index: str | None = None,
) -> TargetPlan:
    c = constraints(spec)
    hw = target_hardware(name, spec.targets[name], kb, detected)
    matching = kb.torch_matching(c.torch)
    notes = _Search()
    found = _search(matching, hw, c, kb, notes)
    if found is None:
        obstacles = _obstacles(matching, hw, c, kb)
        raise NoCompatiblePlan(
            f"no torch build fits target '{name}' ({hw.describe()}):\n"
            + "\n".join(f"- {o}" for o in obstacles),
            target=name,
            alternatives=_alternatives(_Problem(name, hw, c, kb, matching)),
        )
    release, build, python = found
    base = (torch_index or spec.pip.torch_index or DEFAULT_TORCH_INDEX).rstrip("/")
    index_url = f"{base}/{build.tag}"
    ceiling = kb.newest_cuda_for_driver(hw.driver) if hw.driver else None

    def companion(version: Version | None, wanted: str | bool | None) -> str | None:
        return None if version is None or wanted is False else str(version)

    return TargetPlan(
        target=name,
        hardware=hw,
        python=python,
        torch=str(release.version),
        torchvision=companion(release.torchvision, c.torchvision),
        torchaudio=companion(release.torchaudio, c.torchaudio),
        cuda=str(build.cuda) if build.cuda else None,
        cu_tag=build.tag,
        arch_list=tuple(str(a) for a in build.arch),
        cudnn=build.cudnn,
        nccl=build.nccl,
        index_url=index_url,
        pypi_default=release.pypi_default == build.tag,
        driver_compat=c.mode.value,
        driver_cuda=str(ceiling) if ceiling else None,
        virtual_packages=_virtual_packages(hw, kb),
        reasons=tuple(_reasons(_Choice(name, release, build, python, hw, index_url), c, kb, notes)),
    )


def make_plan(
    spec: Spec,
    kb: KnowledgeBase,
    *,
    only: str | None = None,
    detected: HardwareFacts | None = None,
    torch_index: str | None = None,
) -> Plan:
    """Plan every target (or ``only`` one); the first unsatisfiable target raises."""
    names = [only] if only else list(spec.targets)
    return Plan(
        tuple(plan_target(n, spec, kb, detected=detected, torch_index=torch_index) for n in names)
    )
