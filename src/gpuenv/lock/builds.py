"""Locking builds: which packages of a target are compiled at install, and the exact
inputs of each (``gpuenv.builds.model``), recorded in the target's ``builds`` list beside
(not inside) its ``pip`` list.

A package is a build when

- the spec declares it (``[pip.build.<name>]``), or it is a direct dependency that the
  knowledge base says is always compiled against the prefix's torch (flash-attn,
  mamba-ssm, ...): it is locked from its sdist even where wheels exist (a prebuilt wheel
  is compiled against some other torch), with the knowledge base's options unless the
  spec says otherwise;
- or the resolution found no wheel for the target (only an sdist), or the requirement is
  a git repository (``name @ git+https://...@<ref>``: locked at the commit the ref
  resolves to when the lock is written).

Before the resolution, the declared builds add what they need: their build requirements
(installed in the prefix first, when the build runs there), the declared dependencies of
packages whose metadata cannot be read without torch, and a toolkit (nvcc) matched to
torch's CUDA when one needs it. A build found only in the resolution that needs more than
that is reported in ``Missing``, and the locker resolves once more.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuenv.builds import knowledge
from gpuenv.builds.model import BuildEntry, BuildInputs, BuildSource, arch_list, compute_identity
from gpuenv.errors import Alternative, NoCompatiblePlan
from gpuenv.lock.model import CondaPackage, LockedTarget, PipPackage
from gpuenv.names import normalize_name, requirement_name
from gpuenv.spec import BuildOptions, Spec

if TYPE_CHECKING:
    from gpuenv.lock.sdistscan import Scanned
    from gpuenv.plan import TargetPlan

# What a torch extension found in an sdist (not in the knowledge base) is given to build
# in the prefix: setuptools, as torch.utils.cpp_extension builds with it.
DETECTED_REQUIRES = ("setuptools",)


@dataclass(frozen=True)
class Wanted:
    """How one package is built: the spec's options over the knowledge base's defaults."""

    name: str
    forced: bool  # locked from its sdist even where wheels exist
    declared: bool  # the spec has [pip.build.<name>]: an index without its sdist is an error
    against_torch: bool
    no_build_isolation: bool
    toolkit: bool
    env: tuple[tuple[str, str], ...]
    build_requires: tuple[str, ...]
    requires_dist: tuple[str, ...] | None
    extra_archs: tuple[str, ...]
    max_jobs: int | None
    host_compiler: str | None


def wanted(name: str, spec: Spec, *, forced: bool) -> Wanted:
    options = spec.pip.build.get(name) or BuildOptions()
    known = knowledge.defaults_for(name)
    isolation_off = _pick(options.no_build_isolation, known.no_build_isolation if known else None)
    env = dict(known.env if known else ())
    env.update(dict(options.env))
    requires = options.build_requires
    if requires is None:
        requires = known.build_requires if known else ()
    return Wanted(
        name=name,
        forced=forced,
        declared=name in spec.pip.build,
        against_torch=_pick(
            options.against_torch, known.against_torch if known else None, isolation_off
        ),
        no_build_isolation=isolation_off,
        toolkit=_pick(options.toolkit, known.toolkit if known else None),
        env=tuple(sorted(env.items())),
        build_requires=tuple(requires) if isolation_off else (),
        requires_dist=options.requires_dist
        if options.requires_dist is not None
        else (known.requires_dist if known and isolation_off else None),
        extra_archs=options.extra_archs,
        max_jobs=options.max_jobs,
        host_compiler=options.host_compiler,
    )


def _pick(*values: bool | None) -> bool:
    return next((v for v in values if v is not None), False)


def declared(spec: Spec) -> dict[str, Wanted]:
    """The builds known before resolving: the spec's, and direct dependencies the
    knowledge base says are compiled against torch."""
    names = set(spec.pip.build)
    for line in spec.pip.dependencies:
        name = normalize_name(requirement_name(line))  # a validated spec's line
        known = knowledge.defaults_for(name)
        if known is not None and known.against_torch and known.build == "always":
            names.add(name)
    return {name: wanted(name, spec, forced=True) for name in sorted(names)}


def metadata_for(name: str, spec: Spec) -> tuple[str, ...] | None:
    """The declared dependencies of ``name`` (the spec's, else the knowledge base's), for a
    package uv found only as an sdist whose metadata needs torch to be read."""
    return wanted(name, spec, forced=False).requires_dist


@dataclass(frozen=True)
class BuildNeeds:
    """What builds add to a target's resolution."""

    requirements: tuple[str, ...] = ()  # build requirements, installed in the prefix first
    no_binary: tuple[str, ...] = ()
    dependency_metadata: tuple[tuple[str, tuple[str, ...]], ...] = ()
    toolkit: bool = False

    def covers(self, other: BuildNeeds) -> bool:
        return set(other.requirements) <= set(self.requirements) and (
            self.toolkit or not other.toolkit
        )

    def union(self, other: BuildNeeds) -> BuildNeeds:
        return BuildNeeds(
            tuple(dict.fromkeys((*self.requirements, *other.requirements))),
            tuple(dict.fromkeys((*self.no_binary, *other.no_binary))),
            tuple(dict.fromkeys((*self.dependency_metadata, *other.dependency_metadata))),
            self.toolkit or other.toolkit,
        )


