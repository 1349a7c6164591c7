"""How each companion package (``knowledge/data/companions.toml``) follows the torch the
reproduction chose: kept, moved to its release paired with the new torch, built from
source for the target's GPU (with the nvcc it needs), or not reproducible."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from gpuenv.importers.merge import Resolved
from gpuenv.importers.report import (
    CHANGED,
    HIGH,
    KEPT,
    LOW,
    MEDIUM,
    NEEDS_BUILD,
    NONE,
    UNMANAGED,
    UNREPRODUCIBLE,
    Entry,
)
from gpuenv.knowledge.foreign import Companion, CompanionRelease
from gpuenv.plan import spec_text
from gpuenv.versions import ComputeCapability


@dataclass(frozen=True)
class Target:
    """What the companions must fit: the chosen torch and the target's GPU."""

    torch: Version
    build: str  # "cu118" or "cpu"
    cuda: str | None  # "11.8"
    cc: ComputeCapability | None  # the target's lowest compute capability; None: CPU
    # What a build compiles for ``cc`` when torch's nvcc is older than the GPU ("8.6" for
    # an RTX 4090 with CUDA 11.7, "9.0+PTX"): ``builds.model.arch_list``'s choice, or None
    # when it is ``cc`` itself.
    compiled_as: str | None = None

    @property
    def label(self) -> str:
        return f"{self.torch}+{self.build}"

    @property
    def arch_text(self) -> str:
        """ " for sm_89", with what is compiled instead where nvcc cannot target it."""
        if self.cc is None:
            return " (CPU-only)"
        if self.compiled_as is None:
            return f" for {self.cc.sm}"
        instead = ComputeCapability.parse(self.compiled_as.split("+")[0])
        if self.compiled_as.endswith("+PTX"):
            return (
                f" for {self.cc.sm} (as {instead.sm} PTX, which the driver compiles: nvcc "
                f"{self.cuda} generates no {self.cc.sm} code)"
            )
        return (
            f" for {self.cc.sm} (as {instead.sm}: nvcc {self.cuda} generates no {self.cc.sm} "
            f"code, and {instead.sm} code runs on it)"
        )


@dataclass(frozen=True)
class Move:
    """A companion's outcome: the entry to report and what (if anything) to install."""

    entry: Entry
    requirement: str | None  # the pip requirement to write; None: left out of the spec
    needs_toolkit: bool = False


def _gpu_fits(release: CompanionRelease, cc: ComputeCapability | None) -> bool:
    if cc is None:
        return True
    if release.gpu_min is not None and cc < release.gpu_min:
        return False
    return not (release.gpu_max is not None and cc > release.gpu_max)


def _fits(release: CompanionRelease, target: Target) -> bool:
    if not release.torch.contains(target.torch, prereleases=True):
        return False
    for cuda in (release.nvcc, release.cuda):
        if cuda is not None and target.cuda is not None and not cuda.contains(target.cuda):
            return False
    return _gpu_fits(release, target.cc)


def nearest(
    companion: Companion, version: Version | None, target: Target, within: str = ""
) -> CompanionRelease | None:
    """The release entry that fits ``target`` nearest to ``version``: the oldest at or
    above it, else the newest below it (unpinned: the newest that fits, and whose
    landing the files' range ``within`` allows when one does)."""
    fitting = [r for r in companion.releases if _fits(r, target) and not r.plain]
    if not fitting:
        return None
    if version is None:
        try:
            allowed = SpecifierSet(within)
        except InvalidSpecifier:
            allowed = SpecifierSet()
        inside = [r for r in fitting if allowed.contains(r.landing, prereleases=True)]
        return (inside or fitting)[-1]
    above = [r for r in fitting if r.landing >= version]
    return above[0] if above else fitting[-1]


def _nvcc(target: Target) -> str | None:
    return target.cuda


def _requirement(resolved: Resolved, version: Version | str | None, name: str | None = None) -> str:
    ask = resolved.ask
    extras = f"[{','.join(ask.extras)}]" if ask.extras else ""
    spec = f"=={version}" if version is not None else resolved.specifier
    return f"{name or resolved.name}{extras}{spec}"


