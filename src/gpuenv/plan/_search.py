"""The search: which torch release and build serve one target, and why the others do not.

For each release (newest first) matching the constraints, keep the builds the driver can
run and whose arch list covers every GPU; the first release with such a build wins, with
its newest CUDA. ``Notes`` collects why each candidate was passed over, for the reasons
and for the refusal when nothing fits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpuenv.knowledge import DriverCompat, JetPack, KnowledgeBase, TorchBuild, TorchRelease
from gpuenv.plan._model import KNOWN_PYTHONS, Constraints, TargetHardware
from gpuenv.spec import parse_version_spec
from gpuenv.versions import CudaVersion


@dataclass
class Notes:
    """Why each candidate was rejected, collected while searching."""

    release_notes: list[str] = field(default_factory=list)
    build_notes: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Found:
    """What the search found for one target: a torch release, the build that fits, the Python."""

    release: TorchRelease  # as the target's platform sees it
    build: TorchBuild
    python: str

    def describe(self) -> str:
        return f"torch {self.release.version} {self.build.tag} (python {self.python})"


def spec_text(spec: SpecifierSet) -> str:
    """A specifier set with lower bounds first (">=3.8,<3.13"), for messages."""
    return (
        ",".join(sorted((str(s) for s in spec), key=lambda s: (not s.startswith(">"), s))) or "any"
    )


def python_for(pythons: SpecifierSet, wanted: str) -> str | None:
    """The Python to use: the exact one asked for, or the newest in range."""
    if wanted in KNOWN_PYTHONS:
        return wanted if pythons.contains(wanted) else None
    # A bare version gpuenv has no release data for ("3.99") matches nothing: that
    # is an unsatisfiable plan, not an invalid specifier.
    spec = SpecifierSet(f"=={wanted}.*" if wanted[:1].isdigit() else wanted)
    fits = [p for p in KNOWN_PYTHONS if spec.contains(p) and pythons.contains(p)]
    return fits[-1] if fits else None


def choose_python(release: TorchRelease, build: TorchBuild, c: Constraints) -> str | None:
    """The Python for ``build``: as ``python_for``, but a range prefers the Pythons PyPI
    covers over an experimental one only the PyTorch index has (taken when asked for
    exactly, or when the range holds nothing else)."""
    pythons = release.python_of(build)
    if release.pypi_python is not None and c.python not in KNOWN_PYTHONS:
        stable = python_for(release.pypi_python, c.python)
        if stable is not None and pythons.contains(stable):
            return stable
    return python_for(pythons, c.python)


def paired_companion(
    release: TorchRelease, package: str, wanted: str | bool | None
) -> Version | None:
    """The torchvision/torchaudio made for ``release`` that ``wanted`` admits (the first
    listed where several do, or where nothing is asked); None when none does."""
    paired = release.paired(package)
    if not isinstance(wanted, str):
        return paired[0] if paired else None
    spec = parse_version_spec(wanted)
    return next((p for p in paired if spec.contains(p, prereleases=True)), None)


def companion_problem(release: TorchRelease, package: str, wanted: str | bool | None) -> str | None:
    paired = release.torchvision if package == "torchvision" else release.torchaudio
    if wanted is None or wanted is False:
        return None
    if paired is None:
        return f"torch {release.version} has no paired {package} release"
    assert isinstance(wanted, str)
    if paired_companion(release, package, wanted) is None:
        return (
            f"{package} {wanted} does not pair with torch {release.version} "
            f"(it pairs with {package} {paired})"
        )
    return None


def jetpack_problem(cuda: CudaVersion, jetpack: JetPack, mode: DriverCompat) -> str | None:
    """Why a Jetson on ``jetpack`` cannot run a build for ``cuda`` (None: it can). Its
    driver runs the JetPack's CUDA and older (strict), or with minor-version
    compatibility any release of that CUDA major too."""
    if cuda <= jetpack.cuda or (mode is DriverCompat.MINOR and cuda.major == jetpack.cuda.major):
        return None
    return (
        f"needs CUDA {cuda}; {jetpack.describe()} (driver {jetpack.driver}) runs CUDA up to "
        f"{jetpack.cuda} ({mode.value})"
    )


def build_problems(
    build: TorchBuild, hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    """Why a CUDA ``build`` cannot serve ``hw`` (empty when it can)."""
    assert build.cuda is not None and hw.driver is not None
    problems = []
    if c.cuda is not None and build.cuda != c.cuda:
        problems.append(f"CUDA {build.cuda}, not the requested {c.cuda}")
    floor = kb.driver_floor(build.cuda, c.mode, hw.platform)
    if hw.jetpack is not None:
        problem = jetpack_problem(build.cuda, hw.jetpack, c.mode)
        problems += [problem] if problem else []
    elif floor is None:
        problems.append(f"CUDA {build.cuda} is not in the knowledge base")
    elif hw.driver < floor:
        problems.append(f"needs driver >= {floor} ({c.mode.value}), target has {hw.driver}")
    for cc in sorted(set(hw.compute_capabilities)):
        if build.covering(cc) is None:
            problems.append(f"arch list ({build.arch_text}) does not cover {cc.sm}")
    return problems


def _python_problem(release: TorchRelease, build: TorchBuild, c: Constraints) -> str | None:
    if build.python is None or python_for(build.python, c.python) is not None:
        return None
    return f"its wheels are for Python {spec_text(build.python)}, not {c.python}"


def fitting_builds(
    release: TorchRelease,
    hw: TargetHardware,
    c: Constraints,
    kb: KnowledgeBase,
    notes: Notes | None,
) -> list[TorchBuild]:
    fits = []
    for build in release.cuda_builds:
        problems = build_problems(build, hw, c, kb)
        python = _python_problem(release, build, c)
        problems += [python] if python else []
        if notes is not None:
            notes.build_notes.setdefault(str(release.version), []).append(
                f"{build.tag}: " + ("fits" if not problems else "; ".join(problems))
            )
        if not problems:
            fits.append(build)
    return fits


def _release_problem(release: TorchRelease, c: Constraints) -> str | None:
    if python_for(release.python, c.python) is None:
        return f"supports Python {spec_text(release.python)}, not {c.python}"
    return companion_problem(release, "torchvision", c.torchvision) or companion_problem(
        release, "torchaudio", c.torchaudio
    )


def fit(
    release: TorchRelease,
    hw: TargetHardware,
    c: Constraints,
    kb: KnowledgeBase,
    notes: Notes | None = None,
) -> Found | None:
    """The build (newest CUDA that fits) and Python of ``release`` for ``hw``, if any.
    ``release`` must already be the target platform's view (``TorchRelease.on``)."""
    problem = _release_problem(release, c)
    if problem:
        if notes is not None:
            notes.release_notes.append(f"torch {release.version} skipped: {problem}")
        return None
    if hw.cpu:
        return _fit_cpu(release, c, notes)
    fits = fitting_builds(release, hw, c, kb, notes)
    if not fits:
        if notes is not None:
            notes.release_notes.append(f"torch {release.version} skipped: no build fits")
        return None
    best = max(fits, key=lambda b: b.cuda or CudaVersion(0, 0))
    python = choose_python(release, best, c)
    assert python is not None
    return Found(release, best, python)


