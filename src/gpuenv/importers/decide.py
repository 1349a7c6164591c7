"""The decision for one target: what to keep, move, build or report, from the merged
environment, with the planner choosing torch (``torch_choice``) and the companion data
moving what is tied to it (``companions``). Everything else stays as the paper pinned
it, unless the new Python or torch rules the pin out (``knowledge/data/companions.toml``:
Python floors, torch constraints), and then it moves to the nearest version that can.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from fnmatch import fnmatchcase

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv._marker import TARGET_NAME_PATTERN, TARGET_NAME_RULE
from gpuenv.errors import NoCompatiblePlan, UsageError
from gpuenv.importers import companions as moves
from gpuenv.importers import era as eras
from gpuenv.importers import old_sdists
from gpuenv.importers import wheels as wheel_index
from gpuenv.importers.images import IMPLIED
from gpuenv.importers.local_paths import COMPILES_CUDA
from gpuenv.importers.merge import Merged, Resolved
from gpuenv.importers.model import (
    AUTHOR_PATH,
    CODE_READ,
    CODE_USES,
    CUDA_EXTENSION,
    CUDA_MAJOR,
    DRIVER,
    DROPPED,
    GPU,
    IMAGE,
    INCLUDED,
    INDEX,
    LOCAL_PACKAGE,
    NAME,
    PRE,
    PYTHON,
    TOOLKIT,
    TORCH_BUILD,
    UNMANAGED,
    UNREADABLE,
    Ask,
    Fact,
    Origin,
)
from gpuenv.importers.report import (
    ASSUMPTION,
    CHANGED,
    HIGH,
    KEPT,
    LOW,
    MEDIUM,
    NEEDS_BUILD,
    NONE,
    UNREPRODUCIBLE,
    Entry,
)
from gpuenv.importers.report import UNMANAGED as UNMANAGED_ENTRY
from gpuenv.importers.requirements import index_file
from gpuenv.importers.torch_choice import Choice, PaperTorch, Planning, TorchBound, choose
from gpuenv.knowledge import DriverCompat, KnowledgeBase
from gpuenv.knowledge.foreign import (
    Companion,
    CompanionRequirement,
    ForeignKnowledge,
    TorchConstraint,
)
from gpuenv.names import COMPANIONS, TRIO, normalize_name
from gpuenv.plan import TargetPlan, spec_text
from gpuenv.spec import Target
from gpuenv.versions import CudaVersion, DriverVersion, VersionFormatError


@dataclass(frozen=True)
class TargetRequest:
    """The machine to reproduce on: a GPU name and driver, a compute capability and
    driver, or no GPU (``gpu = "none"``)."""

    name: str | None
    gpu: str | None
    driver: str | None
    compute_capability: str | None = None

    @property
    def cpu(self) -> bool:
        return (self.gpu or "").lower() == "none"

    def check(self, kb: KnowledgeBase) -> None:
        """Refuse a GPU the knowledge base does not know, a malformed driver or a target
        name a spec cannot hold (exit 2, naming the flag rather than the unwritten file)."""
        if self.name is not None and re.fullmatch(TARGET_NAME_PATTERN, self.name) is None:
            raise UsageError(
                f"--target {self.name!r} is not a valid target name",
                hint=f"use {TARGET_NAME_RULE} characters; no '.'",
            )
        if self.cpu:
            return
        if self.gpu is not None and not self.gpu.strip():
            raise UsageError("--gpu names no GPU", hint='pass a name such as "H100", or "none"')
        if self.driver is not None:
            try:
                DriverVersion.parse(self.driver)
            except VersionFormatError:
                raise UsageError(
                    f"--driver {self.driver!r} is not a driver version (like 550.54.15)"
                ) from None
        if self.gpu and self.compute_capability is None and kb.find_gpu(self.gpu) is None:
            close = kb.suggest_gpus(self.gpu)
            raise UsageError(
                f"--gpu {self.gpu!r} is not a GPU gpuenv knows",
                hint=f"did you mean {' or '.join(repr(c) for c in close)}?" if close else None,
            )

    def target(self) -> Target:
        if self.cpu:
            return Target(gpu="none")
        return Target(gpu=self.gpu, compute_capability=self.compute_capability, driver=self.driver)


@dataclass(frozen=True)
class Line:
    """One entry of the written spec, with its comment."""

    text: str
    comment: str


# The end of the sentence of a pin moved to the nearest release with a wheel: the
# resolution check (gpuenv.import_check) finds such moves among the packages uv names.
WHEEL_MOVE = "is the nearest release that has one"


@dataclass
class Decision:
    """The reproduction of one target as ``decide`` builds it: the project and target the
    spec names, the plan, the stack, the pip and conda lines (and those left out), the
    report's entries, the packages that need a toolkit, and the source builds' tables."""

    project: str
    project_comment: str
    target: str
    target_spec: Target
    plan: TargetPlan
    stack: dict[str, str | bool] = field(default_factory=dict)
    stack_comments: dict[str, str] = field(default_factory=dict)
    pip: list[Line] = field(default_factory=list)
    left_out: list[Line] = field(default_factory=list)
    conda: list[Line] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    needs_toolkit: list[str] = field(default_factory=list)
    wheels: wheel_index.WheelIndex | None = None  # the index asked for wheels, if any
    python_why: str | None = None  # why the Python moved for wheels (the index's word)
    # The Python the files ask for: exact ("3.8"), a range (">=3.8") or None (no word)
    python_asked: str | None = None
    builds: list[old_sdists.BuildTable] = field(default_factory=list)  # [pip.build.<name>]
    # Pins kept as source builds rather than moved to the nearest release with a wheel,
    # with why (the move left the pins unresolvable: gpuenv.import_check says so).
    kept_as_builds: dict[str, str] = field(default_factory=dict)
    # [pip] exclude-newer: the day the written dependencies resolve as of (era.as_of)
    as_of: eras.AsOf | None = None
    # [pip] exclude-newer-package: what the target's torch requires, as of torch's day
    as_of_packages: dict[str, date] = field(default_factory=dict)

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)


# --- what the paper asked of torch ---------------------------------------------------------


def _python_wanted(merged: Merged) -> tuple[str | None, Fact | None]:
    fact = merged.fact(PYTHON)
    if fact is None or not fact.value:
        return None, None
    value = fact.value
    if value[:1].isdigit():
        return ".".join(value.split(".")[:2]), fact
    return value, fact


def excludes(specifier: str, version: Version) -> bool:
    """True when ``specifier``'s upper bound rules out ``version`` and every later one."""
    try:
        specs = SpecifierSet(specifier)
    except InvalidSpecifier:
        return False
    for spec in specs:
        text = spec.version.removesuffix(".*")
        try:
            bound = Version(text)
        except InvalidVersion:
            continue
        if spec.operator == "<" and bound <= version:
            return True
        if spec.operator in ("<=", "===") and bound < version:
            return True
        if spec.operator == "==" and not spec.version.endswith(".*") and bound < version:
            return True
        if spec.operator == "==" and spec.version.endswith(".*") and bound < version:
            return not str(version).startswith(text + ".")
    return False


def final_specifier(
    merged: Merged, resolved: Resolved, plan: tuple[str, str] | None, fk: ForeignKnowledge
) -> str:
    """The specifier the written spec gives ``resolved`` once the constraints of the
    plan's (torch, Python) apply (numpy==2.0.1 beside torch 2.1 is written numpy<2,
    Pillow 5.2.0 beside torchvision 0.16 on 3.11 pillow==9.3.0): the files' own when no
    torch is chosen yet or no constraint touches it."""
    specifier = resolved.specifier
    if plan is None:
        return specifier
    floor = fk.python_floor(resolved.name, plan[1])
    if floor is not None and resolved.exact is not None and resolved.exact < floor.version:
        specifier = f"=={floor.version}"  # moved to wheels for the Python (_python_floor)
    for constraint in fk.constraints_for(Version(plan[0])):
        if constraint.package != resolved.name:
            continue
        if constraint.beside is not None:
            if constraint.beside not in merged.packages or resolved.exact is None:
                continue
            if constraint.requires.contains(resolved.exact, prereleases=True):
                continue
            nearest, _, _ = _nearest(resolved, constraint, plan[1], fk)
            specifier = f"=={nearest}" if nearest else str(constraint.requires)
            continue
        if resolved.exact is not None:
            if not constraint.requires.contains(resolved.exact, prereleases=True):
                specifier = str(constraint.requires)
            continue
        specifier = str(SpecifierSet(specifier) & constraint.requires)
    return specifier


def python_ceiling(
    merged: Merged, fk: ForeignKnowledge, plan: tuple[str, str] | None = None
) -> tuple[str, str] | None:
    """The newest Python every pinned package with known Python floors still installs
    on, and the package that holds it back ("3.10", "numpy<1.22"), as written once the
    constraints of the plan's (torch, Python) apply, when chosen."""
    ceiling: tuple[str, str] | None = None
    for floor in fk.python_floors:
        resolved = merged.packages.get(floor.package)
        if resolved is None:
            continue
        specifier = final_specifier(merged, resolved, plan, fk)
        if not specifier:
            continue
        if excludes(specifier, floor.version):
            minor = int(floor.python.split(".")[1]) - 1
            candidate = (f"3.{minor}", f"{floor.package}{specifier}")
            if ceiling is None or minor < int(ceiling[0].split(".")[1]):
                ceiling = candidate
    return ceiling


def _torch_build(merged: Merged, resolved: Resolved | None) -> tuple[str | None, Origin | None]:
    """The build the paper's torch was, and where that was said: a build named on torch
    itself (``+cu113``, a conda build string), else the files' CUDA statements
    (cudatoolkit=11.3, a PyTorch index), else what a base image implies."""
    owners = [a for a in resolved.asks if a.build] if resolved is not None else []
    stated = [a for a in owners if a.manager != "image"]
    if stated:
        return stated[0].build, stated[0].origin
    facts = merged.facts.get(TORCH_BUILD, ())
    explicit = [f for f in facts if not (f.note and f.note.startswith(IMPLIED))]
    if explicit:
        return explicit[0].value, explicit[0].origin
    if owners:
        return owners[0].build, owners[0].origin
    return (facts[0].value, facts[0].origin) if facts else (None, None)


def paper_torch(
    merged: Merged, kb: KnowledgeBase, fk: ForeignKnowledge, dated: eras.Dated | None = None
) -> tuple[PaperTorch, Resolved | None]:
    """The paper's torch; a range or a bare torch stands for the release its era gives:
    an exact torchvision/torchaudio pin (a nightly's: the release it led to), else the
    day of the files' newest pin (``dated``: the newest torch published by then), else
    the CUDA the files name."""
    resolved = merged.packages.get("torch")
    specifier = resolved.specifier if resolved else ""
    version = resolved.exact if resolved else None
    era = None
    if resolved is not None and version is None:
        version, era = _era_of_trio(merged, kb, fk, specifier)
    if resolved is not None and version is None and dated is not None:
        known = [r.version for r in kb.torch_releases]
        version, era = _era_of_dates(merged, fk, specifier, (dated, known))
    if resolved is not None and version is None:
        version, era = _era_of_cuda(merged, resolved, kb, specifier)
    if resolved is None:
        for package in COMPANIONS:
            companion = merged.packages.get(package)
            if companion is not None and companion.exact is not None:
                release = kb.release_for_companion(package, Version(companion.exact.public))
                if release is not None:
                    version, specifier = release.version, f"=={release.version}"
                    break
    if resolved is None and version is None and dated is not None:
        # No torch in the files (a requirements.txt beside a README that installs it):
        # their pins still date them, as they date a bare torch. The newest release was
        # chosen otherwise, 2.7 for a 2021 repository.
        known = [r.version for r in kb.torch_releases]
        version, era = _era_of_dates(merged, fk, "", (dated, known))
    build, _ = _torch_build(merged, resolved)
    major = merged.fact(CUDA_MAJOR) if build is None else None
    python, _ = _python_wanted(merged)
    ceiling = python_ceiling(merged, fk)
    if python is None and ceiling is not None:
        python = f"<={ceiling[0]}"
    paper = PaperTorch(
        specifier=specifier,
        version=Version(version.public) if version is not None else None,
        build=build,
        python=python,
        torchvision="torchvision" in merged.packages,
        torchaudio="torchaudio" in merged.packages,
        era=era,
        cuda_major=int(major.value) if major is not None else None,
    )
    return paper, resolved