def _entry(kind: str, resolved: Resolved, why: str, **fields: Any) -> Entry:
    return Entry(kind, resolved.name, why, origin=resolved.ask.origin, **fields)


def _kept(resolved: Resolved, why: str) -> Entry:
    """Kept as the files ask for it."""
    return _entry(KEPT, resolved, why, was=resolved.specifier, now=resolved.specifier or "any")


def _build_entry(
    resolved: Resolved, version: Version | None, target: Target, why: str, companion: Companion
) -> Entry:
    nvcc = _nvcc(target) if target.cc is not None else None
    arch = target.arch_text
    return _entry(
        NEEDS_BUILD,
        resolved,
        f"{why}: compiled against torch {target.label}{arch}"
        + (", with no build isolation" if companion.compiled_against_torch else ""),
        was=resolved.specifier or "any",
        now=str(version) if version else resolved.specifier or "any",
        nvcc=nvcc,
        risk=MEDIUM,
        risk_text="a source build; it takes a while and needs a host compiler nvcc accepts",
        unverified=companion.fact.unverified,
    )


def _cpu(companion: Companion, resolved: Resolved, target: Target) -> Move | None:
    cpu = companion.cpu_of(_public(resolved.exact))
    if target.cc is not None or cpu == "works":
        return None
    if cpu == "none":
        entry = _entry(
            UNREPRODUCIBLE,
            resolved,
            f"{companion.name} has no CPU implementation: the target has no GPU",
            was=resolved.specifier or "any",
            risk=HIGH,
        )
        return Move(entry, None)
    return None  # "degraded": handled by the caller's risk


def paired(companion: Companion, resolved: Resolved, target: Target) -> Move:
    """xformers, vllm: each release built against one torch release."""
    if resolved.ask.url:  # a checkout the files build (Qwen2.5-VL's image: vllm at a
        # commit): that source, compiled against this torch, not some release of it
        return _source_url(companion, resolved, target)
    version = resolved.exact
    current = companion.release_of(version) if version else None
    if current is not None and _fits(current, target) and version is not None:
        lacking = companion.wheels_lack(version, target.cc) if target.cc else None
        if lacking is not None:
            why = (
                f"{companion.name} {version}'s wheels carry no {target.cc.sm if target.cc else ''}"
                f" kernels (they arrived in {lacking.since})"
            )
            return Move(
                _build_entry(resolved, version, target, why, companion),
                _requirement(resolved, version),
                True,
            )
        entry = _entry(
            KEPT, resolved, f"built for torch {target.torch}", was=str(version), now=str(version)
        )
        return Move(entry, _requirement(resolved, version))
    found = nearest(companion, version, target, resolved.specifier if version is None else "")
    if found is None:
        why = f"no {companion.name} release is built for torch {target.torch}"
        if version is None or companion.build == "never":  # pure Python (torchdata): no build
            was = str(version) if version is not None else "any"
            entry = _entry(UNREPRODUCIBLE, resolved, why, was=was, risk=HIGH)
            return Move(entry, None)
        return Move(
            _build_entry(resolved, version, target, why, companion),
            _requirement(resolved, version),
            True,
        )
    landing = found.landing
    if version is None and resolved.specifier:
        # A range: the release in it built for this torch (xformers>=0.0.20 on torch
        # 2.0.1 takes 0.0.22), or the nearest outside it when none in it is.
        inside = _allows(resolved.specifier, landing)
        why = (
            f"{landing} is the newest release in {resolved.specifier!r} that fits torch "
            f"{target.torch} on this target"
            if inside
            else f"no release in {resolved.specifier!r} fits torch {target.torch} on this "
            f"target; {landing} does"
        )
    else:
        pinned = f"{version}" if version else "unpinned"
        why = f"{pinned} is not built for torch {target.torch}; {landing} is"
    entry = _entry(
        CHANGED,
        resolved,
        why,
        was=str(version) if version else resolved.specifier or "any",
        now=str(landing),
        risk=MEDIUM if version else LOW,
        risk_text="another release of the package: behaviour and numerics may differ",
        unverified=found.fact.unverified,
    )
    return Move(entry, _requirement(resolved, landing))


