"""Turn a spec and its plan into a lock: per target, conda through the conda solver,
then pip through the pip resolver, then a check that what came back is the build the
plan chose.

A target whose index cannot be reached (``NetworkError``: name resolution, refused,
timeout, TLS, 401/403, 404) does not stop the others: the targets that resolved are
written, a failed target keeps its previous entry when the lock had one (so what was
installable stays installable; ``lock --check`` still reports it stale if the spec
moved), and the lock step then fails with exit 5 naming each failed target, its URL and
the fix. Other errors (an unsatisfiable target, exit 3) stop the whole lock, as before.

Staleness is judged without network: a target is stale when its input hash (the
parts of the spec it depends on, plus the knowledge base's digest) differs, or when
the planner now chooses a different stack than the lock holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from gpuenv._network import Index, Mirrors, literal_url, pip_indexes
from gpuenv._progress import failed
from gpuenv._redact import redact_url
from gpuenv.builds.model import nvcc_arch_max
from gpuenv.errors import Alternative, ExternalToolError, NetworkError, NoCompatiblePlan
from gpuenv.lock import _integrity, extras
from gpuenv.lock import builds as build_lock
from gpuenv.lock._pypi_route import with_pypi_route
from gpuenv.lock._uv_output import build_needing_torch
from gpuenv.lock.builds import BuildNeeds
from gpuenv.lock.format import LATEST
from gpuenv.lock.model import (
    CondaPackage,
    CondaRequest,
    CondaSolver,
    Lock,
    LockedHardware,
    LockedTarget,
    PipPackage,
    PipRequest,
    PipResolver,
    StackSummary,
    WheelFacts,
)
from gpuenv.spec import LoadedSpec, Spec, Target

# The planner (and the knowledge base behind it) loads only when something is
# planned: `install` from a fresh lock never needs it (see stale_reasons).
if TYPE_CHECKING:
    from gpuenv.hardware import HardwareFacts
    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.lock.format import LockReading
    from gpuenv.lock.sdistscan import Scanned
    from gpuenv.plan import TargetPlan

Progress = Callable[[str], None]

# How long lock waits, once resolved, for its look at the index's newest torch.
WATCH_GRACE = 5.0

_CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$")


@dataclass(frozen=True)
class LockOptions:
    targets: tuple[str, ...] | None = None  # None: every target
    upgrade: bool = False  # False: keep existing pins that still fit
    upgrade_packages: tuple[str, ...] = ()  # normalised names whose pins move (the rest stay)
    torch_index: str | None = None  # overrides [pip] torch-index (GPUENV_TORCH_INDEX)
    index_url: str | None = None  # overrides [pip] index-url (GPUENV_INDEX_URL)
    cache_dir: Path | None = None
    detected: HardwareFacts | None = None
    mirrors: Mirrors = field(default_factory=Mirrors)  # from outside the project


@dataclass(frozen=True)
class PackageChange:
    name: str
    before: str | None
    after: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"name": self.name, "from": self.before, "to": self.after}


@dataclass(frozen=True)
class TargetChange:
    target: str
    status: str  # "added", "updated", "unchanged", "removed"
    packages: tuple[PackageChange, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "changes": [p.to_json() for p in self.packages]}


@dataclass(frozen=True)
class LockResult:
    lock: Lock
    changes: tuple[TargetChange, ...] = field(default_factory=tuple)
    # Targets whose indexes could not be reached: not relocked (see the module doc).
    failures: Mapping[str, NetworkError] = field(default_factory=dict)
    # What the resolved wheels contradict in the knowledge base, metadata that could not
    # be read, a torch newer than the data knows: reported, never fatal.
    warnings: tuple[str, ...] = ()


# --- inputs and staleness -----------------------------------------------------------------


def input_hash(spec: Spec, target: str, kb_digest: str) -> str:
    """What a target's lock depends on: the stack, the target's table, [pip], [conda],
    the lock format and the knowledge base. Not the project name, not [verify]."""
    t = spec.targets[target]
    # With one torch for all targets, every taking-part target's hardware decides it.
    shared = spec.stack.same_torch and t.torch is None
    payload = {
        "lock-version": LATEST,
        "knowledge": kb_digest,
        "stack": spec.stack.__dict__,
        "target": _target_inputs(t),
        "sharing": sorted(
            (name, _target_inputs(other))
            for name, other in spec.targets.items()
            if shared and name != target and other.torch is None
        ),
        "pip": _pip_inputs(spec),
        **extras.inputs(spec, target),
        "conda": (
            {
                "channels": list(spec.conda.channels),
                "dependencies": _jsonable(spec.conda.dependencies),
                "python": spec.conda.python,
            }
            if spec.conda
            else None
        ),
    }
    if build_lock.declared(spec):  # only then: other specs keep the hashes they had
        from gpuenv.builds import knowledge

        payload["build-knowledge"] = knowledge.digest()
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _pip_inputs(spec: Spec) -> dict[str, object]:
    """[pip] as hashed: ``build`` only when it has entries, so that specs without one keep
    the input hashes they had before builds existed."""
    out: dict[str, object] = {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in spec.pip.__dict__.items()
        if k not in ("build", "groups")
    }
    if spec.pip.build:
        out["build"] = {name: o.__dict__ for name, o in sorted(spec.pip.build.items())}
    return out


def _target_inputs(target: Target) -> dict[str, object]:
    """A target's table as its input hash reads it: ``build`` only when set, so the
    targets of specs without it keep the hashes (and locks) they had."""
    return {
        k: v
        for k, v in target.__dict__.items()
        if (k != "build" or v is not None) and k != "dependencies"  # see extras.inputs
    }


def _jsonable(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else list(value)  # type: ignore[call-overload]


def _recorded(url: str) -> str:
    """A URL as the lock records it: no credential, no "${" for uv to expand."""
    return literal_url(redact_url(url))


def _summary(plan: TargetPlan, came_from: str | None = None) -> StackSummary:
    """The plan's stack; its index is the one torch came from (``came_from``: PyPI's own
    build resolved from the default index), else the plan's torch index."""
    return StackSummary(
        python=plan.python,
        cuda=plan.cuda,
        cu_tag=plan.cu_tag,
        torch=plan.torch,
        torchvision=plan.torchvision,
        torchaudio=plan.torchaudio,
        cudnn=plan.cudnn,
        nccl=plan.nccl,
        arch_list=plan.arch_list,
        index=_recorded(came_from or plan.index_url),
    )