def _era_of_trio(
    merged: Merged, kb: KnowledgeBase, fk: ForeignKnowledge, specifier: str
) -> tuple[Version | None, str | None]:
    """A torch range (or no version) beside an exact torchvision/torchaudio pin: the torch
    release paired with that pin, when the range allows it (the files' own era). A
    nightly's pin (0.16.0.dev20230415) stands for the release it led to (0.16.0)."""
    for package in COMPANIONS:
        companion = merged.packages.get(package)
        if companion is None or companion.exact is None:
            continue
        pinned = Version(companion.exact.public)
        release = kb.release_for_companion(package, Version(pinned.base_version))
        if release is None:
            continue
        try:
            allowed = not specifier or SpecifierSet(specifier).contains(release.version, True)
        except InvalidSpecifier:
            allowed = False
        if not allowed:
            continue
        inside = f", in {specifier!r}" if specifier else ""
        if pinned.is_prerelease:
            led_to = eras.nightly_text(pinned, pinned.base_version, fk, torch=release.version)
            return release.version, f"{package}=={companion.exact} pins the era: {led_to}{inside}"
        return release.version, (
            f"{package}=={companion.exact} pins the era: torch {release.version} is the "
            f"release paired with it{inside}"
        )
    return None, None


def _era_of_dates(
    merged: Merged,
    fk: ForeignKnowledge,
    specifier: str,
    dates: tuple[eras.Dated, Sequence[Version]],
) -> tuple[Version | None, str | None]:
    """A torch range (or no version) in files whose newest pin the index dates: the newest
    torch published by that day, within the range and what the companion pins accept
    (``dates``: that day, and the torch releases gpuenv knows)."""
    dated, known = dates
    allowed = companion_bounds(merged, fk, known)
    nightly = next((f for f in merged.facts.get(PRE, ()) if f.value == "nightly"), None)
    led_to = eras.nightly_led_to(fk, dated, specifier) if nightly is not None else None
    if nightly is not None and led_to is not None:
        out = fk.torch_published(led_to)
        return led_to, (
            f"{nightly.origin.cite()} installs torch's nightly; on {dated.says()}, the "
            f"nightly led to {led_to} (published {out})"
        )
    found = eras.dated_release(fk, dated, specifier, allowed[0] if allowed else None)
    if found is None:
        return None, None
    version, later = found
    if later:
        out = fk.torch_published(version)
        return version, (
            # CogVideo: "the files' newest pin dates them to 2023-09-16 ..., before any
            # torch in '>=2.5.0'" read as a claim the ranges (2024) contradicted
            f"only exact pins date the files, and the newest, {dated.package} "
            f"{dated.version} ({dated.origin.where()}), was published "
            f"{dated.day.isoformat()}, before any torch in {specifier!r}: that range's "
            f"oldest release, {version} (published {out}), is taken"
        )
    bound = ""
    if allowed and eras.dated_release(fk, dated, specifier, None) != found:
        # generative-models: "the newest torch released by 2024-08-18 ... is 2.0.1" was
        # false; its triton==2.0.0 and torchdata==0.6.1 held torch there
        bound = f" among the releases {allowed[1]} accept"
    return version, (
        f"the newest torch released by {dated.says()}, is {version}{bound}"
        + (f", in {specifier!r}" if specifier else "")
    )


def _era_of_cuda(
    merged: Merged, resolved: Resolved, kb: KnowledgeBase, specifier: str
) -> tuple[Version | None, str | None]:
    """A torch range (or no version) in files that name a CUDA (cudatoolkit=11.3, a
    nvidia/cuda:11.3.1 base image): the newest release built for that CUDA, when the
    range allows it (the files' era)."""
    build, origin = _torch_build(merged, resolved)
    if build is None or not build.startswith("cu") or origin is None:
        return None, None
    try:
        allowed = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None, None
    built = [
        r.version
        for r in kb.torch_releases
        if r.build(build) is not None and allowed.contains(r.version, prereleases=True)
    ]
    if not built:
        return _before_knowledge(build, origin, kb, allowed)
    newest = max(built)
    return newest, (
        f"{origin.cite()} dates the files: torch {newest} is the newest release built for "
        f"{build}" + (f" in {specifier!r}" if specifier else "")
    )


def _before_knowledge(
    build: str, origin: Origin, kb: KnowledgeBase, allowed: SpecifierSet
) -> tuple[Version | None, str | None]:
    """A CUDA no release gpuenv knows was built for (cu100: a 2019 nightly image; the
    data starts at torch 1.7, built for 9.2, 10.1, 10.2, 11.0): the oldest release with a
    build for that CUDA or a later one is the files' era (the newest release was chosen,
    2.7 for tacotron2)."""
    try:
        cuda = CudaVersion.from_tag(build)
    except VersionFormatError:
        return None, None
    later = [
        r.version
        for r in kb.torch_releases
        if allowed.contains(r.version, prereleases=True)
        and any(b.cuda is not None and b.cuda >= cuda for b in r.builds)
    ]
    if not later:
        return None, None
    oldest = min(later)
    first = min(r.version for r in kb.torch_releases)
    return oldest, (
        f"{origin.cite()} dates the files: a {build} build predates the torch releases gpuenv "
        f"knows (they start at {first}); {oldest}, the oldest it knows with a build for "
        f"CUDA {cuda} or later, stands for that era"
    )


def era_caps(paper: PaperTorch, fk: ForeignKnowledge) -> list[Version]:
    """For a torch range with a floor: the releases above it whose API changes break code
    written before them (torch 2.0: torch._six; 2.6: torch.load's weights_only), ascending."""
    if paper.version is not None:
        return []
    floor = _range_floor(paper.specifier)
    if floor is None:
        return []
    return [c.since for c in fk.torch_changes if c.breaks and c.since > floor]


def companion_bounds(
    merged: Merged, fk: ForeignKnowledge, torch_versions: Sequence[Version] = ()
) -> tuple[str, str] | None:
    """The torch releases the exact companion pins accept (mmcv-full==1.7.0: torch>=1.8,<2.1),
    and those whose own pinned companion a requirement accepts (triton>=3.5.0: torch>=2.9.0,
    among ``torch_versions``), as one specifier, and the pins that say so; None when no pin
    bounds torch."""
    specs: list[str] = []
    who: list[str] = []
    for name, resolved in merged.packages.items():
        companion = fk.companion(moves.companion_name(name)) if name not in TRIO else None
        if companion is not None and companion.moves == "torch-pinned" and resolved.specifier:
            bound = moves.pinned_bound(companion, resolved.specifier, torch_versions)
            if bound is not None:
                specs.append(bound)
                who.append(f"{name}{resolved.specifier} (torch{bound})")
            continue
        exact = resolved.exact
        if companion is None or exact is None or companion.moves in ("unmanaged", "torch-pinned"):
            continue
        release = companion.release_of(Version(exact.public))
        if release is None or release.plain or not str(release.torch):
            continue
        specs.append(str(release.torch))
        who.append(f"{name}=={exact.public} (torch{release.torch})")
    if not specs:
        return None
    return ",".join(specs), ", ".join(who)


def _with_bound(
    allowed: tuple[str, str] | None, bound: TorchBound | None
) -> tuple[str, str] | None:
    """What the pins allow of torch, and the range the resolve check found one needs."""
    if bound is None:
        return allowed
    who = f"{bound.who} (torch{bound.specifier})"
    if allowed is None:
        return bound.specifier, who
    return f"{allowed[0]},{bound.specifier}", f"{allowed[1]}, {who}"


# --- torch, Python, the trio ------------------------------------------------------------


def _between_known_why(version: Version, kb: KnowledgeBase) -> str:
    """A release inside the known range that the data lacks (1.8.2, PyTorch's LTS release,
    served from an index of its own)."""
    known = [r.version for r in kb.torch_releases]
    below = max((v for v in known if v < version), default=None)
    above = min((v for v in known if v > version), default=None)
    return f"is not a release gpuenv knows (it knows {below} and {above} either side)"


def _outside_ranges(resolved: Resolved | None, torch: str) -> str:
    """The files' own torch ranges the chosen release falls outside, said where the move
    is explained (lerobot: uv.lock's 2.11.0 moved to 2.6.0 on a driver 550, and its
    pyproject.toml asks torch>=2.7,<2.12.0)."""
    broken = []
    for ask in resolved.asks if resolved is not None else ():
        if not ask.specifier or ask.specifier.startswith("=="):
            continue
        try:
            if SpecifierSet(ask.specifier).contains(torch, prereleases=True):
                continue
        except InvalidSpecifier:
            continue
        broken.append(ask.origin.cite() if ask.origin else f"torch{ask.specifier}")
    if not broken:
        return ""
    said = "; ".join(dict.fromkeys(broken))
    return f"; outside the files' own torch range ({said}): no release in it fits here"


def _minor_compat(
    kb: KnowledgeBase, plan: TargetPlan, specifier: str, *, pypi_only: bool = False
) -> str:
    """Where the strict driver rule moved torch off what the files ask and NVIDIA's CUDA
    minor-version compatibility would keep it: the spec line that opts in (DLR-RM/
    stable-baselines3's torch>=2.8 became 2.7.1 on an H100 with driver 550, and its own
    install_requires says >=2.8; the report did not say that 2.8's cu126 build runs there
    with driver-compat = "minor")."""
    hw = plan.hardware
    if hw.cpu or hw.driver is None or plan.driver_compat != DriverCompat.STRICT.value:
        return ""
    try:
        wanted = SpecifierSet(specifier)
    except InvalidSpecifier:
        return ""
    for release in kb.torch_releases:  # newest first
        if not wanted.contains(release.version, prereleases=True):
            continue
        builds = release.on(hw.platform).cuda_builds
        if pypi_only:  # only PyPI's own build can be had (lerobot: 2.11.0's cu126 could not)
            own = release.on(hw.platform).pypi_cuda_build()
            builds = (own,) if own is not None else ()
        for build in builds:
            covers = all(build.covering(cc) for cc in hw.compute_capabilities)
            floor = (
                kb.driver_floor(build.cuda, DriverCompat.MINOR, hw.platform) if build.cuda else None
            )
            if covers and floor is not None and hw.driver >= floor:
                return (
                    f'; with [stack] driver-compat = "minor" (CUDA minor-version '
                    f"compatibility) torch {release.version}'s {build.tag} build runs on driver "
                    f"{hw.driver}"
                )
    return ""


def _moved_torch_why(
    paper: PaperTorch,
    choice: Choice,
    kb: KnowledgeBase,
    fk: ForeignKnowledge,
    *,
    asked: bool = True,
) -> str:
    plan = choice.plan
    version = paper.version
    obstacle = f" ({choice.rejected[0]})" if choice.rejected else ""
    if version is None and not paper.specifier:
        chosen = (
            f"is the newest release that fits and that {choice.allowed_by} accepts"
            if choice.allowed_by
            else "is what the planner chose here"
        )
        # "pin no version" said the files asked for torch where they did not
        files = "the files pin no torch version" if asked else "nothing in the files asks for torch"
        return f"{files}; {plan.torch} {chosen}"
    if version is None:
        minor = _minor_compat(kb, plan, paper.specifier, pypi_only=choice.pypi_only)
        return (
            f"no release in {paper.specifier!r} fits this target{obstacle}; {plan.torch} does"
            + minor
        )
    if version.is_prerelease:
        return _nightly_why(version, choice, kb, fk)
    if kb.torch_release(version) is None:
        oldest = kb.torch_releases[-1].version
        newest = kb.torch_releases[0].version
        if version < oldest:
            edge = f"predates gpuenv's knowledge (it starts at {oldest})"
        elif version > newest:
            edge = f"is newer than gpuenv's knowledge (it ends at {newest})"
        else:
            edge = _between_known_why(version, kb)
        return f"torch {version} {edge}; {plan.torch} is the nearest known release that fits"
    if choice.step == "older":
        # the newest release between the two that minor-version compatibility would run
        nearer = f"<={version},>{plan.torch}"
        return (
            f"no build of {version} or any later release fits this target{obstacle}; "
            f"{plan.torch} does" + _minor_compat(kb, plan, nearer, pypi_only=choice.pypi_only)
        )
    first = choice.rejected[0] if choice.rejected else f"no torch {version} build fits this target"
    # the walk tries a later series' newest patch first (2.1.2 before 2.1.0): "the oldest
    # release after it" was false where an older patch of that series fits too
    landed = Version(plan.torch)
    which = (
        "the first later patch release"
        if (landed.major, landed.minor) == (version.major, version.minor)
        else "the newest release of the first later series"
    )
    # among PyPI's builds only (the PyTorch index unreachable), other builds of the series
    # between may run here: "whose builds do" said none did
    builds = "whose PyPI build does" if choice.pypi_only else "whose builds do"
    return f"{first}; {plan.torch} ({plan.cu_tag}) is {which} {builds}"