def wheel_page(
    companion: Companion,
    resolved: Resolved,
    target: Target,
    successor: Companion | None,
    family: str = "",
) -> Move:
    """mmcv, PyG: wheels per (torch, CUDA) on a find-links page. An unpinned one lands
    inside the files' range and what its pinned family members accept (``family``)."""
    version, label = _unlabelled(resolved.exact)
    current = companion.release_of(version) if version else None
    name, chosen = companion.name, version
    why = f"built for torch {target.torch}"
    moved_from = None
    if current is None or not _fits(current, target) or version is None:
        found = nearest(companion, version, target, resolved.specifier)
        if found is None and successor is not None:
            found = nearest(successor, None, target)
            name = successor.name if found is not None else name
        if found is None:
            why = f"no {companion.name} release is known to support torch {target.torch}"
        else:
            chosen = found.landing
            if version is None and name == companion.name:
                within = ",".join(t for t in (resolved.specifier, family) if t)
                chosen = _landing_within(companion, target, within) or chosen
            moved_from = str(resolved.exact) if version else resolved.specifier or "any"
            why = f"{chosen} is the {name} release with wheels for torch {target.torch}"
    page = companion.page_for(target.torch, target.build)
    build_why = f"{why}; gpuenv's lock cannot read its wheel page yet" + (
        f" ({page})" if page else ""
    )
    if label is not None:
        build_why += f"; {_label_why(label, target)}"
        moved_from = moved_from or str(resolved.exact)
    entry = _build_entry(resolved, chosen, target, build_why, companion)
    if moved_from is not None:
        risk = HIGH if name != companion.name else MEDIUM
        text = companion.note if name != companion.name else "another release: its ops may differ"
        if name == companion.name and chosen == version:
            text = "the same release, compiled here instead of the prebuilt wheel"
        entry = Entry(
            NEEDS_BUILD,
            companion.name,
            entry.why,
            origin=entry.origin,
            was=moved_from,
            now=f"{name} {chosen}" if name != companion.name or chosen != version else str(chosen),
            nvcc=entry.nvcc,
            risk=risk,
            risk_text=text,
            unverified=entry.unverified,
        )
    return Move(entry, _requirement(resolved, chosen, name), True)


def _landing_within(companion: Companion, target: Target, within: str) -> Version | None:
    """The newest release that fits ``target`` and the specifier ``within``: each entry's
    newest release, else its first (mmcv-full 1.6.0, not 1.6.2, beside an mmdet that
    accepts mmcv-full <= 1.6.0)."""
    try:
        allowed = SpecifierSet(within)
    except InvalidSpecifier:
        return None
    fitting = [r for r in companion.releases if _fits(r, target) and not r.plain]
    for release in reversed(fitting):
        for candidate in (release.landing, release.version):
            if allowed.contains(candidate, prereleases=True):
                return candidate
    return None


# PyG's wheel labels: +pt113cu117 is torch 1.13 with CUDA 11.7, +pt20cpu torch 2.0 on CPU.
_PYG_LABEL = re.compile(r"^pt(?P<major>\d)(?P<minor>\d+)(?P<build>cu\d+|cpu)$")


def _unlabelled(version: Version | None) -> tuple[Version | None, str | None]:
    """``2.1.0+pt113cu117`` -> (2.1.0, "pt113cu117"): a local label names one wheel on a
    find-links page; a source build (what the lock makes) carries none."""
    if version is None or version.local is None:
        return version, None
    return Version(version.public), version.local


def _label_why(label: str, target: Target) -> str:
    match = _PYG_LABEL.match(label)
    if match is None:
        return f"its +{label} label names a wheel the lock cannot fetch: written without it"
    series = f"{match['major']}.{match['minor']}"
    build = match["build"]
    here = f"{target.torch.major}.{target.torch.minor}"
    if (series, build) == (here, target.build):
        return (
            f"its +{label} wheel (torch {series}, {build}) matches this torch, but only that "
            "page has it: written without the label, built from source"
        )
    return (
        f"its +{label} wheel was built for torch {series} with {build}, not torch "
        f"{target.label}: written without the label, built for this torch"
    )