def needs(builds: Mapping[str, Wanted], *, cuda: str | None) -> BuildNeeds:
    requirements: list[str] = []
    for w in builds.values():
        requirements += [r for r in w.build_requires if r not in requirements]
    return BuildNeeds(
        requirements=tuple(requirements),
        no_binary=tuple(n for n, w in builds.items() if w.forced),
        dependency_metadata=tuple(
            (n, w.requires_dist) for n, w in builds.items() if w.requires_dist is not None
        ),
        toolkit=cuda is not None and any(w.toolkit for w in builds.values()),
    )


def _is_wheel(package: PipPackage) -> bool:
    return package.filename.endswith(".whl") and not package.url.startswith("git+")


def found(
    spec: Spec,
    pip: tuple[PipPackage, ...],
    known: Mapping[str, Wanted],
    scan: Callable[[PipPackage], Scanned | None] | None = None,
) -> dict[str, Wanted]:
    """Every build of this resolution: the declared ones, and packages that came as an
    sdist (built with the knowledge base's options; else with what ``scan`` finds in
    the sdist, ``lock.sdistscan``; else isolated)."""
    out = {}
    for package in pip:
        if package.name in known:
            out[package.name] = known[package.name]
        elif not _is_wheel(package):
            w = wanted(package.name, spec, forced=False)
            if scan is not None and knowledge.defaults_for(package.name) is None:
                w = _detected(w, spec, scan(package))
            out[package.name] = w
    return out


def _detected(w: Wanted, spec: Spec, scanned: Scanned | None) -> Wanted:
    """``w`` with what the sdist showed, where ``[pip.build.<name>]`` says nothing."""
    if scanned is None or not (scanned.torch_extension or scanned.cuda):
        return w
    options = spec.pip.build.get(w.name) or BuildOptions()
    in_prefix = _pick(options.no_build_isolation, scanned.torch_extension)
    requires = options.build_requires
    return replace(
        w,
        no_build_isolation=in_prefix,
        against_torch=_pick(options.against_torch, in_prefix),
        toolkit=_pick(options.toolkit, scanned.cuda),
        build_requires=tuple(requires if requires is not None else DETECTED_REQUIRES)
        if in_prefix
        else (),
    )


def toolkit_version(
    spec: Spec, plan: TargetPlan, pip: tuple[PipPackage, ...], conda: tuple[CondaPackage, ...]
) -> str | None:
    """The locked nvcc: NVIDIA's wheel, conda's cuda-nvcc, or a pinned system toolkit."""
    major = (plan.cuda or "").split(".")[0]
    for package in pip:
        if package.name in (f"nvidia-cuda-nvcc-cu{major}", "nvidia-cuda-nvcc"):  # 13: no suffix
            return package.version
    for record in conda:
        if record.name == "cuda-nvcc":
            return record.version
    toolkit = spec.stack.toolkit
    if toolkit is not None and toolkit.startswith("system:"):
        return f"{plan.cuda} ({toolkit})"
    return None