def _nightly_why(version: Version, choice: Choice, kb: KnowledgeBase, fk: ForeignKnowledge) -> str:
    """A pinned nightly (or other pre-release) moved to a release: the one it led to (its
    label's release, else the first gpuenv knows after it), dated where the label is."""
    base = Version(version.base_version)
    after = sorted(r.version for r in kb.torch_releases if r.version >= base)
    led_to = base if kb.torch_release(base) is not None or not after else after[0]
    if Version(choice.plan.torch) == led_to:
        return eras.nightly_text(version, str(led_to), fk, " that fits")
    text = eras.nightly_text(version, str(led_to), fk)
    first = choice.rejected[0] if choice.rejected else f"no torch {led_to} build fits this target"
    return f"{text}; {first}: {choice.plan.torch} is the nearest release that fits"


def _range_floor(specifier: str) -> Version | None:
    """The lowest release a range allows (``>=1.7.0`` -> 1.7.0), when it names one."""
    try:
        floors = [
            Version(s.version)
            for s in SpecifierSet(specifier)
            if s.operator in (">=", ">", "~=", "==") and not s.version.endswith(".*")
        ]
    except (InvalidSpecifier, InvalidVersion):
        return None
    return max(floors) if floors else None


def _range_ceiling(specifier: str) -> Version | None:
    """The release a range stops at (``<1.13`` -> 1.13), when it names one: a move past it
    crosses the API changes from there on."""
    try:
        ceilings = [
            Version(s.version)
            for s in SpecifierSet(specifier)
            if s.operator in ("<", "<=") and not s.version.endswith(".*")
        ]
    except (InvalidSpecifier, InvalidVersion):
        return None
    return min(ceilings) if ceilings else None


def _torch_risk(
    old: Version | None, new: Version, fk: ForeignKnowledge, merged: Merged
) -> tuple[int, str]:
    notes = ["numerics may differ"]
    if old is None:
        return MEDIUM, "; ".join(notes)
    base = Version(old.base_version)
    changes = _crossed(merged, fk, base, new) if new > base else []
    notes.extend(changes)
    risk = HIGH if new.major != base.major or changes else MEDIUM
    return risk, "; ".join(notes)


def _crossed(merged: Merged, fk: ForeignKnowledge, old: Version, new: Version) -> list[str]:
    """The API changes crossed moving torch from ``old`` to ``new``, as report notes.
    Where the repository's code was read, a change with a marker is said only where the
    code contains it, and where (maskrcnn-benchmark's nms.cu includes THC/THC.h;
    "torch._six was removed" was said of repositories that never used it)."""
    read = bool(merged.facts.get(CODE_READ))
    uses = {f.value: f.origin for f in merged.facts.get(CODE_USES, ())}
    notes = []
    for change in fk.changes_between(old, new):
        where = uses.get(change.marker) if change.marker else None
        if change.marker and where is None and (read or change.code_only):
            continue
        note = f"API change in {change.since}: {change.what}"
        notes.append(f"{note} (the code has it: {where.cite()})" if where else note)
    return notes


def _torch_entries(
    d: Decision,
    merged: Merged,
    paper: PaperTorch,
    choice: Choice,
    ctx: tuple[KnowledgeBase, ForeignKnowledge],
) -> None:
    kb, fk = ctx
    plan = choice.plan
    resolved = merged.packages.get("torch")
    build, build_origin = _torch_build(merged, resolved)
    origin = resolved.ask.origin if resolved else build_origin
    release = kb.torch_release(paper.version) if paper.version else None
    implied = any(
        f.origin == build_origin and f.note and f.note.startswith(IMPLIED)
        for f in merged.facts.get(TORCH_BUILD, ())
    )
    if build is not None and implied and release is not None and release.build(build) is None:
        d.add(
            Entry(
                ASSUMPTION,
                "torch",
                f"the base image's CUDA ({build}) is not a build of torch {paper.version}: "
                "pip installed one of torch's own builds on it",
                origin=build_origin,
            )
        )
        build, build_origin = None, None
    if build is None and release is not None and release.pypi_default:
        build = release.pypi_default
        d.add(
            Entry(
                ASSUMPTION,
                "torch",
                f"no CUDA build named for torch {paper.version}: assumed "
                f"PyPI's default build of that release ({build})",
                origin=origin,
            )
        )
    # An empty requirements.txt, an ARG-only Dockerfile: torch is the planner's, not asked
    asked = resolved is not None or paper.version is not None or bool(paper.specifier)
    was = (
        f"{paper.version}+{build}"
        if paper.version and build
        else (str(paper.version) if paper.version else (paper.specifier or "any"))
    )
    was = was if asked else "not asked"
    now = f"{plan.torch}+{plan.cu_tag}"
    same_release = paper.version is not None and paper.version == Version(plan.torch)
    if same_release and (build is None or build == plan.cu_tag):
        d.add(Entry(KEPT, "torch", "runs on this target as built", origin=origin, was=was, now=now))
    elif same_release:
        if plan.cu_tag == "cpu":
            why, risk, text = (
                "the target has no GPU: torch's CPU build",
                MEDIUM,
                ("CUDA-only code (.cuda(), custom kernels) fails on CPU"),
            )
        else:
            obstacle = _build_obstacle(kb, paper.version, build or "", plan)
            if obstacle is not None:
                why = f"the {build} build cannot run here ({obstacle}); {plan.cu_tag} can"
            else:  # it runs on this GPU: something else of the plan ruled it out
                # (PyPI's default, assumed where no build is named, is kept wherever it
                # runs: torch_choice tries it first)
                refusal = _build_refusal(kb, paper.version, build or "", plan, choice.rejected)
                why = f"the {build} build runs on this GPU but {refusal}; {plan.cu_tag} does"
            risk, text = LOW, "numerics may differ slightly (other CUDA and cuDNN kernels)"
        d.add(
            Entry(
                CHANGED,
                "torch",
                why,
                origin=build_origin or origin,
                was=was,
                now=now,
                risk=risk,
                risk_text=text,
            )
        )
    elif (
        paper.version is None
        and paper.specifier
        and SpecifierSet(paper.specifier).contains(plan.torch)
    ):
        d.add(_range_entry(paper, choice, ctx, origin, now, merged))
    else:
        old = paper.version or _range_floor(paper.specifier) or _range_ceiling(paper.specifier)
        risk, text = _torch_risk(old, Version(plan.torch), fk, merged)
        # an exact pin moved (a lock file's) past a range another file declares
        outside = _outside_ranges(resolved, plan.torch) if paper.version is not None else ""
        if outside:  # the project says it needs another torch: expect it to fail
            declared = "outside the torch range the project declares: code may fail"
            risk, text = HIGH, f"{declared}; {text}" if text else declared
        d.add(
            Entry(
                CHANGED,
                "torch",
                _moved_torch_why(paper, choice, kb, fk, asked=asked) + outside,
                origin=origin,
                was=was,
                now=now,
                risk=risk,
                risk_text=text,
            )
        )
    if paper.era is not None:
        _era_entry(d, paper.era, paper.specifier, fk, merged)
    if _nightly(paper, merged):
        pre = merged.fact(PRE)
        d.add(
            Entry(
                UNREPRODUCIBLE,
                "torch",
                "nightly and pre-release builds are removed from "
                "PyTorch's indexes after a while: this build cannot be had again",
                origin=origin or (pre.origin if pre else None),
                was=str(paper.version)
                if paper.version is not None and paper.version.is_prerelease
                else "a nightly",
                risk=HIGH,
            )
        )


def _python_held(kb: KnowledgeBase, paper: PaperTorch, choice: Choice) -> bool:
    """A newer release of the range (below its API cap) has no wheels for the plan's
    Python: the Python held torch back (sczhou/CodeFormer's README names Python 3.8, and
    torch 2.5.1 has no cp38 wheels, so an H100 got 2.4.1, "the newest release in
    '>=1.7.1' that fits below 2.6.0", which 2.5.1 is too)."""
    spec, torch = SpecifierSet(paper.specifier), Version(choice.plan.torch)
    for release in kb.torch_releases:
        version = Version(str(release.version))
        if version <= torch or not spec.contains(version):
            continue
        if choice.below is not None and version >= choice.below:
            continue
        if not release.python.contains(choice.plan.python):
            return True
    return False


def _range_entry(
    paper: PaperTorch,
    choice: Choice,
    ctx: tuple[KnowledgeBase, ForeignKnowledge],
    origin: Origin | None,
    now: str,
    merged: Merged,
) -> Entry:
    """A torch range kept: the newest release in it that fits, within what the other
    pins allow and below the first API change that breaks older code."""
    kb, fk = ctx
    floor = _range_floor(paper.specifier)
    changes = _crossed(merged, fk, floor, Version(choice.plan.torch)) if floor is not None else []
    why = f"the newest release in {paper.specifier!r} that fits"
    if _python_held(kb, paper, choice):
        why += f" on Python {choice.plan.python}"
    if choice.allowed_by:
        why += f" and that {choice.allowed_by} accepts"
    if choice.below is not None:
        broken = next(c.what for c in fk.torch_changes if c.since == choice.below)
        why += f" below {choice.below}, whose API change breaks older code ({broken})"
    return Entry(
        KEPT,
        "torch",
        why,
        origin=origin,
        was=paper.specifier,
        now=now,
        risk=MEDIUM if changes else NONE,
        risk_text="; ".join(changes) or None,
    )


def _era_entry(d: Decision, era: str, specifier: str, fk: ForeignKnowledge, merged: Merged) -> None:
    """The torch entry of a range its era resolved says so, from the range, and names the
    API changes crossed from the range's floor (``torch>=1.7`` dated to 2025: 2.0, 2.6)."""
    at = next(
        i for i, e in enumerate(d.entries) if e.package == "torch" and e.kind in (KEPT, CHANGED)
    )
    entry = d.entries[at]
    entry = replace(entry, why=f"{era}; {entry.why}", was=specifier or "any")
    floor = _range_floor(specifier)
    notes = _crossed(merged, fk, floor, Version(d.plan.torch)) if floor is not None else []
    notes = [n for n in notes if n not in (entry.risk_text or "")]
    if notes:
        text = "; ".join([*([entry.risk_text] if entry.risk_text else []), *notes])
        entry = replace(entry, risk=max(entry.risk, MEDIUM), risk_text=text)
    d.entries[at] = entry


def _nightly(paper: PaperTorch, merged: Merged) -> bool:
    """The paper's torch was a nightly (or another pre-release build): a pre-release pin,
    or an unpinned torch (whatever release its era gave) installed with ``--pre`` or from
    the nightly index."""
    if paper.version is not None and paper.version.is_prerelease:
        return True
    resolved = merged.packages.get("torch")
    if paper.version is not None and (resolved is None or resolved.exact is not None):
        return False
    pre = merged.facts.get(PRE, ())
    return any(f.value == "nightly" for f in pre) or bool(pre and "torch" in merged.packages)


def _build_obstacle(
    kb: KnowledgeBase, version: Version | None, tag: str, plan: TargetPlan
) -> str | None:
    """Why the paper's build of ``version`` cannot run on the plan's hardware."""
    hw = plan.hardware
    release = kb.torch_release(version) if version else None
    release = release.on(hw.platform) if release else None
    build = release.build(tag) if release else None
    if build is None:
        return f"torch {version} has no {tag} build for {hw.platform}" if release else None
    missing = [cc.sm for cc in sorted(set(hw.compute_capabilities)) if build.covering(cc) is None]
    if missing:
        return f"its arch list ({build.arch_text}) has no {', '.join(missing)} kernels"
    floor = kb.driver_floor(build.cuda, DriverCompat.STRICT) if build.cuda else None
    if floor is not None and hw.driver is not None and hw.driver < floor:
        return f"it needs driver >= {floor}; the target has {hw.driver}"
    return None


def _build_refusal(
    kb: KnowledgeBase,
    version: Version | None,
    tag: str,
    plan: TargetPlan,
    rejected: tuple[str, ...],
) -> str:
    """Why the paper's build, which runs on the plan's GPU, was not chosen: its wheels
    stop short of the plan's Python (torch 1.13.1's cu116 wheels end at 3.10), else what
    the planner said."""
    release = kb.torch_release(version) if version else None
    build = release.on(plan.hardware.platform).build(tag) if release else None
    if build is not None and build.python is not None and not build.python.contains(plan.python):
        return f"has no wheels for Python {plan.python} (they cover {spec_text(build.python)})"
    return f"the planner ruled it out ({rejected[0]})" if rejected else "the plan ruled it out"