def stale_reasons(
    loaded: LoadedSpec,
    knowledge: Callable[[], KnowledgeBase],
    lock: Lock | None,
    *,
    kb_digest: str,
    options: LockOptions,
) -> dict[str, list[str]]:
    """Why each target's lock is out of date (empty when the lock is fresh). No network.

    A target's input hash covers the spec parts it depends on and the knowledge base's
    digest, and planning is a pure function of those, so an unchanged hash means an
    unchanged plan. Only "detect" targets, whose hardware is this machine's, are
    planned again to compare (``knowledge`` is called only then)."""
    spec = loaded.spec
    if lock is None:
        return {name: ["no lock file"] for name in spec.targets}
    reasons: dict[str, list[str]] = {}
    for name in sorted(set(lock.targets) - set(spec.targets)):
        reasons[name] = ["target is no longer in the spec"]
    for name in spec.targets:
        locked = lock.target(name)
        if locked is None:
            reasons[name] = ["target is not locked yet"]
            continue
        found = []
        if locked.input_hash != input_hash(spec, name, kb_digest):
            found.append("the spec (or gpuenv's knowledge base) changed since it was locked")
        elif spec.targets[name].uses_detect:
            from gpuenv.plan import plan_target

            plan = plan_target(
                name, spec, knowledge(), detected=options.detected, torch_index=options.torch_index
            )
            # The index is where a build comes from (mirrors differ), not which build it is.
            if replace(_summary(plan), index="") != replace(locked.stack, index=""):
                found.append(f"the plan now chooses {plan.cu_tag} torch {plan.torch}")
        if found:
            reasons[name] = found
    return reasons


# --- locking one target ------------------------------------------------------------------------


def _conda_specs(spec: Spec, plan: TargetPlan, *, toolkit: bool = False) -> tuple[str, ...]:
    assert spec.conda is not None
    deps = spec.conda.dependencies
    specs = (
        [f"{name} {constraint}".strip() for name, constraint in deps.items()]
        if isinstance(deps, Mapping)
        else list(deps)
    )
    if spec.conda.python and "python" not in spec.conda.dependency_names():
        specs.append(f"python {plan.python}.*")
    if _wants_toolkit(spec, plan) or (toolkit and spec.stack.toolkit is None and plan.cuda):
        # The prefix's own toolkit: nvcc and the runtime headers of the wheels' CUDA.
        specs += [f"cuda-nvcc {plan.cuda}.*", f"cuda-cudart-dev {plan.cuda}.*"]
    return tuple(specs)


def _wants_toolkit(spec: Spec, plan: TargetPlan) -> bool:
    toolkit = spec.stack.toolkit
    return toolkit is not None and not toolkit.startswith("system:") and plan.cuda is not None


def _builds_toolkit(spec: Spec, plan: TargetPlan, need: BuildNeeds | None) -> bool:
    """A build needs nvcc and the spec names no toolkit: one of torch's CUDA is added."""
    return need is not None and need.toolkit and spec.stack.toolkit is None and bool(plan.cuda)