def source(companion: Companion, resolved: Resolved, target: Target) -> Move:
    """flash-attn, apex, detectron2, pytorch3d: always compiled against torch."""
    if resolved.ask.url:  # a git checkout (or archive) the files name: kept as it is
        return _source_url(companion, resolved, target)
    version = resolved.exact
    current = companion.release_of(version) if version else None
    if version is None:
        found = nearest(companion, None, target)
        if companion.releases and found is None:
            return _no_source_release(companion, resolved, target, "any")
        if found is not None and found is not companion.releases[-1]:
            version, current = found.landing, found
        else:
            why = _no_wheels(companion, None, target)
            return _source_move(companion, resolved, None, target, why)
    if current is None or _fits(current, target):
        why = _no_wheels(companion, version, target)
        return _source_move(companion, resolved, version, target, why)
    found = nearest(companion, version, target)
    if found is None:
        return _no_source_release(companion, resolved, target, str(version))
    why = f"{version} {_source_reason(current, target)}; {found.landing} builds with it"
    entry = _source_entry(resolved, found.landing, target, why, companion)
    entry = Entry(
        NEEDS_BUILD,
        entry.package,
        entry.why,
        origin=entry.origin,
        was=str(version),
        now=str(found.landing),
        nvcc=entry.nvcc,
        risk=HIGH,
        risk_text="another release, compiled from source"
        + (f"; {companion.instead}" if companion.instead else ""),
        unverified=found.fact.unverified,
    )
    return Move(entry, _source_requirement(companion, resolved, found.landing), True)


def _no_wheels(companion: Companion, version: Version | None, target: Target) -> str:
    """Why a source companion is compiled: no prebuilt wheels at all, or none for this
    torch and build (detectron2's find-links pages exist for a few pairs only)."""
    name = f"{companion.name} {version}" if version else companion.name
    release = companion.release_of(version) if version else None
    release = release or (companion.releases[-1] if companion.releases else None)
    if release is None or not release.wheels:
        if companion.git:
            return (
                f"{companion.name} installs from its git repository only (PyPI has no build of it)"
            )
        return f"{companion.name} has no prebuilt wheels gpuenv can use"
    series = f"{target.torch.major}.{target.torch.minor}"
    pair = f"{target.build}/torch{series}"
    page = companion.page_for(target.torch, target.build)
    if pair in release.wheels:
        return (
            f"{name} has a prebuilt wheel for torch {series} with {target.build} on its "
            f"find-links page ({page}), which gpuenv's lock cannot read yet"
        )
    serieses = sorted({w.split("/torch")[1] for w in release.wheels}, key=Version)
    return (
        f"{name}'s prebuilt wheels (find-links pages per CUDA build and torch series) cover "
        f"torch {', '.join(serieses)} only, none for torch {target.label}"
    )


def _source_move(
    companion: Companion,
    resolved: Resolved,
    version: Version | None,
    target: Target,
    why: str,
) -> Move:
    entry = _source_entry(resolved, version, target, why, companion)
    requirement = _source_requirement(companion, resolved, version)
    return Move(_unpinned_git(entry, requirement), requirement, True)


_GIT_REF = re.compile(r"@([^#@/]+)(#|$)")


def _unpinned_git(entry: Entry, requirement: str) -> Entry:
    """A git source with no ref: the lock takes whatever its default branch is then."""
    url = requirement.split(" @ ", 1)[1].split("#", 1)[0] if " @ " in requirement else ""
    if not url.startswith("git+") or _GIT_REF.search(url.split("://", 1)[-1]):
        return entry
    return replace(
        entry,
        risk=HIGH,
        risk_text=f"{entry.risk_text}; no release named: the lock freezes the commit its "
        "default branch has when written",
    )


def _source_entry(
    resolved: Resolved, version: Version | None, target: Target, why: str, companion: Companion
) -> Entry:
    entry = _build_entry(resolved, version, target, why, companion)
    if companion.instead:
        entry = replace(entry, risk_text=f"{entry.risk_text}; {companion.instead}")
    return entry