def _python_entry(
    d: Decision, merged: Merged, plan: TargetPlan, ctx: tuple[KnowledgeBase, ForeignKnowledge]
) -> None:
    kb, fk = ctx
    wanted, fact = _python_wanted(merged)
    origin = fact.origin if fact else None
    release = kb.torch_release(plan.torch)
    supports = spec_text(release.python) if release else "?"
    unverified = bool(fact and fact.note and "unverified" in fact.note)
    if wanted is None:
        ceiling = python_ceiling(merged, fk, (plan.torch, plan.python))
        held = f" and {ceiling[1]} installs on" if ceiling else ""
        text = (
            f"no Python named in the files: Python {plan.python}, "
            f"the newest torch {plan.torch} supports{held}"
        )
        if d.python_why:
            text = (
                f"no Python named in the files: Python {plan.python}, the newest torch "
                f"{plan.torch} supports where {d.python_why}"
            )
        d.add(Entry(ASSUMPTION, "python", text))
        d.stack_comments["python"] = text
        return
    inside = wanted == plan.python
    if not wanted[:1].isdigit():
        try:
            inside = SpecifierSet(wanted).contains(plan.python)
        except InvalidSpecifier:
            inside = False
    if inside:
        entry = Entry(
            KEPT,
            "python",
            f"torch {plan.torch} supports it" + (f", and {d.python_why}" if d.python_why else ""),
            origin=origin,
            was=wanted,
            now=plan.python,
            unverified=unverified,
        )
    else:
        entry = Entry(
            CHANGED,
            "python",
            (
                f"torch {plan.torch} supports Python {supports}, but gpuenv installs "
                f"{plan.python} and later: {plan.python} is the nearest it can"
                if release is not None and _skips_supported(wanted, release.python)
                else f"torch {plan.torch} supports Python {supports}; {plan.python} is the nearest"
            )
            + (f" where {d.python_why}" if d.python_why else ""),
            origin=origin,
            was=wanted,
            now=plan.python,
            risk=MEDIUM,
            risk_text="other packages' pins may not install on it",
            unverified=unverified,
        )
    d.add(entry)
    d.stack_comments["python"] = entry.comment()


def _skips_supported(wanted: str, supported: SpecifierSet) -> bool:
    """Whether torch supports a Python nearer to ``wanted`` than any gpuenv installs
    (3.6 wanted, torch supports 3.7, gpuenv starts at 3.8)."""
    from gpuenv.plan import KNOWN_PYTHONS

    match = re.match(r"3\.(\d+)", wanted)
    if match is None:
        return False
    first = int(KNOWN_PYTHONS[0].split(".")[1])
    between = range(int(match.group(1)), first)
    return any(supported.contains(f"3.{minor}") for minor in between)


def _trio_entries(d: Decision, merged: Merged, plan: TargetPlan, kb: KnowledgeBase) -> None:
    release = kb.torch_release(Version(plan.torch))
    for package in COMPANIONS:
        resolved = merged.packages.get(package)
        now = getattr(plan, package)
        if resolved is None:
            d.stack[package] = False
            d.stack_comments[package] = "not in the paper's environment"
            continue
        exact = resolved.exact
        if exact is not None and now is not None and release is not None:
            pinned = Version(exact.public)
            if pinned in release.paired(package):  # 0.11.0 beside 0.11.1: made for it too
                now = str(pinned)
        d.stack[package] = now or False
        was = str(Version(exact.public)) if exact else (resolved.specifier or "any")
        if exact is not None and now is not None and Version(exact.public) == Version(now):
            entry = Entry(
                KEPT,
                package,
                f"released with torch {plan.torch}",
                origin=resolved.ask.origin,
                was=was,
                now=now,
            )
        else:
            torch_kept = any(
                e.package == "torch"
                and (e.kind == KEPT or (e.was or "").split("+")[0] == plan.torch)
                for e in d.entries
            )
            if torch_kept and exact is not None:
                why = f"torch {plan.torch} pairs with {package} {now}, not {was}"
            elif torch_kept:  # unpinned, or a range: nothing moved
                why = f"the release paired with torch {plan.torch}"
            else:
                why = (
                    f"the release paired with torch {plan.torch} "
                    "(torch, torchvision and torchaudio move in lock step)"
                )
            entry = Entry(
                CHANGED,
                package,
                why,
                origin=resolved.ask.origin,
                was=was,
                now=now or "none",
                risk=LOW if exact is None else MEDIUM,
            )
        d.add(entry)
        d.stack_comments[package] = entry.comment()


# --- everything else --------------------------------------------------------------------


_GIT_LOCKABLE = ("git+https://", "git+ssh://")


def git_ref(url: str) -> str | None:
    """The ``@ref`` of a ``git+...`` URL (None: the default branch)."""
    reference = re.search(r"@([^#@/]+)(#|$)", url.split("+", 1)[-1].split("://", 1)[-1])
    return reference.group(1) if reference else None


def _git_kind(ref: str | None) -> str:
    """What a git URL's ref names: "commit" (fixed), "tag" (fixed unless moved) or
    "branch" (none: the default branch), whose commit the lock takes as it is then."""
    if ref and re.fullmatch(r"[0-9a-f]{7,40}", ref):
        return "commit"
    if ref and re.fullmatch(r"v?\d+(\.\d+)*([.-]?\w+)?", ref) and ref not in _BRANCHES:
        return "tag"
    return "branch"


def _git(d: Decision, resolved: Resolved) -> None:
    """A git requirement is kept and the lock pins it (``name @ git+https://...@ref`` is
    locked at the commit the ref resolves to, and built at install): a commit exactly, a
    tag as it is today, a branch or no ref at today's commit, with a warning."""
    url = moves.pip_url(resolved.ask.url or "")  # #egg= dropped: the name is written here
    ref = git_ref(url)
    line = f"{resolved.name} @ {url}"
    origin = resolved.ask.origin
    if not url.startswith(_GIT_LOCKABLE):
        entry = Entry(
            UNREPRODUCIBLE,
            resolved.name,
            "only git+https:// and git+ssh:// sources can be locked: install it into the "
            f"prefix after `gpuenv install` (gpuenv run -- pip install '{url}')",
            origin=origin,
            was=url,
            risk=HIGH,
        )
        d.add(entry)
        d.left_out.append(Line(line, f"{origin.where()}: {entry.why}"))
        return
    kind = _git_kind(ref)
    if kind == "commit":
        entry = Entry(
            KEPT,
            resolved.name,
            f"a git checkout at commit {ref}: the lock pins it and install builds it",
            origin=origin,
            was=url,
            now=url,
            risk=LOW,
        )
    elif kind == "tag":
        entry = Entry(
            KEPT,
            resolved.name,
            f"a git checkout at tag {ref}: the lock pins the commit the tag names when "
            "it is written (a tag can be moved)",
            origin=origin,
            was=url,
            now=url,
            risk=LOW,
        )
    else:
        where = f"branch {ref}" if ref else "the default branch"
        entry = Entry(
            CHANGED,
            resolved.name,
            f"{where} of the repository has moved since the paper and no commit is "
            "recorded: the lock freezes the commit it has when written; pin a commit "
            "from the paper's date if you know it",
            origin=origin,
            was=url,
            now=f"{where} at lock time",
            risk=HIGH,
            risk_text="another revision of the code than the paper's",
        )
    d.add(entry)
    d.pip.append(Line(line, entry.comment() if entry.kind != KEPT else origin.cite()))


_BRANCHES = frozenset({"main", "master", "dev", "develop", "trunk", "stable", "latest"})


def _requirement_of(resolved: Resolved, specifier: str | None = None) -> str:
    ask = resolved.ask
    extras = f"[{','.join(ask.extras)}]" if ask.extras else ""
    marker = f"; {ask.marker}" if ask.marker else ""
    return (
        f"{resolved.name}{extras}{resolved.specifier if specifier is None else specifier}{marker}"
    )


def _python_floor(resolved: Resolved, python: str, fk: ForeignKnowledge) -> Entry | None:
    floor = fk.python_floor(resolved.name, python)
    exact = resolved.exact
    if floor is None or exact is None or exact >= floor.version:
        return None
    return Entry(
        CHANGED,
        resolved.name,
        f"{exact} has no wheels for Python {python}; {floor.version} is the oldest that has",
        origin=resolved.ask.origin,
        was=str(exact),
        now=str(floor.version),
        risk=MEDIUM,
        risk_text="another release: behaviour may differ",
        unverified=floor.fact.unverified,
    )


def _bound_origin(resolved: Resolved) -> Origin:
    """Where the version written was said: the winning ask's line, or, where it names no
    version and another file's or group's does (FastChat: "openai" in one extra, "openai<1"
    in another, written "openai<1"), that line."""
    if resolved.ask.specifier or not resolved.specifier:
        return resolved.ask.origin
    return next((a.origin for a in resolved.asks[1:] if a.specifier), resolved.ask.origin)


def _plain(d: Decision, resolved: Resolved, fk: ForeignKnowledge) -> None:
    ask = resolved.ask
    if ask.url and ask.url.startswith(("git+", "hg+", "svn+", "bzr+")):
        _git(d, resolved)
        return
    if ask.conda_only:
        spec = resolved.specifier.removeprefix("==").removesuffix(".*") or "*"
        # "colmap=3.9.1", but a range in conda's own form: "colmap >=3.9.1,<3.10"
        text = f"={spec}" if spec[:1].isdigit() else f" {spec}"
        d.conda.append(
            Line(f"{resolved.name}{text}" if spec != "*" else resolved.name, ask.origin.cite())
        )
        d.add(
            Entry(
                KEPT, resolved.name, "a conda-only package", origin=ask.origin, was=spec, now=spec
            )
        )
        return
    moved = _wheel_move(d, resolved, fk) if not ask.url else None
    if moved is not None:
        d.add(moved)
        if moved.kind == CHANGED:
            d.pip.append(Line(_requirement_of(resolved, f"=={moved.now}"), moved.comment()))
        elif moved.kind == NEEDS_BUILD:
            d.pip.append(Line(_requirement_of(resolved), moved.comment()))
        else:
            d.left_out.append(Line(_requirement_of(resolved), f"{ask.origin.where()}: {moved.why}"))
        return
    floor = _python_floor(resolved, d.plan.python, fk)
    if floor is not None:
        d.add(floor)
        d.pip.append(Line(_requirement_of(resolved, f"=={floor.now}"), floor.comment()))
        return
    if ask.url and not resolved.specifier:
        entry = Entry(
            UNREPRODUCIBLE,
            resolved.name,
            "a URL that names no version: what it serves has likely changed since the paper",
            origin=ask.origin,
            was=ask.url,
            risk=HIGH,
        )
        d.add(entry)
        d.left_out.append(
            Line(f"{resolved.name} @ {ask.url}", f"{ask.origin.where()}: {entry.why}")
        )
        return
    if ask.url:
        _direct_url(d, resolved)
        return
    if ask.inferred is not None and resolved.specifier and len(resolved.asks) == 1:
        # gpuenv's own bound (setuptools<82 for pkg_resources): a change, not the paper's
        entry = Entry(
            CHANGED,
            resolved.name,
            ask.inferred,
            origin=ask.origin,
            was="not asked",
            now=resolved.specifier,
            risk=LOW,
        )
    else:
        entry = Entry(
            KEPT,
            resolved.name,
            "a pre-release pin" if ask.pre else "as pinned",
            origin=_bound_origin(resolved),
            was=resolved.specifier or "any",
            now=resolved.specifier or "any",
            risk=LOW if ask.pre else NONE,
        )
    d.add(entry)
    d.pip.append(Line(_requirement_of(resolved), entry.comment()))


def _direct_url(d: Decision, resolved: Resolved) -> None:
    """A wheel or source archive URL whose file name gives its version: that version
    from the index when the URL is one of a package index's files. Anywhere else the URL
    is kept: a private host's ``utils-1.0.2.tar.gz`` is not the index's ``utils``
    (``requirements.index_file``), and a local version (Time-Series-Library's
    ``mamba_ssm-2.2.6.post3+cu12torch2.5cxx11abiFALSE-...whl``, a release asset) is on
    no index: its pin failed every resolve. (A ``+cuXYZ`` label is a torch build, split
    off by the reader: the public version stays.)"""
    ask = resolved.ask
    if "+" in resolved.specifier:
        version = resolved.specifier.lstrip("=")
        _url_kept(d, resolved, f"{version} is a local version, which no index serves")
        return
    if not index_file(ask.url or ""):
        _url_kept(
            d,
            resolved,
            f"it is no package index's file, and the index's {resolved.name} may be another "
            "project",
        )
        return
    entry = Entry(
        CHANGED,
        resolved.name,
        "a direct URL: the same version from the index",
        origin=ask.origin,
        was=ask.url,
        now=resolved.specifier,
        risk=LOW,
    )
    d.add(entry)
    d.pip.append(Line(_requirement_of(resolved), entry.comment()))


def _url_kept(d: Decision, resolved: Resolved, reason: str) -> None:
    """``name @ URL`` written as the files have it (``_no_credentials`` strips a token)."""
    ask = resolved.ask
    from gpuenv._redact import redact_url

    url = moves.pip_url(ask.url or "")
    extras = f"[{','.join(ask.extras)}]" if ask.extras else ""
    marker = f" ; {ask.marker}" if ask.marker else ""
    shown = redact_url(url)
    d.add(Entry(KEPT, resolved.name, "a direct URL", origin=ask.origin, was=shown, now=shown))
    why = f"{resolved.name} is installed from its URL: {reason}"
    d.add(Entry(ASSUMPTION, resolved.name, why, origin=ask.origin))
    d.pip.append(Line(f"{resolved.name}{extras} @ {url}{marker}", ask.origin.cite()))