def _pip_requirements(
    spec: Spec, plan: TargetPlan, need: BuildNeeds | None = None
) -> tuple[str, ...]:
    family = [f"torch=={plan.torch}"]
    if plan.torchvision:
        family.append(f"torchvision=={plan.torchvision}")
    if plan.torchaudio:
        family.append(f"torchaudio=={plan.torchaudio}")
    toolkit: list[str] = []
    if spec.conda is None and (_wants_toolkit(spec, plan) or _builds_toolkit(spec, plan, need)):
        # Without conda, NVIDIA's toolkit wheels (install gathers them under <prefix>/cuda).
        major = (plan.cuda or "").split(".")[0]
        toolkit.append(f"nvidia-cuda-nvcc-cu{major}=={plan.cuda}.*")
    wanted = extras.requirements(spec, plan.target)
    extra = [r for r in (need.requirements if need else ()) if r not in wanted]
    return (*family, *wanted, *toolkit, *extra)


def _local_label(version: str) -> str | None:
    try:
        return Version(version).local
    except InvalidVersion:
        return None


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def _family_problems(plan: TargetPlan, by_name: Mapping[str, PipPackage]) -> list[str]:
    """torch, torchvision, torchaudio: the planned versions, and no other build's label."""
    problems = []
    planned = (
        ("torch", plan.torch),
        ("torchvision", plan.torchvision),
        ("torchaudio", plan.torchaudio),
    )
    for name, wanted in planned:
        package = by_name.get(name)
        if wanted is None or package is None:
            continue
        if _public(package.version) != wanted:
            problems.append(f"{name} {package.version} (planned {wanted})")
        label = _local_label(package.version)
        if label is not None and label != plan.cu_tag:
            problems.append(
                f"{name} {package.version} is a {label} build (planned {plan.cu_tag}), "
                f"from {package.url}"
            )
    return problems


def _runtime_problems(
    plan: TargetPlan, torch: PipPackage, pip: tuple[PipPackage, ...]
) -> list[str]:
    """An unlabelled torch (PyPI's) shows its CUDA through the nvidia-cuda-runtime it pulls."""
    if _local_label(torch.version) is not None:
        return []
    runtime = next((p for p in pip if _CUDA_RUNTIME.match(p.name)), None)
    if plan.cuda is None:
        if runtime is None:
            problem = _integrity.unlabelled_cpu_torch_problem(plan.hardware.platform, torch.version)
            return [f"{problem}, planned cpu"] if problem else []
        return [
            f"torch {torch.version} pulls {runtime.name} {runtime.version}: "
            "a CUDA build, planned cpu"
        ]
    found = ".".join(runtime.version.split(".")[:2]) if runtime else None
    if found == plan.cuda:
        return []
    what = f"CUDA runtime {found}" if found else "no CUDA runtime"
    return [f"torch {torch.version} comes with {what} (planned CUDA {plan.cuda})"]


def check_against_plan(plan: TargetPlan, pip: tuple[PipPackage, ...]) -> None:
    """The resolved torch family must be the build the plan chose: right versions, and a
    ``+cuXYZ`` label or an ``nvidia-cuda-runtime`` of the right CUDA."""
    by_name = {p.name: p for p in pip}
    torch = by_name.get("torch")
    if torch is None:
        raise ExternalToolError(f"target {plan.target}: the resolution has no torch")
    problems = _family_problems(plan, by_name) + _runtime_problems(plan, torch, pip)
    if problems:
        raise ExternalToolError(
            f"target {plan.target}: the index served builds other than the plan's {plan.cu_tag}:\n"
            + "\n".join(f"- {p}" for p in problems),
            hint="the index (or a mirror of it) mislabels its builds; check [pip] torch-index",
        )


@dataclass(frozen=True)
class _Backends:
    pip: PipResolver
    conda: CondaSolver