def _source_requirement(companion: Companion, resolved: Resolved, version: Version | None) -> str:
    """The pip line of a source companion: its git source when PyPI has no such project
    (``name @ git+https://...@v0.6``), else ``name==version``."""
    if companion.git is None:
        return _requirement(resolved, version)
    url = companion.git
    if "{version}" in url:
        url = url.format(version=version) if version else url.split("@v{version}")[0]
    return f"{resolved.name} @ {url}"


def pip_url(url: str) -> str:
    """A direct reference as a requirement writes it: pip's ``#egg=`` fragment dropped (the
    name is written before the ``@``), a ``#subdirectory=`` kept (tiny-cuda-nn's torch
    bindings build from ``bindings/torch``, not the repository's top)."""
    base, _, fragment = url.partition("#")
    kept = [(k, v) for k, v in parse_qsl(fragment) if k == "subdirectory" and v]
    return f"{base}#subdirectory={kept[0][1]}" if kept else base


def _source_url(companion: Companion, resolved: Resolved, target: Target) -> Move:
    """A source companion the files install from a URL (``git+https://...``): the URL is
    written as it is (the lock pins a git ref at the commit it names)."""
    url = pip_url(resolved.ask.url or "")
    why = f"installed from {url}"
    entry = _source_entry(resolved, None, target, why, companion)
    entry = replace(entry, was=url, now=url)
    requirement = f"{resolved.name} @ {url}"
    return Move(_unpinned_git(entry, requirement), requirement, True)


def _no_source_release(companion: Companion, resolved: Resolved, target: Target, was: str) -> Move:
    why = (
        f"no {companion.name} release builds with torch {target.torch}"
        + (f", CUDA {target.cuda}" if target.cuda else "")
        + (target.arch_text if target.cc else "")
    )
    return Move(_entry(UNREPRODUCIBLE, resolved, why, was=was, risk=HIGH), None)


def _source_reason(release: CompanionRelease, target: Target) -> str:
    if not release.torch.contains(target.torch, prereleases=True):
        return f"needs torch {release.torch}"
    if release.nvcc is not None and target.cuda and not release.nvcc.contains(target.cuda):
        return f"needs nvcc {release.nvcc}"
    if target.cc is not None and release.gpu_min is not None and target.cc < release.gpu_min:
        return f"needs compute capability >= {release.gpu_min}"
    return f"supports compute capability up to {release.gpu_max}"  # _fits: what is left


def jit(companion: Companion, resolved: Resolved, target: Target) -> Move:
    """deepspeed: ops compiled at first use."""
    version = resolved.exact
    requirement = _requirement(resolved, version) if version else resolved.ask.requirement_text()
    if target.cc is None:
        entry = _kept(resolved, "CPU: its CUDA ops are not used")
        return Move(entry, requirement)
    entry = _entry(
        NEEDS_BUILD,
        resolved,
        f"its ops are compiled at first use (JIT){target.arch_text} against torch {target.label}",
        was=resolved.specifier or "any",
        now=resolved.specifier or "any",
        nvcc=target.cuda,
        risk=LOW,
        risk_text="the first run compiles; nvcc must be the toolkit gpuenv adds",
    )
    return Move(entry, requirement, True)