_LEADING_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _line_of(d: Decision, name: str) -> int | None:
    """The index of the written pip line that requires ``name`` (names compared
    normalised), or None. By the whole name: numpy's line is not numpy-quaternion's,
    which a prefix match replaced with numpy<2 (dust3r lost numpy-quaternion)."""
    wanted = normalize_name(name)
    for i, line in enumerate(d.pip):
        found = _LEADING_NAME.match(line.text)
        if found is not None and normalize_name(found.group(1)) == wanted:
            return i
    return None


def _constraint_breaks_pin(d: Decision, resolved: Resolved, constraint: TorchConstraint) -> None:
    """An exact pin the chosen torch rules out (numpy==2.0.1 with torch 2.1): replaced by
    the constraint's range, the newest release in it chosen by the lock."""
    index = _line_of(d, resolved.name)
    now = str(constraint.requires)
    entry = Entry(
        CHANGED,
        resolved.name,
        f"{constraint.why}; the lock takes the newest release in {now!r}",
        origin=resolved.ask.origin,
        was=str(resolved.exact),
        now=now,
        risk=MEDIUM,
        risk_text="another release: behaviour may differ",
        unverified=constraint.fact.unverified,
    )
    d.entries = [e for e in d.entries if not (e.package == resolved.name and e.kind == KEPT)]
    d.add(entry)
    line = Line(_requirement_of(resolved, now), entry.comment())
    if index is None:
        d.pip.append(line)
    else:
        d.pip[index] = line


def _nearest(
    resolved: Resolved, constraint: TorchConstraint, python: str, fk: ForeignKnowledge
) -> tuple[Version | None, str, bool]:
    """The nearest release above an exact pin that a companion's requirement allows: its
    floor, or the oldest release with wheels for ``python`` when that is newer; None when
    the data cannot name one (the pin is above the floor, or the floor is excluded). With
    the sentence that says why, and whether a fact it rests on is unverified."""
    exact = resolved.exact
    floors = [Version(s.version) for s in constraint.requires if s.operator in (">=", "==")]
    nearest = max(floors, default=None)
    why = f"{constraint.why}; {nearest} is the nearest release that satisfies it"
    wheels = fk.python_floor(resolved.name, python)
    if nearest is not None and wheels is not None and wheels.version > nearest:
        nearest = wheels.version
        why = (
            f"{constraint.why}; {nearest} is the nearest release that satisfies it with "
            f"wheels for Python {python}"
        )
    if (
        nearest is None
        or exact is None
        or nearest < exact
        or not constraint.requires.contains(nearest)
    ):
        return None, "", False
    return nearest, why, bool(wheels and wheels.fact.unverified)


def _companion_floor(
    d: Decision, resolved: Resolved, constraint: TorchConstraint, fk: ForeignKnowledge
) -> None:
    """An exact pin below what the paired companion's wheels require (Pillow 5.2.0 beside
    a torchvision that requires pillow>=5.3.0): moved to the nearest release that satisfies
    it, the requirement's floor or, when newer, the oldest release with wheels for the
    chosen Python. Ranges are left to the lock, which reads the companion's metadata."""
    exact = resolved.exact
    if exact is None or constraint.requires.contains(exact, prereleases=True):
        return
    nearest, why, wheels = _nearest(resolved, constraint, d.plan.python, fk)
    if nearest is None:  # one entry: the Python floor's move, if any, is replaced
        d.entries = [e for e in d.entries if e.package != resolved.name]
        _constraint_breaks_pin(d, resolved, constraint)
        return
    entry = Entry(
        CHANGED,
        resolved.name,
        why,
        origin=resolved.ask.origin,
        was=str(exact),
        now=str(nearest),
        risk=MEDIUM,
        risk_text="another release: behaviour may differ",
        unverified=constraint.fact.unverified or wheels,
    )
    d.entries = [e for e in d.entries if e.package != resolved.name]
    d.add(entry)
    line = Line(_requirement_of(resolved, f"=={nearest}"), entry.comment())
    index = _line_of(d, resolved.name)
    if index is None:
        d.pip.append(line)
    else:
        d.pip[index] = line


def _bounded_below(asked: str, requires: SpecifierSet) -> bool:
    """Whether ``asked`` already stays below every ``<X`` of ``requires`` (and ``requires``
    is nothing but such bounds): the constraint adds nothing to it."""
    ceilings = [Version(s.version) for s in requires if s.operator == "<"]
    if not ceilings or len(ceilings) != len(list(requires)):
        return False
    return excludes(asked, min(ceilings))


def _constraints(d: Decision, merged: Merged, fk: ForeignKnowledge) -> None:
    """Constraints the chosen torch puts on other packages (numpy < 2 before torch 2.3)."""
    for constraint in fk.constraints_for(Version(d.plan.torch)):
        resolved = merged.packages.get(constraint.package)
        if constraint.pins_only and (resolved is None or resolved.exact is None):
            continue  # torch's wheels declare it: the lock finds the release
        if constraint.asked_only and resolved is None:
            continue  # nothing asks for it: nothing to bound
        if constraint.beside is not None:
            if constraint.beside in merged.packages and resolved is not None:
                _companion_floor(d, resolved, constraint, fk)
            continue
        if resolved is not None and resolved.exact is not None:
            if constraint.requires.contains(resolved.exact, prereleases=True):
                continue  # an exact pin the constraint allows: kept
            _constraint_breaks_pin(d, resolved, constraint)
            continue
        if resolved is not None and _bounded_below(resolved.specifier, constraint.requires):
            continue  # transformers>=4.36,<4.40 beside torch 2.2: already below 5.1
        _bound(
            d,
            constraint.package,
            resolved,
            constraint.requires,
            Entry(CHANGED, constraint.package, constraint.why, risk=LOW),
            unverified=constraint.fact.unverified,
        )


def _bound(
    d: Decision,
    package: str,
    resolved: Resolved | None,
    requires: SpecifierSet,
    entry: Entry,
    *,
    unverified: bool,
) -> None:
    """``package`` written with a bound of gpuenv's own (``requires`` and what the files
    asked), as the change ``entry`` says: its line replaced, or added where the files
    name it nowhere; the entry's "kept" twin dropped."""
    asked = resolved.specifier if resolved is not None else ""
    now = str(SpecifierSet(asked) & requires)
    entry = replace(
        entry,
        origin=resolved.ask.origin if resolved is not None else None,
        was=(asked or "any") if resolved is not None else "not asked",
        now=now,
        unverified=unverified,
    )
    d.entries = [e for e in d.entries if not (e.kind == KEPT and e.package == package)]
    d.add(entry)
    line = Line(f"{package}{now}", entry.comment())
    index = _line_of(d, package)
    if index is None:
        d.pip.append(line)
    else:
        d.pip[index] = line


def _companion_target(plan: TargetPlan, kb: KnowledgeBase) -> moves.Target:
    from gpuenv.builds.model import compiled_arch, nvcc_arch_max

    cc = None if plan.hardware.cpu else plan.hardware.min_cc
    # what a build compiles for this GPU with torch's nvcc (an older nvcc cannot target
    # a newer GPU: an RTX 4090 with CUDA 11.7 gets sm_86 code)
    compiled = (
        compiled_arch(str(cc), nvcc_arch_max(kb, plan.cuda), plan.arch_list)
        if cc is not None and plan.cuda is not None
        else None
    )
    return moves.Target(Version(plan.torch), plan.cu_tag, plan.cuda, cc, compiled)


def _packages(d: Decision, merged: Merged, fk: ForeignKnowledge, kb: KnowledgeBase) -> None:
    target = _companion_target(d.plan, kb)
    frameworks = [  # unmanaged frameworks in the files: always left out
        c
        for n in merged.packages
        if (c := fk.companion(moves.companion_name(n))) is not None and c.moves == "unmanaged"
    ]
    for name, resolved in merged.packages.items():
        if name in TRIO:
            continue
        companion = fk.companion(moves.companion_name(name))
        framework = (
            next((f for f in frameworks if any(fnmatchcase(name, a) for a in f.addons)), None)
            if companion is None
            else None
        )
        if framework is not None:  # tensorflow-datasets beside a tensorflow left out
            entry = Entry(
                UNMANAGED_ENTRY,
                name,
                f"left out of the spec: an add-on of {framework.name} (it imports it), "
                f"which is left out",
                origin=resolved.ask.origin,
                was=resolved.specifier or "any",
                risk=MEDIUM,
            )
            d.add(entry)
            d.left_out.append(Line(resolved.ask.requirement_text(), entry.comment()))
            continue
        if companion is None or _plain_release(companion, resolved):
            _plain(d, resolved, fk)
            continue
        successor = fk.companion(companion.successor) if companion.successor else None
        family = _family_bound(name, merged, fk) if resolved.exact is None else ""
        result = moves.move(companion, resolved, target, successor, family)
        d.add(result.entry)
        comment = result.entry.comment()
        if result.requirement is not None:
            d.pip.append(Line(result.requirement, comment))
        elif companion.moves != "torch-pinned":
            d.left_out.append(Line(resolved.ask.requirement_text(), comment))
        if result.needs_toolkit and target.cc is not None:
            d.needs_toolkit.append(f"{name} is compiled against torch")
    _constraints(d, merged, fk)
    _family(d, merged, fk)


def _family_bound(name: str, merged: Merged, fk: ForeignKnowledge) -> str:
    """What the files' pinned family members accept of companion ``name`` (mmdet 2.24.0:
    mmcv-full>=1.3.17,<=1.6.0), as one specifier; "" when none pins a version."""
    bounds = []
    for rule in fk.companion_requirements:
        member = merged.packages.get(rule.package) if rule.requires == name else None
        exact = member.exact if member is not None else None
        if exact is not None and rule.version.contains(exact, prereleases=True):
            bounds.append(str(rule.specifier))
    return ",".join(bounds)


def _gpu_only(d: Decision, fk: ForeignKnowledge) -> None:
    """On a CPU target, a written package that needs an NVIDIA GPU is named, high risk."""
    if not d.plan.hardware.cpu:
        return
    for i, entry in enumerate(d.entries):
        found = fk.gpu_only_for(entry.package) if entry.package else None
        # a build too: cuml-cu11 "builds from its source archive" on a CPU target
        if found is None or entry.kind not in (KEPT, CHANGED, NEEDS_BUILD) or entry.risk >= HIGH:
            continue
        d.entries[i] = replace(
            entry,
            risk=HIGH,
            risk_text=f"{found.what}: the target has no GPU",
            unverified=entry.unverified or found.fact.unverified,
        )


def _old_sdists(d: Decision, fk: ForeignKnowledge) -> None:
    """Old sdists that need an old setuptools: a [pip.build.<name>] table each, its
    comment saying why (``importers.old_sdists``)."""
    pip = [line.text for line in d.pip]
    d.builds = old_sdists.apply(pip, d.entries, fk, gpu=not d.plan.hardware.cpu)


def _plain_release(companion: Companion, resolved: Resolved) -> bool:
    """A pin of releases that are not tied to torch (mmcv 1.x, the pure-Python "lite"
    package): an ordinary requirement."""
    version = resolved.exact
    release = companion.release_of(Version(version.public)) if version else None
    return release is not None and release.plain


def _family(d: Decision, merged: Merged, fk: ForeignKnowledge) -> None:
    """A family member whose written version another member does not accept (mmdet 2.20
    kept beside mmcv-full moved to 1.7): the kept member's entry says so, high risk. A
    companion written beside its successor (mmcv-full 1.7 beside mmcv moved to 2.0): both
    install the same importable package, and its entry says to keep one."""
    present = {e.package for e in d.entries if e.now and e.kind != UNREPRODUCIBLE}
    for name in merged.packages:
        companion = fk.companion(moves.companion_name(name))
        successor = companion.successor if companion else None
        if companion is None or successor is None or not {name, successor} <= present:
            continue
        why = companion.note or f"{name} became {successor}"
        for i, entry in enumerate(d.entries):
            if entry.package == name and entry.now:
                d.entries[i] = replace(
                    entry,
                    risk=HIGH,
                    risk_text=(
                        f"{name} and {successor} are both written and install the same "
                        f"importable package ({why}): keep one"
                    ),
                )
    _requirements(d, merged, fk)


