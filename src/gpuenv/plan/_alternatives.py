"""When nothing fits: the obstacles (most decisive first) and the alternatives.

Alternatives are found by relaxing one constraint at a time and come in the order of how
little they change of what was asked: another build of the same release (another CUDA,
or CUDA minor-version compatibility), then the nearest release that fits, then a driver
the GPU can run (on a Jetson, a JetPack release: its driver comes with it), then another
Python or companion, then a CPU build. None proposes a driver outside the GPU's own driver
branches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv.errors import Alternative
from gpuenv.knowledge import DriverCompat, KnowledgeBase, TorchRelease
from gpuenv.names import COMPANIONS
from gpuenv.plan._model import KNOWN_PYTHONS, Constraints, TargetHardware
from gpuenv.plan._search import (
    Found,
    companion_problem,
    jetpack_problem,
    python_for,
    search,
    spec_text,
)
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

FACTS_HINT = "add the facts in your facts file ({where}; same format as gpuenv's data files)"


# --- obstacles ------------------------------------------------------------------------------


def newer_than_known(spec: SpecifierSet, kb: KnowledgeBase) -> str | None:
    """The message for a torch specifier that only releases newer than the data's admit."""
    newest = kb.newest_torch
    if newest is None:
        return None
    probe = Version(f"{newest.version.major}.{newest.version.minor + 1}.0")
    if kb.torch_matching(spec) or not spec.contains(probe):
        return None
    known = f"{newest.version.major}.{newest.version.minor}"
    return f"torch {spec_text(spec)} is newer than this gpuenv's knowledge, which stops at {known}"