def _lock_target(
    name: str,
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    backends: _Backends,
    previous: LockedTarget | None,
    options: LockOptions,
    progress: Progress,
    kb_digest: str,
) -> tuple[LockedTarget, list[str]]:
    from gpuenv.plan import plan_target

    spec = loaded.spec
    plan = plan_target(name, spec, kb, detected=options.detected, torch_index=options.torch_index)
    keep = previous if previous is not None and not options.upgrade else None
    conda, python = _solve_conda(backends, spec, plan, keep, options, progress)
    progress(f"{name}: resolving pip packages")
    declared = build_lock.declared(spec)
    scan = _sdist_scanner(options)
    need = build_lock.needs(declared, cuda=plan.cuda).union(
        extras.project_needs(spec, cuda=plan.cuda)
    )
    pip, need = _resolve_pip(backends, spec, plan, keep, options, python, need)
    found = build_lock.found(spec, pip, declared, scan)
    more = build_lock.needs(found, cuda=plan.cuda)
    if not need.covers(more):  # a build found only now needs a toolkit or build requirements
        _check_conda_toolkit(spec, plan, need, more)
        pip, need = _resolve_pip(backends, spec, plan, keep, options, python, need.union(more))
        found = build_lock.found(spec, pip, declared, scan)
    check_against_plan(plan, pip)
    request = _pip_request(spec, plan, keep, options, python, need)
    facts, warnings = _wheel_facts(plan, pip, request, backends.pip, kb, progress)
    # Whatever a backend returns, no credential (userinfo, token query) reaches the lock,
    # and no "${" that uv would expand when installing it (the lock reader refuses one).
    pip = tuple(replace(p, url=_recorded(p.url), index=p.index and _recorded(p.index)) for p in pip)
    conda = tuple(replace(c, url=_recorded(c.url), channel=_recorded(c.channel)) for c in conda)
    toolkit = build_lock.toolkit_version(spec, plan, pip, conda)
    locked_builds = build_lock.lock_builds(
        plan, pip, found, toolkit, previous, nvcc_max=nvcc_arch_max(kb, plan.cuda)
    )
    pip = locked_builds.pip
    hw = plan.hardware
    locked = LockedTarget(
        name=name,
        input_hash=input_hash(spec, name, kb_digest),
        platform=hw.platform,
        hardware=LockedHardware(
            cpu=hw.cpu,
            gpu=hw.gpu_name,
            compute_capabilities=tuple(str(c) for c in hw.compute_capabilities),
            driver=str(hw.driver) if hw.driver else None,
            driver_cuda=plan.driver_cuda,
            source=hw.source,
        ),
        stack=_summary(plan, None if request.torch_index else _index_of(pip, "torch")),
        virtual_packages=dict(plan.virtual_packages),
        conda=tuple(sorted(conda, key=lambda c: c.name)),
        pip=tuple(sorted(pip, key=lambda p: p.name)),
        builds=locked_builds.builds,
        wheel_facts=facts,
        groups=extras.group_members(spec, name, pip, request.requirements),
    )
    _check_resolved(locked)
    return locked, warnings


def _index_of(pip: tuple[PipPackage, ...], name: str) -> str | None:
    return next((p.index for p in pip if p.name == name), None)


def _expected_requests(
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    existing: Lock | None,
    options: LockOptions,
    selected: Iterable[str],
) -> list[PipRequest]:
    """The pip requests ``_lock_target`` will make first, where they are known before
    it runs (no [conda]: pip resolves for the plan's Python), so ``lock_project`` can
    start them side by side. One found different later is only a wasted resolution."""
    if loaded.spec.conda is not None:
        return []
    found = (_expected_request(loaded.spec, kb, existing, options, name) for name in selected)
    return [request for request in found if request is not None]


def _expected_request(
    spec: Spec, kb: KnowledgeBase, existing: Lock | None, options: LockOptions, name: str
) -> PipRequest | None:
    from gpuenv.plan import plan_target

    previous = existing.target(name) if existing else None
    keep = previous if previous is not None and not options.upgrade else None
    try:
        plan = plan_target(
            name, spec, kb, detected=options.detected, torch_index=options.torch_index
        )
        need = build_lock.needs(build_lock.declared(spec), cuda=plan.cuda)
        return _pip_request(spec, plan, keep, options, plan.python, need)
    except Exception:  # noqa: BLE001 - _lock_target meets it again, in its turn
        return None


def _sdist_scanner(options: LockOptions) -> Callable[[PipPackage], Scanned | None]:
    """What an sdist's build needs, read from it (``lock.sdistscan``): once per sdist."""
    from gpuenv.lock.sdistscan import scan

    seen: dict[str, Scanned | None] = {}

    def scanned(package: PipPackage) -> Scanned | None:
        if package.sha256 not in seen:
            seen[package.sha256] = scan(package, options.cache_dir)
        return seen[package.sha256]

    return scanned