def _requirements(d: Decision, merged: Merged, fk: ForeignKnowledge) -> None:
    """Each family member's accepted range of another (companions.toml's
    ``companion_requirement``), checked on the versions written: the member moves with
    it where a later release accepts it, else its entry says the family cannot."""
    for rule in fk.companion_requirements:
        member, other = merged.packages.get(rule.package), merged.packages.get(rule.requires)
        if member is None or other is None or member.exact is None:
            continue
        if not rule.version.contains(member.exact, prereleases=True):
            continue
        written = next((e.now for e in d.entries if e.package == rule.requires and e.now), None)
        try:
            # "1.7.0", "==1.7.0" or "mmcv-full 1.7.0" (a companion's move)
            version = Version(written.split()[-1].removeprefix("==")) if written else other.exact
        except InvalidVersion:
            version = other.exact
        if version is None or rule.specifier.contains(version, prereleases=True):
            continue
        if _member_moves(d, member, rule, version, fk):
            continue
        shown = _as_written(written, version, rule.requires)
        for i, entry in enumerate(d.entries):
            if entry.package == rule.package:
                d.entries[i] = replace(
                    entry,
                    risk=HIGH,
                    risk_text=(
                        f"{rule.package} {member.exact} accepts {rule.requires}{rule.specifier}, "
                        f"and {rule.requires} is written {shown}: this family cannot move "
                        f"together; {rule.package} checks the version at import and fails"
                    ),
                    unverified=entry.unverified or rule.fact.unverified,
                )


def _as_written(written: str | None, version: Version, name: str) -> str:
    """ "2.2.0", or "as mmcv 2.2.0" when companion ``name`` moved to its successor."""
    if written and " " in written and not written.startswith(("==", f"{name} ")):
        return f"as {written}"
    return str(version)


def _floor(specifier: SpecifierSet) -> Version | None:
    floors = [Version(s.version) for s in specifier if s.operator in (">=", "==")]
    return min(floors) if floors else None


def _member_moves(
    d: Decision,
    member: Resolved,
    rule: CompanionRequirement,
    written: Version,
    fk: ForeignKnowledge,
) -> bool:
    """A kept family member (mmdet 2.20) that does not accept its companion's written
    version (mmcv-full 1.7.0) moves to the oldest later release that does (mmdet 2.25.0),
    when the data knows one; False when it cannot move."""
    exact = member.exact
    at = next(
        (i for i, e in enumerate(d.entries) if e.package == rule.package and e.kind == KEPT), None
    )
    if exact is None or at is None:
        return False
    later = [
        (floor, r)
        for r in fk.companion_requirements
        if r.package == rule.package
        and r.requires == rule.requires
        and r.specifier.contains(written, prereleases=True)
        and (floor := _floor(r.version)) is not None
        and floor > exact
    ]
    if not later:
        return False
    floor, found = min(later, key=lambda pair: pair[0])
    entry = Entry(
        CHANGED,
        rule.package,
        f"{rule.package} {exact} accepts {rule.requires}{rule.specifier}, and {rule.requires} "
        f"is written {written}; {floor} is the oldest {rule.package} release that accepts it "
        f"({rule.requires}{found.specifier})",
        origin=member.ask.origin,
        was=str(exact),
        now=str(floor),
        risk=MEDIUM,
        risk_text="another release of the package: its API and results may differ",
        unverified=rule.fact.unverified or found.fact.unverified,
    )
    d.entries[at] = entry
    for i, line in enumerate(d.pip):
        if _line_name(line.text) == rule.package:
            d.pip[i] = Line(_requirement_of(member, f"=={floor}"), entry.comment())
    return True


def _line_name(text: str) -> str | None:
    try:
        return normalize_name(Requirement(text).name)
    except InvalidRequirement:
        return None


# --- notes, facts, the project itself --------------------------------------------------


def _notes(d: Decision, merged: Merged) -> None:
    for note in merged.notes:
        if note.kind == INCLUDED:
            continue
        if note.kind == UNMANAGED and "system packages" in note.message:
            d.add(
                Entry(
                    UNMANAGED_ENTRY, "system packages", note.message, origin=note.origin, risk=LOW
                )
            )
            continue
        risk = {UNREADABLE: MEDIUM, DROPPED: NONE}.get(note.kind, LOW)
        message = note.message
        if note.kind == UNMANAGED and "local path (the project itself)" in message:
            message += (
                ": not installed by gpuenv; after `gpuenv install`, "
                "`gpuenv run -- pip install --no-deps -e .` installs the project itself"
            )
        d.add(Entry(ASSUMPTION, None, message, origin=note.origin, risk=risk))


def _project_itself(d: Decision, merged: Merged) -> None:
    """A repository that is a Python project (its setup.py or pyproject.toml names one)
    needs it installed: xinntao/Real-ESRGAN's realesrgan/__init__.py imports version.py,
    which only its setup.py writes, and nothing said so. gpuenv installs it editable
    where gpuenv.toml sits beside that file ([project] path)."""
    if any("installs the project" in e.why for e in d.entries):
        return  # a file installs it, and the report said how
    names = [
        f
        for f in merged.facts.get(NAME, ())
        if f.value
        and f.origin.file.rsplit("/", 1)[-1] in ("setup.py", "pyproject.toml", "setup.cfg")
    ]
    if not names:
        return
    fact = names[0]
    folder, _, file = fact.origin.file.rpartition("/")
    where = f"the imported folder's {folder}" if folder else "the imported folder"
    d.add(
        Entry(
            ASSUMPTION,
            None,
            f"the repository is the Python project {fact.value}: `gpuenv install` installs "
            f"it editable when gpuenv.toml sits beside its {file}; written elsewhere, set "
            f"[project] path to {where}",
            origin=fact.origin,
            risk=LOW,
        )
    )


def _cuda_major(d: Decision, merged: Merged) -> None:
    """What became of a CUDA major asked with no minor (``cuda-version = "12.*"``)."""
    major = merged.fact(CUDA_MAJOR)
    if major is None or _torch_build(merged, merged.packages.get("torch"))[0] is not None:
        return  # a build named for torch decides (torch_choice reads no major then)
    asked = f"{major.origin.text}: a CUDA {major.value} build asked, any minor"
    tag = d.plan.cu_tag
    if re.fullmatch(rf"cu{major.value}\d", tag):
        why = f"{asked}: {tag} is the newest that fits this target"
    else:
        why = f"{asked}: none fits this target; {tag} does"
    d.add(Entry(ASSUMPTION, "torch", why, origin=major.origin))


def _facts(d: Decision, merged: Merged, fk: ForeignKnowledge) -> None:
    _cuda_major(d, merged)
    gpu, driver = merged.fact(GPU), merged.fact(DRIVER)
    if gpu is not None:
        shown = re.sub(r"^GPU \d+:\s*", "", gpu.value)  # collect_env's "GPU 0: NVIDIA A100-..."
        text = f"the paper ran on {shown}" + (f", driver {driver.value}" if driver else "")
        d.add(Entry(ASSUMPTION, None, text, origin=gpu.origin))
    for fact in merged.facts.get(IMAGE, ()):
        if fact.note:
            d.add(Entry(ASSUMPTION, None, fact.note, origin=fact.origin, risk=LOW))
    for fact in merged.facts.get(INDEX, ()):
        page = _wheel_page(fact.value, d, merged, fk)
        if re.search(r"download\.pytorch\.org", fact.value):
            why = "PyTorch's index: gpuenv chooses the torch index for the target's build"
        elif page is not None:
            why = page
        else:
            why = (
                f"{fact.note or 'index'} not carried over: add it to [pip] extra-index-urls "
                "if the paper's packages need it"
            )
        d.add(
            Entry(
                ASSUMPTION,
                None,
                f"{fact.value}: {why}",
                origin=fact.origin,
                risk=NONE if "pytorch" in why or page else LOW,
            )
        )


def _wheel_page(url: str, d: Decision, merged: Merged, fk: ForeignKnowledge) -> str | None:
    """What a companion's find-links page (PyG's torch-1.13.0+cu117.html, OpenMMLab's
    dist/cu113/torch1.11/) was for, and what became of the packages it served."""
    for companion in fk.companions.values():
        if companion.wheel_page is None:
            continue
        pattern = re.escape(companion.wheel_page)
        pattern = pattern.replace(r"\{series\}", r"(?P<series>\d+\.\d+)(?:\.0)?")
        pattern = pattern.replace(r"\{build\}", r"(?P<build>cu\d+|cpu)")
        match = re.fullmatch(pattern, url.rstrip("/") if not url.endswith(".html") else url)
        if match is None:
            continue
        served = sorted(
            c.name
            for c in fk.companions.values()
            if c.wheel_page == companion.wheel_page and c.name in merged.packages
        )
        torch = f"{match['series']} ({match['build']})"
        here = f"{Version(d.plan.torch).major}.{Version(d.plan.torch).minor} ({d.plan.cu_tag})"
        whose = (
            "this torch's page"
            if torch == here
            else f"not the page of torch {d.plan.torch}+{d.plan.cu_tag}"
        )
        return (
            f"the wheel page of {', '.join(served) or companion.name} for torch {torch}, "
            f"{whose}: gpuenv's lock cannot read find-links pages, and the packages it "
            "served are built from source (their entries say for which torch)"
        )
    return None


def _extension(d: Decision, merged: Merged) -> None:
    facts = merged.facts.get(CUDA_EXTENSION, ())
    if not facts:
        return
    cuda = [f for f in facts if f.value in ("cuda", "build-system")]
    fact = (cuda or list(facts))[0]
    cpu = d.plan.hardware.cpu
    required = next((f for f in facts if f.value == "cuda-required"), None)
    if cpu and required is not None:  # it said "without a GPU only its CPU parts build"
        d.add(
            Entry(
                UNREPRODUCIBLE,
                d.project,
                f"the project's extension refuses to build without CUDA "
                f"({required.origin.cite()}): the target has no GPU",
                origin=fact.origin,
                risk=HIGH,
            )
        )
        return
    kind = "CUDA" if cuda else "C++"
    # Where gpuenv finds the project: beside the spec, or at its [project] path. Swin-
    # Transformer's kernels/window_process/setup.py read as if the written spec said so
    # ("(gpuenv.toml beside it: [project] path)"), and it names no path.
    folder, _, name = fact.origin.file.replace("\\", "/").rpartition("/")
    where = f" in {folder}" if folder else ""
    pip_built = {
        f.value.removeprefix("./").rstrip("/") for f in merged.facts.get(LOCAL_PACKAGE, ())
    }
    if folder and folder in pip_built:
        # a subfolder a file pip-installs (Grounded-Segment-Anything's Dockerfile:
        # pip install -e GroundingDINO): _local_paths says how to build it, and this
        # entry's "a gpuenv.toml beside its pyproject.toml" contradicted it
        if cuda and not cpu:
            d.needs_toolkit.append(f"the project's {kind} extension")
        return
    why = (
        f"the project compiles {kind} code against torch ({fact.origin.text}): `gpuenv install` "
        f"builds it for each target's GPUs and installs it editable from a gpuenv.toml beside "
        f"its {name}{where}, or one whose [project] path names that folder"
    )
    risk = HIGH if cpu and cuda else MEDIUM
    d.add(
        Entry(
            NEEDS_BUILD,
            d.project,
            why + (": without a GPU only its CPU parts build" if cpu and cuda else ""),
            origin=fact.origin,
            now=f"for torch {d.plan.torch}+{d.plan.cu_tag}",
            nvcc=None if cpu else d.plan.cuda,
            risk=risk,
        )
    )
    if cuda and not cpu:
        d.needs_toolkit.append(f"the project's {kind} extension")


def _local_paths(d: Decision, merged: Merged) -> None:
    """Folders pip installs: the repository's own are sources to build, as the project
    is; a path on the author's machine is in no file, so nothing can install it (Vim's
    ``-e /home/tiger/ColossalAI`` and ``apex @ file:///home/tiger/apex``)."""
    for fact in merged.facts.get(AUTHOR_PATH, ()):
        name = re.split(r"\s*@", fact.origin.text.removeprefix("-e").strip())[0]
        named = "@" in fact.origin.text and "/" not in name
        d.add(
            Entry(
                UNREPRODUCIBLE,
                name if named else fact.value.rstrip("/").rsplit("/", 1)[-1],
                f"{fact.note}: not in the repository, so nothing in the files installs it; "
                "left out of the spec (install it by hand, or name the package it is)",
                origin=fact.origin,
                was=fact.value,
                risk=HIGH,
            )
        )
    cpu = d.plan.hardware.cpu
    for fact in merged.facts.get(LOCAL_PACKAGE, ()):
        cuda = bool(fact.note and fact.note.startswith(COMPILES_CUDA))
        # ./ always: pip reads a word with no slash as a package's name (``apex`` is
        # an unrelated project on the index), not as the folder
        folder = fact.value if fact.value.startswith(("./", "../", "/")) else f"./{fact.value}"
        why = (
            f"a folder of the repository pip builds ({fact.value}): not installed by gpuenv; "
            f"after `gpuenv install`, `gpuenv run -- pip install --no-build-isolation "
            f"{folder}` builds it against the environment's torch"
        )
        d.add(
            Entry(
                NEEDS_BUILD,
                fact.value.rsplit("/", 1)[-1],
                why + (f"; {fact.note}" if fact.note else ""),
                origin=fact.origin,
                now=f"for torch {d.plan.torch}+{d.plan.cu_tag}",
                nvcc=d.plan.cuda if cuda and not cpu else None,
                risk=HIGH if cuda and cpu else MEDIUM,
            )
        )
        if cuda and not cpu:
            d.needs_toolkit.append(f"the CUDA extension in {fact.value}")