def _fit_cpu(release: TorchRelease, c: Constraints, notes: Notes | None) -> Found | None:
    """A CPU target's build: the CPU one, or (``build = "pypi"``) PyPI's default build,
    which runs on a CPU too, when PyPI has it for the Python."""
    tag = release.pypi_default if c.pypi_build else "cpu"
    build = release.build(tag) if tag else None
    python = choose_python(release, build, c) if build else None
    if build is not None and python is not None and (not c.pypi_build or release.on_pypi(python)):
        return Found(release, build, python)
    if notes is not None:
        if c.pypi_build and build is None:
            why = "PyPI has no build of it for this platform"
        elif c.pypi_build:
            why = f"PyPI has no Python {c.python} wheels of it"
        else:
            why = "no CPU build" if build is None else f"its CPU build has no Python {c.python}"
        notes.release_notes.append(f"torch {release.version} skipped: {why}")
    return None


def search(
    releases: Iterable[TorchRelease],
    hw: TargetHardware,
    c: Constraints,
    kb: KnowledgeBase,
    notes: Notes | None = None,
) -> Found | None:
    """The newest release (then the newest CUDA) that fits."""
    for release in releases:
        found = fit(release.on(hw.platform), hw, c, kb, notes)
        if found is not None:
            return found
    return None


def official_search(
    releases: Iterable[TorchRelease], hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> Found | None:
    """Like ``search``, but with each release's official CUDA matrix only (no build the
    index serves outside it)."""
    for release in releases:
        view = release.on(hw.platform)
        view = replace(view, builds=tuple(b for b in view.builds if not b.off_matrix))
        found = fit(view, hw, c, kb)
        if found is not None:
            return found
    return None