@dataclass(frozen=True)
class LockedBuilds:
    """One target's resolution split for the lock: the pip packages installed as resolved,
    and the packages compiled at install."""

    pip: tuple[PipPackage, ...]  # the resolution minus the builds' sdists
    builds: tuple[BuildEntry, ...]


def lock_builds(
    plan: TargetPlan,
    pip: tuple[PipPackage, ...],
    builds: Mapping[str, Wanted],
    toolkit: str | None,
    previous: LockedTarget | None,
    environ: Mapping[str, str] | None = None,
    *,
    nvcc_max: str | None = None,
) -> LockedBuilds:
    """The build entries of one target, and its pip list without their sdists.
    ``nvcc_max``: the newest arch the toolkit's nvcc knows (the knowledge base's)."""
    by_name = {p.name: p for p in pip}
    hashes = {p.name: p.sha256 for p in pip}
    before = {b.name: b for b in previous.builds} if previous is not None else {}
    entries = []
    for name, w in sorted(builds.items()):
        package = by_name.get(name)
        if package is None:
            continue  # declared, but not part of this target's resolution
        if _is_wheel(package):
            if w.declared:
                raise NoCompatiblePlan(
                    f"target {plan.target}: [pip.build.{name}] asks to build {name} "
                    f"{package.version} from source, but the index has no sdist of it",
                    target=plan.target,
                    alternatives=[
                        Alternative(f"install {name}'s wheel: remove [pip.build.{name}]", {}),
                    ],
                )
            continue  # the knowledge base's package, but only wheels exist: take the wheel
        entry = _entry(plan, package, w, by_name, toolkit, before.get(name), environ, nvcc_max)
        entries.append(entry)
    return LockedBuilds(
        tuple(p for p in pip if p.name not in {e.name for e in entries}),
        tuple(
            BuildEntry(
                e.name,
                e.version,
                e.source,
                e.inputs,
                compute_identity(e.name, e.version, e.source, e.inputs, hashes),
                e.requires,
                e.max_jobs,
            )
            for e in entries
        ),
    )


def _entry(
    plan: TargetPlan,
    package: PipPackage,
    w: Wanted,
    by_name: Mapping[str, PipPackage],
    toolkit: str | None,
    previous: BuildEntry | None,
    environ: Mapping[str, str] | None,
    nvcc_max: str | None,
) -> BuildEntry:
    torch = by_name.get("torch") if w.against_torch else None
    uses_nvcc = w.toolkit and plan.cuda is not None and toolkit is not None
    ccs = [str(c) for c in plan.hardware.compute_capabilities]
    compiled = w.against_torch or uses_nvcc
    from gpuenv.builds import compiler  # here: it starts processes, `lock --check` never

    host = w.host_compiler or (
        compiler.for_lock(
            environ if environ is not None else os.environ,
            plan.cuda if uses_nvcc else None,
            previous.inputs.host_compiler if previous is not None else None,
        )
        if compiled
        else None
    )
    inputs = BuildInputs(
        python=".".join(plan.python.split(".")[:2]),
        platform=plan.hardware.platform,
        against_torch=w.against_torch,
        no_build_isolation=w.no_build_isolation,
        torch=torch.version if torch else None,
        torch_sha256=torch.sha256 if torch else None,
        cuda=plan.cuda if uses_nvcc else None,
        toolkit=toolkit if uses_nvcc else None,
        arch_list=(
            arch_list(ccs, w.extra_archs, nvcc_max=nvcc_max, torch_archs=plan.arch_list)
            if uses_nvcc
            else None
        ),
        host_compiler=host,
        env=w.env,
        build_requires=tuple(sorted(normalize_name(requirement_name(r)) for r in w.build_requires)),
    )
    return BuildEntry(
        package.name, package.version, source_of(package), inputs, "", package.requires, w.max_jobs
    )


def source_of(package: PipPackage) -> BuildSource:
    """An sdist (URL and sha256), or a git repository at the commit the ref resolved to."""
    if package.url.startswith("git+"):
        url, _, commit = package.url.rpartition("@")
        return BuildSource("git", url, commit=commit)
    return BuildSource("sdist", package.url, package.sha256)