def _toolkit(d: Decision, merged: Merged, kb: KnowledgeBase) -> None:
    if d.plan.hardware.cpu:
        return
    paper = merged.fact(TOOLKIT)
    if paper is not None and not d.needs_toolkit:
        d.needs_toolkit.append(f"the paper had nvcc ({paper.origin.cite()})")
    if not d.needs_toolkit:
        return
    reasons = "; ".join(dict.fromkeys(d.needs_toolkit))
    cuda = d.plan.cuda or ""
    if d.conda or kb.nvcc_wheel(CudaVersion.parse(cuda)) is not None:
        d.stack["toolkit"] = "auto"
        d.stack_comments["toolkit"] = f"nvcc {cuda} (torch's CUDA): {reasons}"
        return
    # "auto" without conda asks NVIDIA's nvcc wheel, which CUDA before 11.7 never had: the
    # lock failed on a package the user never named. The machine's own toolkit, named.
    d.stack["toolkit"] = f"system:/usr/local/cuda-{cuda}"
    d.stack_comments["toolkit"] = (
        f"nvcc {cuda} (torch's CUDA), installed on the machine: NVIDIA publishes no nvcc "
        f"wheel for it; change the path to where it lives: {reasons}"
    )


def _cuda_comment(merged: Merged, plan: TargetPlan, d: Decision) -> str:
    torch = next(e for e in d.entries if e.package == "torch" and e.kind in (KEPT, CHANGED))
    _, origin = _torch_build(merged, merged.packages.get("torch"))
    if plan.cuda is None:
        return "the target has no GPU: torch's CPU build"
    where = f"{origin.cite()} → {plan.cuda}" if origin else f"{plan.cu_tag}"
    build, _ = _torch_build(merged, merged.packages.get("torch"))
    if torch.kind == KEPT and (build is None or build == plan.cu_tag):
        return f"{origin.cite()}: kept" if origin else "the build that fits"
    if torch.kind == KEPT:  # the release kept, in another build (FastChat: cu122 → cu121)
        return f"{where}: the build of torch {plan.torch} chosen here (the files name {build})"
    return f"{where}: {torch.why}"


# --- wheels: a Python every pin installs on ------------------------------------------


def _checked(merged: Merged, fk: ForeignKnowledge, plan: TargetPlan) -> list[tuple[str, str]]:
    """(package, specifier) for every pip requirement the index can judge: the paired
    torchvision/torchaudio and every plain package (companions move with torch by their
    own data; URLs, git, conda-only and editable asks are not on an index)."""
    out: list[tuple[str, str]] = []
    for package in COMPANIONS:
        version = getattr(plan, package)
        if package in merged.packages and version:
            out.append((package, f"=={version}"))
    for name, resolved in merged.packages.items():
        ask = resolved.ask
        if name in TRIO or ask.url or ask.conda_only or ask.editable or ask.manager == "image":
            continue
        if fk.companion(moves.companion_name(name)) is not None:
            continue
        out.append((name, final_specifier(merged, resolved, (plan.torch, plan.python), fk)))
    return out


def _python_order(plan: TargetPlan, kb: KnowledgeBase, wanted: str | None) -> list[str]:
    """The Pythons torch ``plan.torch`` supports, the planner's own choice first, then
    nearest to the paper's (a range: inside it, newest first; none: newest first)."""
    from gpuenv.plan import KNOWN_PYTHONS

    release = kb.torch_release(plan.torch)
    supported = [p for p in KNOWN_PYTHONS if release is None or release.python.contains(p)]

    def minor(p: str) -> int:
        return int(p.split(".")[1])

    if wanted is not None and wanted[:1].isdigit():
        want = minor(wanted) if "." in wanted else 0
        order = sorted(supported, key=lambda p: (abs(minor(p) - want), -minor(p)))
    else:
        try:
            spec = SpecifierSet(wanted or "")
        except InvalidSpecifier:
            spec = SpecifierSet()
        order = sorted(supported, key=lambda p: (not spec.contains(p), -minor(p)))
    return [plan.python, *(p for p in order if p != plan.python)]


def _blockers(
    wheels: wheel_index.WheelIndex, asks: list[tuple[str, str]], python: str, platform: str
) -> list[str]:
    found = []
    for name, specifier in asks:
        if not wheel_index.verdict(wheels, name, specifier, python, platform).fits:
            found.append(f"{name}{specifier}")
    return found


def _python_for_wheels(
    planning: Planning,
    paper: PaperTorch,
    plan: TargetPlan,
    merged: Merged,
    ctx: tuple[ForeignKnowledge, wheel_index.WheelIndex],
) -> tuple[TargetPlan, str | None]:
    """The plan with the Python nearest to the paper's on which every pin the index
    knows has a wheel (the fewest without one when no Python has them all), and why it
    differs from the planner's first choice; the plan unchanged when nothing moved."""
    fk, wheels = ctx
    asks = _checked(merged, fk, plan)
    if not asks or not plan.hardware.platform.startswith("linux"):
        return plan, None  # the check knows Linux wheel tags only
    wheels.prefetch(name for name, _ in asks)
    platform = plan.hardware.platform
    first = _blockers(wheels, asks, plan.python, platform)
    if not first or wheels.failure is not None:
        return plan, None
    best: tuple[TargetPlan, list[str]] = (plan, first)
    wanted, _ = _python_wanted(merged)
    for python in _python_order(plan, planning.kb, wanted)[1:]:
        missing = _blockers(wheels, asks, python, platform)
        if len(missing) >= len(best[1]):
            continue
        other = planning.attempt(f"=={plan.torch}", python, plan.cuda, paper)
        if isinstance(other, NoCompatiblePlan) or (other.torch, other.cu_tag) != (
            plan.torch,
            plan.cu_tag,
        ):
            continue
        best = (other, missing)
        if not missing:
            break
    if best[0] is plan:
        return plan, None
    shown = ", ".join(first[:3]) + (f" and {len(first) - 3} more" if len(first) > 3 else "")
    tail = (
        "every pin has a wheel" if not best[1] else f"the fewest pins lack a wheel ({len(best[1])})"
    )
    return best[0], (f"{tail} ({shown}: no wheel for Python {plan.python} on the index)")


def _wheel_check_entry(d: Decision, asked: int) -> None:
    from gpuenv._redact import redact_url

    wheels = d.wheels
    if wheels is None:
        return
    where = redact_url(wheels.index)
    if wheels.failure is not None:
        d.add(
            Entry(
                ASSUMPTION,
                None,
                f"the index {where} could not be read ({redact_url(wheels.failure)}): "
                "the Python and the pins were not checked for wheels",
                risk=LOW,
            )
        )
        return
    if wheels.skipped:
        names = ", ".join(sorted(set(wheels.skipped))[:5])
        d.add(
            Entry(
                ASSUMPTION,
                None,
                f"not checked for wheels (over the import's bounds): {names}",
                risk=LOW,
            )
        )
    if asked:
        d.add(
            Entry(
                ASSUMPTION,
                None,
                f"{asked} requirement{'s' if asked != 1 else ''} checked for wheels for "
                f"Python {d.plan.python} on {where}",
            )
        )


def _only_yanked(
    wheels: wheel_index.WheelIndex, name: str, version: Version, python: str, platform: str
) -> bool:
    """``version``'s wheels would install but every one is yanked (opencv-contrib-python
    4.3.0.36, "Release deprecated"): said so, not "has no wheel for Python 3.8"."""
    files = [f for f in wheels.files(name) or () if f.version == version and f.tags is not None]
    if not files or not all(f.yanked for f in files):
        return False
    return any(wheel_index.installs_on(replace(f, yanked=False), python, platform) for f in files)


def _range_excluding(resolved: Resolved, version: Version) -> Ask | None:
    """Another ask of the package whose range the winning pin is in and ``version`` is
    not (huggingface/lerobot: uv.lock's hebi-py==2.11.0, an sdist, moved to 2.15.2 for a
    wheel, outside pyproject.toml's hebi-py>=2.8.0,<2.12.0, and 2.15.2 needs numpy<2)."""
    exact = resolved.exact
    for other in resolved.asks[1:]:
        try:
            spec = SpecifierSet(other.specifier)
        except InvalidSpecifier:
            continue
        held = exact is not None and spec.contains(exact, prereleases=True)
        if held and not spec.contains(version, prereleases=True):
            return other
    return None


def _wheel_move(d: Decision, resolved: Resolved, fk: ForeignKnowledge) -> Entry | None:
    """The entry for a pin the index has no wheel of for the chosen Python: moved to
    the nearest release that has one, or built from its sdist, or not reproducible."""
    wheels = d.wheels
    platform = d.plan.hardware.platform
    if wheels is None or wheels.failure is not None or not platform.startswith("linux"):
        return None
    python = d.plan.python
    found = wheel_index.verdict(wheels, resolved.name, resolved.specifier, python, platform)
    if found.fits:
        return None
    ask = resolved.ask
    exact = resolved.exact
    was = resolved.specifier or "any"
    kept = d.kept_as_builds.get(resolved.name)
    nearest = (
        wheel_index.nearest_with_wheel(
            wheels, resolved.name, Version(exact.public), python, platform
        )
        if exact is not None
        else None
    )
    outside = _range_excluding(resolved, nearest) if nearest is not None else None
    if kept is None and outside is not None:
        kept = (
            f"{nearest}, the nearest release with a wheel, is outside {outside.specifier!r} "
            f"({outside.origin.where()})"
        )
    if (
        kept is None
        and exact is not None
        and found.sdist
        and fk.old_sdist(resolved.name, Version(exact.public)) is not None
    ):
        # taming-transformers' albumentations 0.4.3: an old sdist gpuenv knows how to
        # build (old_sdists.toml; the table is written below): the paper's release
        kept = "an old source archive gpuenv knows how to build"
    # iopath, transformers-stream-generator: source archives only, for every Python ("no
    # wheel for Python 3.11" said other Pythons had one)
    no_wheel = f"for Python {python} on the index" if found.wheels else "on the index (source only)"
    if kept is not None and exact is not None and found.sdist:
        return Entry(
            NEEDS_BUILD,
            resolved.name,
            f"{exact.public} has no wheel {no_wheel}; kept and built "
            f"from its source archive at install: {kept}",
            origin=ask.origin,
            was=str(exact.public),
            now=str(exact.public),
            risk=MEDIUM,
        )
    if exact is not None and nearest is not None:
        lacks = (
            f"{exact.public} is yanked on the index (its wheels would install here)"
            if _only_yanked(wheels, resolved.name, Version(exact.public), python, platform)
            else f"{exact.public} has no wheel {no_wheel}"
        )
        return Entry(
            CHANGED,
            resolved.name,
            f"{lacks}; {nearest} {WHEEL_MOVE}",
            origin=ask.origin,
            was=str(exact.public),
            now=f"{nearest}",
            risk=MEDIUM,
            risk_text="another release: behaviour may differ",
        )
    if found.sdist:
        return Entry(
            NEEDS_BUILD,
            resolved.name,
            f"no release in {was!r} has a wheel {no_wheel}: "
            "it builds from its source archive at install",
            origin=ask.origin,
            was=was,
            now=was,
            risk=MEDIUM,
        )
    return Entry(
        UNREPRODUCIBLE,
        resolved.name,
        f"no release in {was!r} has a wheel for Python {python} on the index, nor a source archive",
        origin=ask.origin,
        was=was,
        risk=HIGH,
    )