def _solve_conda(
    backends: _Backends,
    spec: Spec,
    plan: TargetPlan,
    keep: LockedTarget | None,
    options: LockOptions,
    progress: Progress,
) -> tuple[tuple[CondaPackage, ...], str]:
    """The target's conda records (none without [conda]), and the Python pip resolves for."""
    if spec.conda is None:
        return (), plan.python
    name = plan.target
    progress(f"{name}: solving conda packages")
    builds_toolkit = (
        build_lock.needs(build_lock.declared(spec), cuda=plan.cuda).toolkit
        or extras.project_needs(spec, cuda=plan.cuda).toolkit
    )
    conda = backends.conda.resolve(
        CondaRequest(
            specs=_conda_specs(spec, plan, toolkit=builds_toolkit),
            channels=spec.conda.channels,
            platform=plan.hardware.platform,
            virtual_packages=plan.virtual_packages,
            preferences=keep.conda if keep else (),
            cache_dir=options.cache_dir,
            mirrors=options.mirrors,
        )
    )
    conda_python = next((c for c in conda if c.name == "python"), None)
    if conda_python is not None and not spec.conda.python:
        needing = sorted(c.name for c in conda if any(d.split()[0] == "python" for d in c.depends))
        raise NoCompatiblePlan(
            f"target {name}: [conda] python = false, but these conda packages need conda's "
            f"Python: {', '.join(needing) or 'python'}",
            target=name,
            alternatives=[
                Alternative("let conda supply the Python", {"conda.python": "true"}),
                Alternative("install those packages from [pip] instead", {}),
            ],
        )
    return conda, conda_python.version if conda_python is not None else plan.python


def _resolve_pip(
    backends: _Backends,
    spec: Spec,
    plan: TargetPlan,
    keep: LockedTarget | None,
    options: LockOptions,
    python: str,
    need: BuildNeeds,
) -> tuple[tuple[PipPackage, ...], BuildNeeds]:
    """The pip resolution, and the build needs it ended with: a package that uv could only
    read by building it, whose build imports torch, is given the dependencies the spec or
    the knowledge base declares for it, and resolved again (once per package)."""
    while True:
        try:
            pip = _resolve(backends, spec, plan, keep, options, python, need)
            return pip, need
        except ExternalToolError as exc:
            name = build_needing_torch(exc.stderr_tail or exc.message)
            declared = {n for n, _ in need.dependency_metadata}
            requires = build_lock.metadata_for(name, spec) if name else None
            if name is None or name in declared or requires is None:
                raise _metadata_needs_torch(exc, name) from None
            need = need.union(BuildNeeds(dependency_metadata=((name, requires),)))


def _metadata_needs_torch(exc: ExternalToolError, name: str | None) -> ExternalToolError:
    """uv had to build a package to read its dependencies, and the build imports torch
    (flash-attn's setup.py does): say how to declare them instead of uv's own hint."""
    if name is None:
        return exc
    text = exc.stderr_tail or exc.message
    return ExternalToolError(
        f"{name}'s dependencies cannot be read without building it, and its build imports "
        f"torch (No module named 'torch' in uv's isolated build):\n{text}",
        argv=exc.argv,
        returncode=exc.returncode,
        stderr_tail=exc.stderr_tail,
        hint=f"declare them in gpuenv.toml: [pip.build.{name}] no-build-isolation = true and "
        'requires-dist = ["torch", ...] (its install_requires)',
    )


def _resolve(
    backends: _Backends,
    spec: Spec,
    plan: TargetPlan,
    keep: LockedTarget | None,
    options: LockOptions,
    python: str,
    need: BuildNeeds,
) -> tuple[PipPackage, ...]:
    return backends.pip.resolve(_pip_request(spec, plan, keep, options, python, need))


def _pip_request(
    spec: Spec,
    plan: TargetPlan,
    keep: LockedTarget | None,
    options: LockOptions,
    python: str,
    need: BuildNeeds,
) -> PipRequest:
    """The pip resolution's request (also what the wheels' metadata is read through: its
    indexes carry the credentials)."""
    use_default_for_torch = plan.pypi_default and not (options.torch_index or spec.pip.torch_index)
    return PipRequest(
        requirements=_pip_requirements(spec, plan, need),
        python=python,
        platform=plan.hardware.platform,
        glibc=plan.hardware.glibc,
        macos=plan.virtual_packages.get("__osx"),
        default_index=options.index_url or spec.pip.index_url,
        extra_indexes=spec.pip.extra_index_urls,
        torch_index=None if use_default_for_torch else plan.index_url,
        preferences=tuple(
            p for p in (*keep.pip, *_build_pins(keep)) if p.name not in options.upgrade_packages
        )
        if keep
        else (),
        cache_dir=options.cache_dir,
        no_binary=need.no_binary,
        dependency_metadata=need.dependency_metadata,
        mirrors=options.mirrors,
    )


def _build_pins(locked: LockedTarget) -> tuple[PipPackage, ...]:
    """The builds' versions, kept like any other pin (their sdists are not in ``pip``)."""
    return tuple(
        PipPackage(b.name, b.version, b.source.url, b.source.sha256 or "") for b in locked.builds
    )