def cuda_binaries(companion: Companion, resolved: Resolved, target: Target) -> Move:
    """bitsandbytes: its own CUDA binaries; moves for a GPU or a torch floor."""
    version = resolved.exact
    if version is None:
        entry = _entry(KEPT, resolved, "unpinned", was=resolved.specifier, now=resolved.specifier)
        return Move(entry, resolved.ask.requirement_text())
    lacking = companion.wheels_lack(version, target.cc) if target.cc else None
    current = companion.release_of(version)
    if lacking is None and (current is None or _fits(current, target)):
        entry = _entry(
            KEPT, resolved, "its binaries cover this target", was=str(version), now=str(version)
        )
        return Move(entry, _requirement(resolved, version))
    unverified = False
    if lacking is not None:
        landing = lacking.since
        lacks = lacking.what or "binaries"
        why = f"{version} has no {lacks} for {lacking.cc.sm}; {landing} is the first that has"
        unverified = lacking.fact.unverified
    else:
        found = nearest(companion, version, target)
        reason = f"{version} does not support torch {target.torch}"
        carried = current.cuda if current is not None else None
        if carried is not None and target.cuda is not None and not carried.contains(target.cuda):
            reason = (
                f"{version}'s wheels carry binaries for CUDA {spec_text(carried)}, "
                f"not torch's {target.cuda}"
            )
        if found is None:
            entry = _entry(
                KEPT,
                resolved,
                f"{reason}, and no release gpuenv knows does",
                was=str(version),
                now=str(version),
                risk=HIGH,
                risk_text="its CUDA binaries may fail to load",
                unverified=companion.fact.unverified,
            )
            return Move(entry, _requirement(resolved, version))
        landing = found.landing
        why = f"{reason}; {landing} does"
        unverified = found.fact.unverified
    entry = _entry(
        CHANGED,
        resolved,
        why,
        was=str(version),
        now=str(landing),
        risk=MEDIUM,
        risk_text="another release: quantisation kernels may differ",
        unverified=unverified,
    )
    return Move(entry, _requirement(resolved, landing))


def cuda_suffix(companion: Companion, resolved: Resolved, target: Target) -> Move:
    """cupy-cudaXXx: one project per CUDA major."""
    if target.cuda is None:
        entry = _entry(
            UNREPRODUCIBLE,
            resolved,
            "cupy needs CUDA: the target has no GPU",
            was=resolved.name,
            risk=HIGH,
        )
        return Move(entry, None)
    major = target.cuda.split(".")[0]
    wanted = f"cupy-cuda{major}x"
    if resolved.name == wanted:
        entry = _kept(resolved, "matches torch's CUDA major")
        return Move(entry, resolved.ask.requirement_text())
    entry = _entry(
        CHANGED,
        resolved,
        f"torch's CUDA is {target.cuda}: cupy's CUDA {major} project",
        was=resolved.name,
        now=wanted,
        risk=LOW,
    )
    return Move(entry, f"{wanted}{resolved.specifier}")


def unmanaged(companion: Companion, resolved: Resolved, target: Target) -> Move:
    """TensorFlow, JAX, ...: reported, left out of the spec."""
    version = resolved.exact
    current = companion.release_of(version) if version else None
    if current is not None and target.cc is not None and not _gpu_fits(current, target.cc):
        why = (
            f"{companion.name} {version} was built for GPUs up to compute capability "
            f"{current.gpu_max}: no kernels for {target.cc.sm}"
        )
        return Move(_entry(UNREPRODUCIBLE, resolved, why, was=str(version), risk=HIGH), None)
    why = f"left out of the spec: {companion.note}" if companion.note else "left out of the spec"
    entry = _entry(UNMANAGED, resolved, why, was=resolved.specifier or "any", risk=MEDIUM)
    return Move(entry, None)


def pinned_bound(companion: Companion, specifier: str, torch: Sequence[Version]) -> str | None:
    """The torch releases among ``torch`` whose wheels require a release of ``companion``
    that ``specifier`` accepts (triton>=3.5.0: torch 2.9.0 on), as a specifier; None when
    the data says nothing (no releases, or a specifier that does not parse)."""
    if not companion.releases:
        return None
    try:
        wanted = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None
    fits = sorted(t for t in torch if _pinned_accepts(companion, wanted, t))
    if not fits:
        return f"<{min(torch)}" if torch else None  # none: the bound excludes every release
    bound = f">={fits[0]}"
    return bound if fits[-1] == max(torch) else f"{bound},<={fits[-1]}"


def _pinned_accepts(companion: Companion, wanted: SpecifierSet, torch: Version) -> bool:
    return any(
        wanted.contains(v, prereleases=True)
        for r in companion.releases_for(torch)
        for v in (r.version, r.latest)
        if v is not None
    )