def _cuda_obstacles(
    releases: list[TorchRelease], hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    if c.cuda is None:
        return []
    found = []
    if not any(r.build(c.cuda.tag) for r in releases):
        available = ", ".join(b.tag for b in releases[0].cuda_builds)
        has = f"has: {available}" if available else "has no CUDA build there"
        found.append(
            f"no torch {c.torch_text} build for {c.cuda.tag} on {hw.platform} "
            f"(torch {releases[0].version} {has})"
        )
    found += _pinned_build_lacks_arch(releases, hw, c, kb)
    floor = kb.driver_floor(c.cuda, c.mode, hw.platform)
    if hw.jetpack is not None:
        problem = jetpack_problem(c.cuda, hw.jetpack, c.mode)
        found += [f"CUDA {c.cuda}: {problem}"] if problem else []
    elif hw.driver is not None and floor is not None and hw.driver < floor:
        found.append(f"CUDA {c.cuda} needs driver >= {floor}; this target has {hw.driver}")
    return found


def _pinned_build_lacks_arch(
    releases: list[TorchRelease], hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    """The asked CUDA's build exists but has no kernels for the GPU, while another build of
    the same releases does (torch 1.10's cu102 on an A100: its list stops at 7.0)."""
    assert c.cuda is not None
    pinned = [(r, b) for r in releases if (b := r.build(c.cuda.tag)) is not None]
    if hw.cpu or not pinned:
        return []
    found = []
    for cc in sorted(set(hw.compute_capabilities)):
        if any(b.covering(cc) for _, b in pinned):
            continue
        others = {b.tag: b for r in releases for b in r.cuda_builds if b.covering(cc)}
        if not others:
            continue  # no build of these releases covers it: _gpu_obstacles says so
        release, build = pinned[0]
        found.append(
            f"the {build.tag} build of torch {release.version} has no kernels for {cc.sm} "
            f"({kb.architecture_of(cc) or 'this architecture'}): its arch list is "
            f"{build.arch_text}; builds of torch {c.torch_text} that do: "
            + ", ".join(sorted(others, key=CudaVersion.from_tag))
        )
    return found


def covering_builds(
    kb: KnowledgeBase, platform: str, cc: ComputeCapability, mode: DriverCompat
) -> str:
    """Which builds of any known release cover ``cc`` on ``platform``, and what each needs:
    "cu128 (torch 2.7.0 - 2.11.0, driver >= 570.26), cu130 (...)"."""
    spans: dict[str, list[Version]] = {}
    for release in kb.torch_releases:
        for build in release.on(platform).cuda_builds:
            if build.covering(cc) is not None:
                spans.setdefault(build.tag, []).append(release.version)
    parts = []
    for tag, versions in sorted(spans.items(), key=lambda kv: min(kv[1])):
        build = next(
            b for r in kb.torch_releases for b in r.on(platform).cuda_builds if b.tag == tag
        )
        assert build.cuda is not None
        floor = kb.driver_floor(build.cuda, mode, platform)
        span = f"{min(versions)}" if len(versions) == 1 else f"{min(versions)} - {max(versions)}"
        parts.append(f"{tag} (torch {span}, driver >= {floor})")
    return ", ".join(parts) if parts else "none"


def _gpu_obstacles(
    releases: list[TorchRelease], hw: TargetHardware, c: Constraints, kb: KnowledgeBase
) -> list[str]:
    builds = [b for r in releases for b in r.cuda_builds]
    found = [
        f"no torch {c.torch_text} build for {hw.platform} has kernels for {cc.sm} "
        f"({kb.architecture_of(cc) or 'this architecture'}); builds that do: "
        + covering_builds(kb, hw.platform, cc, c.mode)
        for cc in sorted(set(hw.compute_capabilities))
        if not any(b.covering(cc) for b in builds)
    ]
    assert hw.driver is not None
    covering = [
        b for b in builds if all(b.covering(cc) for cc in hw.compute_capabilities) and b.cuda
    ]
    if hw.jetpack is not None:
        jetpack = hw.jetpack
        if covering and all(
            b.cuda is not None and jetpack_problem(b.cuda, jetpack, c.mode) for b in covering
        ):
            cudas = sorted({str(b.cuda) for b in covering})
            found.append(
                f"{jetpack.describe()} (driver {hw.driver}) runs CUDA up to {jetpack.cuda} "
                f"({c.mode.value}); every torch {c.torch_text} build that covers "
                f"{hw.gpu_name or 'the GPU'} needs CUDA {' or '.join(cudas)}"
            )
        return found
    floors = [kb.driver_floor(b.cuda, c.mode, hw.platform) for b in covering if b.cuda]
    if covering and not any(f is not None and hw.driver >= f for f in floors):
        needs = sorted(
            {
                f"{b.tag} needs driver >= {kb.driver_floor(b.cuda, c.mode, hw.platform)}"
                for b in covering
                if b.cuda is not None
            }
        )
        found.append(
            f"driver {hw.driver} is older than every torch {c.torch_text} build that covers "
            f"{hw.gpu_name or 'the GPU'} needs ({c.mode.value}): " + "; ".join(needs)
        )
    return found


def _below_known_pythons(asked: str, releases: list[TorchRelease]) -> bool:
    """Whether the asked Python (exact or a range) is one a release supports but gpuenv
    does not install (3.6 for torch 1.8: gpuenv starts at 3.8)."""
    first = int(KNOWN_PYTHONS[0].split(".")[1])
    older = [f"3.{m}" for m in range(first)]
    try:
        wanted = [p for p in older if p == asked or SpecifierSet(asked).contains(p)]
    except InvalidSpecifier:
        wanted = [p for p in older if p == asked]
    return any(r.python.contains(p) for r in releases for p in wanted)


def _predates(c: Constraints, kb: KnowledgeBase) -> str:
    """ ", which predates its knowledge (it starts at 1.7.0)" where the range asks for
    releases older than the oldest gpuenv plans (detr's torch 1.5: the report read as
    though 1.5 did not exist); "" otherwise."""
    oldest = min(r.version for r in kb.torch_releases)
    older = (
        Version(f"{major}.{minor}.{patch}")
        for major in range(oldest.major + 1)
        for minor in range(25)
        for patch in range(4)
    )
    if any(v < oldest and c.torch.contains(v, prereleases=True) for v in older):
        return f", which predates its knowledge (it starts at {oldest})"
    return ""


def obstacles(
    releases: list[TorchRelease],
    hw: TargetHardware,
    c: Constraints,
    kb: KnowledgeBase,
    facts_where: str,
) -> list[str]:
    """The distinct reasons nothing fits, most decisive first. ``releases`` are the
    matching ones, as the target's platform sees them."""
    if not releases:
        newer = newer_than_known(c.torch, kb)
        if newer:
            return [f"{newer}: upgrade gpuenv or {FACTS_HINT.format(where=facts_where)}"]
        return [f"no torch release gpuenv knows matches {c.torch_text!r}{_predates(c, kb)}"]
    found = _cuda_obstacles(releases, hw, c, kb)
    if not any(python_for(r.python, c.python) for r in releases):
        newest = releases[0]
        if _below_known_pythons(c.python, releases):
            # torch 1.8 supports 3.6, which gpuenv does not install: say so, not "unsupported"
            found.append(
                f"gpuenv installs Python {KNOWN_PYTHONS[0]} and later, not {c.python} "
                f"(torch {newest.version} supports {spec_text(newest.python)})"
                + newest.provenance.label()
            )
        else:
            found.append(
                f"no torch {c.torch_text} release supports Python {c.python} "
                f"({newest.version} supports {spec_text(newest.python)})"
                + newest.provenance.label()
            )
    if not hw.cpu:
        found.extend(_gpu_obstacles(releases, hw, c, kb))
    for package, wanted in (("torchvision", c.torchvision), ("torchaudio", c.torchaudio)):
        problems = {companion_problem(r, package, wanted) for r in releases}
        if None not in problems:
            found.append(_unpaired(releases, package, wanted, problems))
    return found or ["no build of the matching torch releases fits this target"]


def _unpaired(
    releases: list[TorchRelease], package: str, wanted: object, problems: set[str | None]
) -> str:
    """Why ``wanted`` fits none of ``releases``: all of them named when each has its own
    pairing (the first alone named torch 2.4.0 for a range whose plan is 2.4.1)."""
    paired = [
        (r.version, r.torchvision if package == "torchvision" else r.torchaudio)
        for r in sorted(releases, key=lambda r: r.version)
    ]
    if len(paired) < 2 or any(v is None for _, v in paired):
        return sorted(p for p in problems if p)[0]
    torches = ", ".join(str(t) for t, _ in paired)
    pairs = ", ".join(dict.fromkeys(str(v) for _, v in paired))
    return (
        f"{package} {wanted} pairs with none of torch {torches} (they pair with {package} {pairs})"
    )


# --- alternatives ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """An unsatisfiable target, as the alternative finders see it."""

    name: str
    hw: TargetHardware
    c: Constraints
    kb: KnowledgeBase
    matching: list[TorchRelease]

    def search(self, **changes: Any) -> Found | None:
        pool = changes.pop("pool", self.matching)
        hw = changes.pop("hw", self.hw)
        return search(pool, hw, replace(self.c, **changes), self.kb)

    @property
    def others(self) -> list[TorchRelease]:
        return [r for r in self.kb.torch_releases if r not in self.matching]


def _alt_cuda(p: Problem) -> Alternative | None:
    found = p.search(cuda=None) if p.c.cuda is not None else None
    if found is None or found.build.cuda is None:
        return None
    return Alternative(
        f"use CUDA {found.build.cuda} instead: {found.describe()}",
        {"stack.cuda": str(found.build.cuda)},
    )


def _alt_minor_compat(p: Problem) -> Alternative | None:
    if p.hw.cpu or p.c.mode is DriverCompat.MINOR:
        return None
    found = p.search(mode=DriverCompat.MINOR)
    if found is None:
        return None
    return Alternative(
        f"opt into CUDA minor-version compatibility: {found.describe()}",
        {"stack.driver-compat": "minor"},
    )


def _distance(release: TorchRelease, anchors: list[Version]) -> tuple[int, int]:
    """How far ``release`` is from the asked releases: minor series apart, then newest
    patch first."""
    if not anchors:
        return (0, -release.version.micro)

    def minor_index(v: Version) -> int:
        return v.major * 1000 + v.minor

    gap = min(abs(minor_index(release.version) - minor_index(a)) for a in anchors)
    return (gap, -release.version.micro)


def _anchors(p: Problem) -> list[Version]:
    """The asked releases, or where the data has none of them, the versions the torch
    specifier names (an unknown "1.6.0" is nearest to 1.7, not to the newest patch)."""
    if p.matching:
        return [m.version for m in p.matching]
    named = []
    for clause in p.c.torch:
        try:
            named.append(Version(clause.version.removesuffix(".*")))
        except InvalidVersion:
            continue
    return named


def _nearest_first(p: Problem) -> list[TorchRelease]:
    anchors = _anchors(p)
    return sorted(p.others, key=lambda r: (_distance(r, anchors), -r.version.minor))


def _alt_nearby_release(p: Problem) -> Alternative | None:
    for release in _nearest_first(p):
        found = p.search(pool=[release])
        if found is not None:
            return Alternative(
                f"the nearest torch release that fits: {found.describe()}",
                {p.c.torch_key: f"=={found.release.version}"},
            )
    return None


def _alt_jetpack(p: Problem) -> Alternative | None:
    """On a Jetson the driver comes with the board's JetPack release: the smallest newer
    JetPack that makes a build fit (the asked releases first, then the nearest)."""
    assert p.hw.driver is not None
    newer = [
        j
        for j in p.hw.jetpacks
        if j.driver is not None
        and j.driver != p.hw.driver
        and (p.hw.jetpack is None or j.cuda > p.hw.jetpack.cuda)
    ]
    pools = [p.matching, *([r] for r in _nearest_first(p))]
    for pool in pools:
        for jetpack in newer:
            assert jetpack.driver is not None
            found = p.search(pool=pool, hw=replace(p.hw, driver=jetpack.driver, jetpack=jetpack))
            if found is None:
                continue
            changes = {f"targets.{p.name}.driver": str(jetpack.driver)}
            if pool is not p.matching:
                changes[p.c.torch_key] = f"=={found.release.version}"
            return Alternative(
                f"flash {jetpack.describe()} (driver {jetpack.driver}, CUDA {jetpack.cuda}); "
                f"a Jetson's driver comes with its JetPack: {found.describe()}",
                changes,
            )
    return None


def _alt_driver(p: Problem) -> Alternative | None:
    """A driver upgrade, within the branches the GPU can run; on a Jetson, a JetPack
    release (its driver cannot be upgraded alone)."""
    if p.hw.cpu or p.hw.driver is None:
        return None
    if p.hw.jetson:
        return _alt_jetpack(p)
    last = min(
        (d for d in (p.kb.drivers_for(cc).last for cc in p.hw.compute_capabilities) if d),
        default=None,
    )
    ceiling = DriverVersion.parse(f"{last}.999.99") if last else DriverVersion.parse("9999.0")
    pools = [p.matching, *([r] for r in _nearest_first(p))]
    for pool in pools:
        found = p.search(pool=pool, hw=replace(p.hw, driver=ceiling))
        if found is None or found.build.cuda is None:
            continue
        floor = p.kb.driver_floor(found.build.cuda, p.c.mode, p.hw.platform)
        if floor is None or floor <= p.hw.driver:
            return None  # the driver is not what stands in the way
        # The smallest upgrade that works: the newest CUDA the GPU's drivers allow may
        # need a newer branch than an older build of the same release (cu132: R595,
        # cu130: R580).
        for lower in _driver_floors(p, pool, p.hw.driver, floor):
            smaller = p.search(pool=pool, hw=replace(p.hw, driver=lower))
            if smaller is not None and smaller.build.cuda is not None:
                floor = p.kb.driver_floor(smaller.build.cuda, p.c.mode, p.hw.platform) or lower
                found = smaller
                break
        changes = {f"targets.{p.name}.driver": f">={floor}"}
        if pool is not p.matching:
            changes[p.c.torch_key] = f"=={found.release.version}"
        return Alternative(f"install NVIDIA driver >= {floor} for {found.describe()}", changes)
    return None


def _driver_floors(
    p: Problem, pool: list[TorchRelease], above: DriverVersion, below: DriverVersion
) -> list[DriverVersion]:
    """The driver minimums of the pool's CUDA builds between ``above`` and ``below``
    (exclusive), lowest first."""
    floors = {
        floor
        for release in pool
        for build in release.on(p.hw.platform).cuda_builds
        if build.cuda is not None
        and (floor := p.kb.driver_floor(build.cuda, p.c.mode, p.hw.platform)) is not None
        and above < floor < below
    }
    return sorted(floors)


def _alt_python(p: Problem) -> Alternative | None:
    """The Python nearest to the one asked for that makes the asked torch fit."""
    asked = p.c.python if p.c.python in KNOWN_PYTHONS else None

    def gap(python: str) -> tuple[int, int]:
        minor = int(python.split(".")[1])
        return (abs(minor - int(asked.split(".")[1])) if asked else 0, -minor)

    for python in sorted(KNOWN_PYTHONS, key=gap):
        if python == p.c.python:
            continue
        found = p.search(python=python)
        if found is not None:
            return Alternative(f"another Python: {found.describe()}", {"stack.python": python})
    return None


def _alt_companions(p: Problem) -> list[Alternative]:
    alternatives = []
    for package in COMPANIONS:
        if not isinstance(getattr(p.c, package), str):
            continue
        found = p.search(**{package: None})
        if found is not None:
            paired = getattr(found.release, package)
            alternatives.append(
                Alternative(
                    f"{package} {paired}, the release paired with torch {found.release.version}",
                    {f"stack.{package}": str(paired)},
                )
            )
    return alternatives


def _alt_cpu(p: Problem) -> Alternative | None:
    if p.hw.cpu:
        return None
    cpu = replace(p.hw, cpu=True, compute_capabilities=())
    found = p.search(hw=cpu) or p.search(hw=cpu, pool=list(p.kb.torch_releases))
    if found is None:
        return None
    return Alternative(f"a CPU build: {found.describe()}", {f"targets.{p.name}.gpu": "none"})


def alternatives(problem: Problem) -> list[Alternative]:
    """Concrete changes that would work, the one that changes least first."""
    candidates = [
        _alt_cuda(problem),
        _alt_minor_compat(problem),
        _alt_nearby_release(problem),
        _alt_driver(problem),
        _alt_python(problem),
        *_alt_companions(problem),
        _alt_cpu(problem),
    ]
    unique: list[Alternative] = []
    for alternative in candidates:
        if alternative is not None and all(alternative.changes != u.changes for u in unique):
            unique.append(alternative)
    return unique