def _check_conda_toolkit(spec: Spec, plan: TargetPlan, need: BuildNeeds, more: BuildNeeds) -> None:
    """A toolkit from conda is solved before pip: a build found only in the pip resolution
    cannot add one any more."""
    if spec.conda is None or need.toolkit or not more.toolkit or _wants_toolkit(spec, plan):
        return
    raise NoCompatiblePlan(
        f"target {plan.target}: a package that must be compiled with nvcc came as an sdist, "
        "and conda's toolkit is solved before pip",
        target=plan.target,
        alternatives=[Alternative("add a CUDA toolkit", {"stack.toolkit": "auto"})],
    )


def _check_resolved(target: LockedTarget) -> None:
    """What the resolvers returned passes the checks every reader of the lock applies
    (a source distribution, say, is refused here rather than in every later read)."""
    problems = _integrity.unprintable(
        [p.__dict__ for p in target.pip] + [c.__dict__ for c in target.conda], target.name
    ) + _integrity.entry_problems(target)
    if not problems:
        return
    text = f"target {target.name}: the resolution cannot be locked:\n" + "\n".join(
        f"- {p}" for p in problems
    )
    if any("source distribution" in p for p in problems):
        raise NoCompatiblePlan(
            text,
            target=target.name,
            alternatives=[Alternative("pin a version of that package that has a wheel", {})],
        )
    raise ExternalToolError(text, hint="the index (or a mirror of it) serves inconsistent files")


def _wheel_facts(
    plan: TargetPlan,
    pip: tuple[PipPackage, ...],
    request: PipRequest,
    resolver: PipResolver,
    kb: KnowledgeBase,
    progress: Progress,
) -> tuple[WheelFacts | None, list[str]]:
    """What the resolved torch family's metadata says, and where the data disagrees."""
    from gpuenv.lock.wheelcheck import WheelMetadataSource, contradictions, read_wheel_facts

    if not isinstance(resolver, WheelMetadataSource):
        return None, []
    progress(f"{plan.target}: reading the torch wheels' metadata")
    facts, warnings = read_wheel_facts(plan, pip, request, resolver)
    if facts is not None:
        warnings += contradictions(plan, facts, kb)
    return facts, warnings


def _diff(name: str, before: LockedTarget | None, after: LockedTarget | None) -> TargetChange:
    if after is None:
        return TargetChange(name, "removed")
    old = {p.name: p.version for p in (before.pip if before else ())}
    old.update(
        {f"conda:{c.name}": f"{c.version}-{c.build}" for c in (before.conda if before else ())}
    )
    new = {p.name: p.version for p in after.pip}
    new.update({f"conda:{c.name}": f"{c.version}-{c.build}" for c in after.conda})
    changes = tuple(
        PackageChange(pkg, old.get(pkg), new.get(pkg))
        for pkg in sorted(set(old) | set(new))
        if old.get(pkg) != new.get(pkg)
    )
    if before is None:
        return TargetChange(name, "added", changes)
    return TargetChange(name, "updated" if changes or before != after else "unchanged", changes)


def lock_project(
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    *,
    existing: Lock | None,
    options: LockOptions,
    pip: PipResolver,
    conda: CondaSolver,
    kb_digest: str,
    progress: Progress | None = None,
) -> LockResult:
    """Lock the selected targets; the others are carried over from ``existing`` untouched."""
    spec = loaded.spec
    selected = options.targets or tuple(spec.targets)
    report = progress or (lambda _message: None)
    from gpuenv.lock._share import shared_conda, shared_pip

    shared = shared_pip(pip)  # identical requests: once; distinct ones side by side
    shared.prefetch(_expected_requests(loaded, kb, existing, options, selected))
    backends = _Backends(shared, shared_conda(conda))
    targets: dict[str, LockedTarget] = {}
    changes: list[TargetChange] = []
    failures: dict[str, NetworkError] = {}
    warnings: list[str] = []
    for name in spec.targets:
        previous = existing.target(name) if existing else None
        if name not in selected:
            if previous is not None:
                targets[name] = previous  # carried over byte for byte
            continue
        try:
            locked, found = _lock_target(
                name, loaded, kb, backends, previous, options, report, kb_digest
            )
        except NetworkError as exc:
            failed(report)  # the next target's phase must not mark this one done
            failures[name] = with_pypi_route(
                exc, name, spec, kb, torch_index=options.torch_index, detected=options.detected
            )
            if previous is not None:
                targets[name] = previous  # still installable as it was locked before
            continue
        warnings += found
        targets[name] = locked
        changes.append(_diff(name, previous, locked))
    for name in sorted(set(existing.targets) - set(spec.targets)) if existing else []:
        if options.targets is None:
            changes.append(_diff(name, existing.target(name) if existing else None, None))
        elif existing is not None:
            targets[name] = existing.targets[name]
    lock = Lock(loaded.content_hash, dict(sorted(targets.items())))
    return LockResult(lock, tuple(changes), failures=failures, warnings=tuple(warnings))