def decide(
    merged: Merged,
    planning: Planning,
    fk: ForeignKnowledge,
    project: tuple[str, str],
    wheels: wheel_index.WheelIndex | None = None,
    kept_as_builds: Mapping[str, str] | None = None,
    bound: TorchBound | None = None,
    dating: eras.Dating | None = None,
) -> Decision:
    """The reproduction for ``planning``'s target: ``NoCompatiblePlan`` when nothing fits.
    With ``wheels``, the Python is the nearest on which the pins have wheels there;
    ``kept_as_builds`` names pins (with why) built from source rather than moved;
    ``bound``, a torch range a requirement needs (the resolve check found it): torch is
    chosen within it, not dated by the pins; ``dating``, what the resolve check said of
    the files' day (``era.Dating``)."""
    torch = merged.packages.get("torch")
    # A torch without a version, or none at all (the README installs it): the pins'
    # newest day dates them (pins_day asks the index only when there are pins).
    unpinned = torch is None or torch.exact is None
    dated = eras.pins_day(merged, wheels) if unpinned and bound is None else None
    paper, _ = paper_torch(merged, planning.kb, fk, dated)
    known = [r.version for r in planning.kb.torch_releases]
    allowed = _with_bound(companion_bounds(merged, fk, known), bound)
    choice = choose(planning, paper, era_caps(paper, fk), allowed)
    choice = replace(choice, pypi_only=planning.pypi_only)
    plan, python_why = choice.plan, None
    if wheels is not None:
        plan, python_why = _python_for_wheels(planning, paper, plan, merged, (fk, wheels))
        choice = replace(choice, plan=plan)
    wanted = _python_wanted(merged)[0]
    if dating is not None and dating.python is not None and not (wanted or "")[:1].isdigit():
        python, why = dating.python  # the resolve check's: fewer source builds there
        other = planning.attempt(f"=={plan.torch}", python, plan.cuda, paper)
        if not isinstance(other, NoCompatiblePlan) and (other.torch, other.cu_tag) == (
            plan.torch,
            plan.cu_tag,
        ):
            plan, python_why = other, why
            choice = replace(choice, plan=plan)
    d = Decision(project[0], project[1], planning.target, planning.target_spec, plan)
    d.wheels, d.python_why, d.python_asked = wheels, python_why, wanted
    d.kept_as_builds = dict(kept_as_builds or {})
    _torch_entries(d, merged, paper, choice, (planning.kb, fk))
    if bound is not None:
        d.add(
            Entry(
                ASSUMPTION,
                "torch",
                f"torch {bound.first}, chosen first, does not resolve: {bound.who} depends "
                f"on torch{bound.specifier} (the resolve check); chosen again among the "
                "releases it accepts",
                risk=LOW,
            )
        )
    d.stack["python"] = plan.python
    d.stack["torch"] = plan.torch
    d.stack_comments["torch"] = next(
        e.comment() for e in d.entries if e.package == "torch" and e.kind in (KEPT, CHANGED)
    )
    _python_entry(d, merged, plan, (planning.kb, fk))
    _trio_entries(d, merged, plan, planning.kb)
    d.stack["cuda"] = plan.cuda or "auto"
    d.stack_comments["cuda"] = _cuda_comment(merged, plan, d)
    _packages(d, merged, fk, planning.kb)
    _gpu_only(d, fk)
    _old_sdists(d, fk)
    _extension(d, merged)
    _local_paths(d, merged)
    _toolkit(d, merged, planning.kb)
    _notes(d, merged)
    _project_itself(d, merged)
    _facts(d, merged, fk)
    _wheel_check_entry(d, len(_checked(merged, fk, plan)) if wheels is not None else 0)
    _as_of(d, merged, fk, dating or eras.Dating())
    _dated_floors(d, merged, fk)
    _git_undated(d)
    _no_credentials(d)
    return d


def _git_undated(d: Decision) -> None:
    """[pip] exclude-newer dates index releases, not git checkouts: a git requirement with
    no commit or tag is locked at its branch's commit of lock time, whose own requirements may
    be years newer than the day (tloen/alpaca-lora's peft from git, dated April 2023,
    requires accelerate>=0.21 today, which the day hides: the lock failed)."""
    if d.as_of is None:
        return
    names = sorted(
        {
            name
            for name, _, url in (line.text.partition(" @ ") for line in d.pip)
            if url.startswith("git+") and _git_kind(git_ref(url)) == "branch"
        }
    )
    if not names:
        return
    d.add(
        Entry(
            ASSUMPTION,
            None,
            f"{', '.join(names)} {'comes' if len(names) == 1 else 'come'} from git with no "
            f"commit: [pip] exclude-newer ({d.as_of.day.isoformat()}) does not reach a git "
            "checkout, so the lock takes its branch as it is then, and what that requires "
            "may be newer than the day allows",
            risk=MEDIUM,
            risk_text=f"pin a commit from {d.as_of.day.isoformat()} (name @ git+URL@COMMIT), "
            "or a release of that day from the index",
        )
    )


def _dated_floors(d: Decision, merged: Merged, fk: ForeignKnowledge) -> None:
    """An unpinned companion whose releases of the spec's day lack what the target's GPU
    needs (bitsandbytes as of alpaca-lora's April 2023: no LLM.int8() on an H100 before
    0.45.0) takes the first release that has it, as of that release's own day ([pip]
    exclude-newer-package), with it as a floor."""
    cc = d.plan.hardware.min_cc
    if d.as_of is None or d.wheels is None or d.plan.hardware.cpu or cc is None:
        return
    for name, resolved in merged.packages.items():
        companion = fk.companion(moves.companion_name(name))
        if resolved.exact is not None or companion is None or resolved.ask.url:
            continue
        arch = companion.wheels_lack(Version("0"), cc)
        index = _line_of(d, name)
        if arch is None or index is None or excludes(resolved.specifier, arch.since):
            continue
        landing = wheel_index.published(d.wheels, name, arch.since)
        day = d.as_of_packages.get(name, d.as_of.day)
        if landing is None or day >= landing:
            continue
        why = (
            f"as of {day.isoformat()} it would resolve to a release with no "
            f"{arch.what or 'binaries'} for {cc.sm}; {arch.since} is the first that has, "
            f"as of its own day, {landing.isoformat()}"
        )
        newer = Entry(
            CHANGED,
            name,
            why,
            risk=MEDIUM,
            risk_text="a newer release than the files' day: its API may differ",
        )
        floor = SpecifierSet(f">={arch.since}")
        _bound(d, name, resolved, floor, newer, unverified=arch.fact.unverified)
        d.as_of_packages = {**d.as_of_packages, name: landing}


def _as_of(d: Decision, merged: Merged, fk: ForeignKnowledge, dating: eras.Dating) -> None:
    """Date the written pip dependencies (``[pip] exclude-newer``), where the index
    gives upload days: what the files leave unpinned then resolves as it did when they
    were written, not to today's releases (an unpinned huggingface-hub of 2025 beside a
    2023 paper's diffusers<=0.16 fails at import). ``dating.undated``: they do not
    resolve as of that day (the resolve check's reason), so they resolve as today, and
    the report says so; ``dating.split``: what the target's torch requires, which takes
    torch's day where it moved the day past the files' (``_split``)."""
    if d.wheels is None:
        return
    requirements = [line.text for line in d.pip]
    d.as_of = eras.as_of(merged, requirements, Version(d.plan.torch), fk, d.wheels)
    if d.as_of is None:
        if d.pip and d.wheels.failure is None:  # the index answered: say why nothing is dated
            unknown = fk.torch_published(Version(d.plan.torch)) is None
            why = (
                f"torch {Version(d.plan.torch).public}'s publication day is not known"
                if unknown
                else "no pin or version range in the files has an upload day on the index"
            )
            d.add(
                Entry(
                    ASSUMPTION,
                    None,
                    f"pip packages resolve as of today: {why}, so nothing dates the files "
                    "(no [pip] exclude-newer; add one for the day they were written)",
                    risk=LOW,
                )
            )
        return
    if dating.undated is not None:
        d.add(
            Entry(
                ASSUMPTION,
                None,
                f"pip packages resolve as of today: as of {d.as_of.says()}, the written "
                f"dependencies do not resolve ({dating.undated}), so what the files leave "
                "unpinned "
                "may be newer than they expect",
                risk=MEDIUM,
            )
        )
        d.as_of = None
        return
    if d.as_of.files is not None:
        _dated_constraints(d, merged, fk, d.as_of.files.day, d.as_of.day)
    if dating.split and d.as_of.files is not None:
        _split(d, dating.split, dating.split_built)
        return
    # The target's torch (its GPU's kernels) moved the day on: its own dependencies must
    # resolve, and what came out meanwhile comes too (ControlNet on an H100: torch 2.1.2's
    # day brought pydantic 2, which its gradio 3.16 cannot take).
    later = d.as_of.months_later > 3
    d.add(
        Entry(
            ASSUMPTION,
            None,
            f"pip packages resolve as of {d.as_of.says()}: what the files leave unpinned, "
            "and what their packages depend on, comes as it was then, not as today "
            "([pip] exclude-newer; remove it for today's releases)",
            risk=MEDIUM if later else LOW,
            risk_text="releases of the months between may be newer than the code expects: "
            "pin those it needs older"
            if later
            else None,
        )
    )


def _dated_constraints(
    d: Decision, merged: Merged, fk: ForeignKnowledge, files: date, day: date
) -> None:
    """What files of ``files``'s day need once the environment resolves as of a later
    ``day`` (the target's torch's): numpy<2 for files older than NumPy 2 (alpaca-lora,
    2023, on an H100: torch 2.6's day brought NumPy 2.2, and its pandas 2.0.0 failed at
    import). Where the files ask for a version the bound allows, nothing changes."""
    for constraint in fk.dated_constraints:
        if not files < constraint.before <= day:
            continue
        if constraint.python is not None and not constraint.python.contains(d.plan.python):
            continue  # numpy<2 on Python 3.13: no NumPy 1 wheel, a source build
        resolved = merged.packages.get(constraint.package)
        if resolved is not None and resolved.exact is not None:
            continue  # an exact pin: the lock exempts it from the day, and it decides
        if resolved is not None and _bounded_below(resolved.specifier, constraint.requires):
            continue
        index = _line_of(d, constraint.package)
        if index is not None and _bounded_below(
            _specifier_of(d.pip[index].text), constraint.requires
        ):
            continue  # gpuenv bounded it already (numpy<2 beside torch before 2.3)
        _bound(
            d,
            constraint.package,
            resolved,
            constraint.requires,
            Entry(CHANGED, constraint.package, constraint.why, risk=LOW),
            unverified=constraint.fact.unverified,
        )


def _specifier_of(text: str) -> str:
    """A written requirement line's version range ("" for none or a URL)."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return ""
    return str(requirement.specifier)


def _split(d: Decision, requires: tuple[str, ...], built: tuple[str, ...] = ()) -> None:
    """The files' day for the written dependencies, torch's own day for what the target's
    torch requires (``requires``: gpuenv.import_check read it from uv, with numpy, which
    torch's wheels were built against, and ``built``, packages the files' day has only a
    source archive of): a torch newer than the files no longer brings every release of
    the months between."""
    assert d.as_of is not None and d.as_of.files is not None
    torch, files = d.as_of, d.as_of.files
    d.as_of, d.as_of_packages = files, dict.fromkeys(requires, torch.day)
    own = [name for name in requires if name not in built and name != "numpy"]
    shown = ", ".join(own[:4]) + (f" and {len(own) - 4} more" if len(own) > 4 else "")
    also = " and numpy, which torch's wheels were built against" if "numpy" in requires else ""
    if built:
        also += (
            f"{',' if also else ''} and {', '.join(built)}, of which the files' day has only "
            "a source archive to build"
        )
    family = [f"torch {torch.version}"]
    family += [f"torchvision {d.plan.torchvision}"] if d.plan.torchvision else []
    family += [f"torchaudio {d.plan.torchaudio}"] if d.plan.torchaudio else []
    who = (
        f"{family[0]}, the target's, requires"
        if len(family) == 1
        else f"the target's {', '.join(family[:-1])} and {family[-1]} require"
    )
    d.add(
        Entry(
            ASSUMPTION,
            None,
            f"pip packages resolve as of {files.says()}; what {who} "
            f"({shown}){also + ',' if also else ''} as of torch's day, "
            f"{torch.day.isoformat()}: "
            "what the files leave unpinned, and what their packages depend on, comes as it "
            "was then, not as today ([pip] exclude-newer and exclude-newer-package; remove "
            "them for today's releases)",
            risk=LOW,
        )
    )


_URL_IN_LINE = re.compile(r"(?:git\+)?[a-z][a-z0-9+.-]*://[^\s;#]+")


def _no_credentials(d: Decision) -> None:
    """The written spec is committed: a URL requirement's credentials (``git+https://
    user:TOKEN@host/...``, ``?token=...``) are removed from it and the report says how
    ``gpuenv lock`` gets them instead. An ssh URL's user (``git@``) is no secret."""
    from gpuenv._redact import redact_url

    def clean(match: re.Match[str]) -> str:
        url = match.group(0)
        return url if url.startswith(("ssh://", "git+ssh://")) else redact_url(url)

    for lines in (d.pip, d.left_out):
        for at, line in enumerate(lines):
            text = _URL_IN_LINE.sub(clean, line.text)
            if text == line.text:
                continue
            lines[at] = replace(line, text=text)
            d.add(
                Entry(
                    ASSUMPTION,
                    None,
                    f"{text}: written without the credentials its URL held; `gpuenv lock` "
                    "takes them from ~/.netrc (machine HOST login USER password TOKEN) or "
                    "git's credential helper",
                )
            )