def torch_pinned(companion: Companion, resolved: Resolved, target: Target) -> Move:
    own = [r.version for r in companion.releases_for(target.torch)]
    try:
        wanted = SpecifierSet(resolved.specifier) if resolved.specifier else None
    except InvalidSpecifier:
        wanted = None
    if own and wanted is not None and not any(wanted.contains(v, True) for v in own):
        # mamba-ssm's triton>=3.5.0 beside a torch whose wheels pin triton 3.3.1: the
        # project's own requirement cannot hold, and its install will say so.
        why = (
            f"torch {target.torch}'s wheels require {resolved.name} {own[0]}, which "
            f"{resolved.specifier!r} excludes: the files' {resolved.name} requirement cannot "
            "hold beside this torch"
        )
        entry = _entry(CHANGED, resolved, why, was=resolved.specifier, now=f"{own[0]}", risk=HIGH)
        return Move(entry, None)
    entry = _entry(
        CHANGED,
        resolved,
        f"torch {target.torch}'s wheels require their own exact {resolved.name}",
        was=resolved.specifier or "any",
        now=f"torch {target.torch}'s",
        risk=NONE if not resolved.specifier else LOW,
    )
    return Move(entry, None)


def move(
    companion: Companion,
    resolved: Resolved,
    target: Target,
    successor: Companion | None,
    family: str = "",
) -> Move:
    """Dispatch on ``companion.moves``; ``family``: what the files' pinned family members
    accept of this companion (a specifier), where an unpinned one has a choice."""
    cpu = _cpu(companion, resolved, target)
    if cpu is not None and companion.moves not in ("unmanaged", "torch-pinned"):
        return cpu
    handlers = {
        "paired": paired,
        "source": source,
        "jit": jit,
        "cuda-binaries": cuda_binaries,
        "cuda-suffix": cuda_suffix,
        "unmanaged": unmanaged,
        "torch-pinned": torch_pinned,
    }
    if companion.moves == "wheel-page":
        result = wheel_page(companion, resolved, target, successor, family)
    else:
        result = handlers[companion.moves](companion, resolved, target)
    if target.cc is not None or companion.cpu_of(_public(resolved.exact)) != "degraded":
        return result
    since = companion.cpu_since()
    if resolved.exact is None and since is not None and _fits(since, target):
        return result  # unpinned: the lock takes a release that runs on CPU
    return _degraded_on_cpu(result, companion, since)


def _public(version: Version | None) -> Version | None:
    return Version(version.public) if version is not None else None


def _degraded_on_cpu(result: Move, companion: Companion, since: CompanionRelease | None) -> Move:
    """A companion whose CUDA kernels a CPU target cannot run: a move, a build or a keep
    says so, at high risk, with the first release that runs on CPU where one does."""
    entry = result.entry
    said = "the target has no GPU: it imports, but its CUDA kernels cannot run"
    if since is not None:
        said += (
            f" ({companion.name} {since.version} and later run on CPU, with torch {since.torch})"
        )
    if entry.kind in (CHANGED, NEEDS_BUILD):
        degraded = replace(
            entry,
            risk=HIGH,
            risk_text=(f"{entry.risk_text}; " if entry.risk_text else "") + said,
        )
    elif entry.kind == KEPT:
        degraded = replace(
            entry,
            why=said,
            risk=HIGH,
            risk_text="GPU-only code paths fail on CPU",
        )
    else:
        return result
    return Move(degraded, result.requirement, result.needs_toolkit)


CUPY = re.compile(r"^cupy-cuda\d+x?$")
NVIDIA_WHEEL = re.compile(r"^nvidia-[a-z0-9-]+-cu\d+$")
# torch 2.11's CUDA wheels require cuda-toolkit[cublas,cudart,...]==<its CUDA> (NVIDIA's
# metapackage of those runtime wheels), as earlier builds required nvidia-*-cu12 directly
CUDA_TOOLKIT_WHEEL = "cuda-toolkit"


def companion_name(name: str) -> str:
    """The companions.toml entry a PyPI name belongs to (cupy-cuda11x -> cupy,
    nvidia-cublas-cu12 -> nvidia-cuda-wheels)."""
    if CUPY.match(name):
        return "cupy"
    if NVIDIA_WHEEL.match(name) or name == CUDA_TOOLKIT_WHEEL:
        return "nvidia-cuda-wheels"
    return name


def _allows(specifier: str, version: Version) -> bool:
    """Whether the files' range ``specifier`` takes ``version`` (an unreadable one: no)."""
    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False