def damage_reasons(reading: LockReading | None, names: Iterable[str]) -> dict[str, list[str]]:
    """Why each of ``names`` that the lock holds damaged must be relocked."""
    if reading is None:
        return {}
    found = reading.problems(names)
    return {
        name: [f"its entry in {reading.path} fails gpuenv's checks: " + "; ".join(problems)]
        for name, problems in found.items()
    }


def relock_basis(reading: LockReading | None, spec: Spec) -> tuple[Lock | None, tuple[str, ...]]:
    """What relocking starts from: the lock's trusted targets, plus a version 1 lock's
    pins (as preferences only), and the spec's targets that must be relocked because
    their entry is damaged or of an old format (even when ``--target`` names others:
    a written lock never carries a target that fails its checks)."""
    if reading is None:
        return None, ()
    forced = tuple(name for name in spec.targets if name in reading.damaged)
    pins = {name: t for name, t in reading.pins.items() if name in spec.targets}
    return Lock(reading.lock.spec_hash, {**pins, **reading.lock.targets}), forced


def ensure_lock(
    loaded: LoadedSpec,
    knowledge: Callable[[], KnowledgeBase],
    *,
    lock_path: Path,
    options: LockOptions,
    frozen: bool,
    backends: Callable[[], tuple[PipResolver, CondaSolver]] | None = None,
    kb_digest: str,
    progress: Progress | None = None,
) -> Lock:
    """The lock for ``options.targets``, relocking the stale ones first (like ``uv
    sync``); with ``frozen`` a stale lock is refused instead (exit 1), and a lock whose
    entry for one of those targets fails its checks is refused (exit 2) naming what is
    wrong. Without ``frozen``, such an entry is relocked like a stale one: what it
    holds is never installed."""
    from gpuenv.errors import CheckFailed
    from gpuenv.lock.format import load_lock

    reading = load_lock(lock_path, cache_dir=options.cache_dir, legacy_ok=not frozen)
    wanted = options.targets or tuple(loaded.spec.targets)
    if frozen and reading is not None:
        reading.require(wanted)
    existing = reading.lock if reading is not None else None
    stale = stale_reasons(loaded, knowledge, existing, kb_digest=kb_digest, options=options)
    relevant = {name: why for name, why in stale.items() if name in wanted}
    relevant.update(damage_reasons(reading, wanted))
    if not relevant and existing is not None:
        return existing
    if frozen:
        lines = [f"{name}: {'; '.join(why)}" for name, why in sorted(relevant.items())]
        raise CheckFailed(
            f"{lock_path} is out of date and --frozen forbids relocking:\n" + "\n".join(lines),
            hint="run 'gpuenv lock' (and commit gpuenv.lock)",
            details={"stale": relevant},
        )
    basis, forced = relock_basis(reading, loaded.spec)
    relock = replace(options, targets=tuple(dict.fromkeys([*relevant, *forced])))
    result, _written = lock_and_write(
        loaded,
        knowledge(),
        basis,
        lock_path=lock_path,
        options=relock,
        backends=backends,
        kb_digest=kb_digest,
        progress=progress,
    )
    return result.lock


def lock_and_write(
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    existing: Lock | None,
    *,
    lock_path: Path,
    options: LockOptions,
    backends: Callable[[], tuple[PipResolver, CondaSolver]] | None = None,
    kb_digest: str,
    progress: Progress | None = None,
) -> tuple[LockResult, bool]:
    """Lock with ``backends`` (default: uv and rattler, ``lock.backends``) and write the
    file; True when its bytes changed."""
    from gpuenv.lock.backends import resolvers
    from gpuenv.lock.format import write_lock

    pip, conda = (backends or resolvers)()
    index = options.index_url or loaded.spec.pip.index_url
    from gpuenv.lock._background import Background

    watch = Background(lambda: _newest_torch_on_index(pip, index, options.cache_dir))
    builds = Background(lambda: _remember_index_builds(pip, loaded.spec, options, kb))
    result = lock_project(  # the resolution runs while the index is looked at
        loaded,
        kb,
        existing=existing,
        options=options,
        pip=pip,
        conda=conda,
        kb_digest=kb_digest,
        progress=progress,
    )
    settle = getattr(pip, "settle", None)
    if callable(settle):
        settle()  # a look-up waiting for the resolver's default index waits no more
    seen = watch.result(timeout=WATCH_GRACE)
    builds.result(timeout=WATCH_GRACE)
    notice = _newer_torch_notice(seen, kb)
    if notice:
        result = replace(result, warnings=(*result.warnings, notice))
    written = False
    if result.lock.targets or existing is not None:
        written = write_lock(lock_path, result.lock, cache_dir=options.cache_dir)
    if result.failures:
        raise partial_lock_error(result, lock_path=lock_path, written=written)
    return result, written


def partial_lock_error(result: LockResult, *, lock_path: Path, written: bool) -> NetworkError:
    """One error for every target that could not be locked (exit 5), saying what was
    written: each failed target with its URL and fix, the locked ones by name."""
    locked = [c.target for c in result.changes if c.status != "removed"]
    kept = sorted(set(result.failures) & set(result.lock.targets))
    lines = []
    for name, exc in sorted(result.failures.items()):
        lines.append(f"target {name}: {exc.message}")
        if exc.extra.get("pypi_route"):  # the spec change that needs no torch index
            lines.append(f"  {exc.extra['pypi_route']}")
    if locked and written:
        lines.append(f"wrote {lock_path} with {', '.join(locked)}")
    elif locked:
        lines.append(f"{lock_path} unchanged: {', '.join(locked)} locked as before")
    if kept:
        lines.append(f"kept the previous lock of {', '.join(kept)}")
    # Each fix once, however many targets failed the same way.
    hints = [part for exc in result.failures.values() for part in (exc.hint or "").split("; ")]
    if locked:
        hints.append(f"meanwhile: gpuenv install --target {locked[0]}")
    first_name, first = sorted(result.failures.items())[0]
    return NetworkError(
        "\n".join(lines),
        cause=first.cause,
        url=first.url,
        target=first_name,
        hint="; ".join(dict.fromkeys(h for h in hints if h)) or None,
        stderr_tail=first.stderr_tail,
        extra={
            "lock": str(lock_path),
            "written": written,
            "locked": locked,
            "kept": kept,
            "failed": {
                name: {"cause": e.cause, "url": e.url, "message": e.message, "hint": e.hint}
                | ({"pypi_route": e.extra["pypi_route"]} if "pypi_route" in e.extra else {})
                for name, e in sorted(result.failures.items())
            },
        },
    )


def install_indexes(spec: Spec, target: LockedTarget, options: LockOptions) -> tuple[Index, ...]:
    """The indexes (and their credentials) ``target`` was locked from, by the names lock
    gave uv: install declares the same (and the mirrors), so it authenticates exactly
    as lock did (URL credentials, ``UV_INDEX_<NAME>_*``, netrc, keyring)."""
    base = options.torch_index or spec.pip.torch_index
    torch = f"{base.rstrip('/')}/{target.stack.cu_tag}" if base else target.stack.index
    return pip_indexes(options.index_url or spec.pip.index_url, spec.pip.extra_index_urls, torch)


def _newest_torch_on_index(
    resolver: PipResolver, index: str | None, cache_dir: Path | None
) -> tuple[str, str] | None:
    """(index, newest torch there), read beside the resolution (at most hourly, when
    there is a cache); None when not known."""
    import time

    from gpuenv.lock.seen import newest_torch_on, recently_seen, record_newest_torch

    try:
        if index is None:
            ask = getattr(resolver, "default_index_url", None)
            index = ask() if callable(ask) else None
        if index is None:
            return None
        now = time.time()
        version = recently_seen(cache_dir, index, now) if cache_dir else None
        if version is None:
            version = newest_torch_on(index)
            if version and cache_dir is not None:
                record_newest_torch(cache_dir, index, version, now)
    except ExternalToolError:
        return None
    return (index, version) if version else None


def _remember_index_builds(
    resolver: PipResolver, spec: Spec, options: LockOptions, kb: KnowledgeBase
) -> None:
    """Keep in the cache the builds the torch index lists that ``kb`` lacks, for ``plan``
    (only beside a resolver that reads real indexes: one that can name its default index)."""
    import time

    from gpuenv.lock.index_builds import remember_index_builds
    from gpuenv.plan import DEFAULT_TORCH_INDEX
    from gpuenv.plan._seen import unknown_builds

    if not callable(getattr(resolver, "default_index_url", None)):
        return
    base = options.torch_index or spec.pip.torch_index or DEFAULT_TORCH_INDEX
    remember_index_builds(
        base, options.cache_dir, time.time(), keep=lambda found: unknown_builds(kb, found)
    )


def _newer_torch_notice(seen: tuple[str, str] | None, kb: KnowledgeBase) -> str | None:
    if seen is None:
        return None
    _index, version = seen
    newest = kb.newest_torch
    if newest is None or Version(version) <= newest.version:
        return None
    known = f"{newest.version.major}.{newest.version.minor}"
    from gpuenv.plan import FACTS_FILE

    return (
        f"torch {version} is on the index but this gpuenv's knowledge stops at {known}: "
        f"upgrade gpuenv or add the facts in {kb.facts_file or FACTS_FILE}"
    )
