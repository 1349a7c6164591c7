"""Locking one target: its plan, the conda half through the conda solver, then the pip
half through the pip resolver (again, once per build that needs more), then a check that
what came back is the build the plan chose, the wheels' own metadata, redaction, the
builds' entries and the checks every reader of the lock applies.

One frozen ``_TargetJob`` carries what every step of one target reads (the spec, the
plan, the pins kept, the options and the Python pip resolves for).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gpuenv.builds.model import nvcc_arch_max
from gpuenv.errors import Alternative, ExternalToolError, NoCompatiblePlan, UsageError
from gpuenv.lock import _integrity, extras
from gpuenv.lock import builds as build_lock
from gpuenv.lock._uv_output import build_needing_torch
from gpuenv.lock.builds import BuildNeeds
from gpuenv.lock.inputs import input_hash, planned_stack, recorded_url
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
    WheelFacts,
)
from gpuenv.lock.options import LockOptions
from gpuenv.spec import LoadedSpec, Spec
from gpuenv.spec._values import exclude_newer_cutoff

if TYPE_CHECKING:
    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.lock.sdistscan import Scanned
    from gpuenv.plan import TargetPlan

Progress = Callable[[str], None]


@dataclass(frozen=True)
class _TargetJob:
    """What each step of locking one target reads."""

    spec: Spec
    plan: TargetPlan
    keep: LockedTarget | None  # the previous lock, whose pins are kept (None: --upgrade)
    options: LockOptions
    python: str  # the Python pip resolves for: conda's, when [conda] brings one

    def pip_request(self, need: BuildNeeds) -> PipRequest:
        """The pip resolution's request (also what the wheels' metadata is read through:
        its indexes carry the credentials)."""
        spec, plan, keep, options = self.spec, self.plan, self.keep, self.options
        use_default_for_torch = plan.pypi_default and not (
            options.torch_index or spec.pip.torch_index
        )
        return PipRequest(
            requirements=_pip_requirements(spec, plan, need),
            python=self.python,
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
            exclude_newer=exclude_newer_cutoff(spec.pip.exclude_newer)
            if spec.pip.exclude_newer
            else None,
            exclude_newer_packages=tuple(
                (name, exclude_newer_cutoff(day))
                for name, day in spec.pip.exclude_newer_packages.items()
            )
            + _toolkit_exempt(spec, plan),
        )


@dataclass(frozen=True)
class Backends:
    """What one lock run shares between its targets: the resolvers, and the targets'
    plans where ``expected_requests`` made them (planning one costs 0.7-0.9 ms)."""

    pip: PipResolver
    conda: CondaSolver
    plans: Mapping[str, TargetPlan] = field(default_factory=dict)


def _job(
    spec: Spec, plan: TargetPlan, previous: LockedTarget | None, options: LockOptions
) -> _TargetJob:
    keep = previous if previous is not None and not options.upgrade else None
    return _TargetJob(spec, plan, keep, options, plan.python)


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
        toolkit.append(_nvcc_wheel(spec, plan))
    wanted = extras.requirements(spec, plan.target)
    extra = [r for r in (need.requirements if need else ()) if r not in wanted]
    return (*family, *wanted, *toolkit, *extra)


def _toolkit_exempt(spec: Spec, plan: TargetPlan) -> tuple[tuple[str, str], ...]:
    """Under [pip] exclude-newer, NVIDIA's nvcc wheel of the plan's CUDA is the plan's
    choice as the torch family is: exempt (stylegan2-ada, dated 2021, had no
    nvidia-cuda-nvcc-cu12==12.1.* by then, and its lock failed)."""
    if not (spec.pip.exclude_newer or spec.pip.exclude_newer_packages) or not plan.cuda:
        return ()
    from gpuenv.knowledge import knowledge_base
    from gpuenv.versions import CudaVersion

    wheel = knowledge_base().nvcc_wheel(CudaVersion.parse(plan.cuda))
    return ((wheel, "false"),) if wheel else ()


def _nvcc_wheel(spec: Spec, plan: TargetPlan) -> str:
    """NVIDIA's nvcc wheel of the plan's CUDA (its name is data: cu11 and cu12 carry a
    suffix, 13 does not; there is none before 11.7, and asking for one got a 404 from
    the index for a package the user never named)."""
    from gpuenv.knowledge import knowledge_base
    from gpuenv.versions import CudaVersion

    cuda = CudaVersion.parse(plan.cuda or "")
    wheel = knowledge_base().nvcc_wheel(cuda)
    if wheel is None:
        why = (
            f'[stack] toolkit = "{spec.stack.toolkit}"'
            if spec.stack.toolkit
            else "a build that needs nvcc"
        )
        raise UsageError(
            f"target {plan.target}: {why} takes nvcc from NVIDIA's pip wheels, and there is "
            f"none for CUDA {plan.cuda} (they start at 11.7)",
            hint="add a [conda] table (conda's cuda-nvcc is the toolkit then), or point at an "
            f'installed CUDA {plan.cuda}: [stack] toolkit = "system:/usr/local/cuda-{plan.cuda}"',
        )
    return f"{wheel}=={plan.cuda}.*"


def check_against_plan(plan: TargetPlan, pip: tuple[PipPackage, ...]) -> None:
    """The resolved torch family must be the build the plan chose (the rule every reader
    of the lock applies too: ``_integrity.family_problems``): right versions, and a
    ``+cuXYZ`` label or an ``nvidia-cuda-runtime`` of the right CUDA."""
    if not any(p.name == "torch" for p in pip):
        raise ExternalToolError(f"target {plan.target}: the resolution has no torch")
    problems = _integrity.family_problems(planned_stack(plan), pip, plan.hardware.platform)
    if problems:
        raise ExternalToolError(
            f"target {plan.target}: the index served builds other than the plan's {plan.cu_tag}:\n"
            + "\n".join(f"- {p}" for p in problems),
            hint="the index (or a mirror of it) mislabels its builds; check [pip] torch-index",
        )


def lock_target(
    name: str,
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    backends: Backends,
    previous: LockedTarget | None,
    options: LockOptions,
    progress: Progress,
    kb_digest: str,
) -> tuple[LockedTarget, list[str]]:
    """One target locked (``previous``: its entry in the lock, whose pins are kept unless
    ``options.upgrade``), and what its wheels contradict in the knowledge base."""
    from gpuenv.plan import plan_target

    spec = loaded.spec
    plan = backends.plans.get(name)  # made by expected_requests, from the same inputs
    if plan is None:
        plan = plan_target(
            name, spec, kb, detected=options.detected, torch_index=options.torch_index
        )
    job = _job(spec, plan, previous, options)
    conda, python = _solve_conda(backends, job, progress)
    job = replace(job, python=python)
    progress(f"{name}: resolving pip packages")
    declared = build_lock.declared(spec)
    scan = _sdist_scanner(options)
    need = build_lock.needs(declared, cuda=plan.cuda).union(
        extras.project_needs(spec, cuda=plan.cuda)
    )
    pip, need = _resolve_pip(backends, job, need)
    found = build_lock.found(spec, pip, declared, scan)
    more = build_lock.needs(found, cuda=plan.cuda)
    if not need.covers(more):  # a build found only now needs a toolkit or build requirements
        _check_conda_toolkit(job, need, more)
        pip, need = _resolve_pip(backends, job, need.union(more))
        found = build_lock.found(spec, pip, declared, scan)
    check_against_plan(plan, pip)
    request = job.pip_request(need)
    facts, warnings = _wheel_facts(plan, pip, request, backends.pip, kb, progress)
    # Whatever a backend returns, no credential (userinfo, token query) reaches the lock,
    # and no "${" that uv would expand when installing it (the lock reader refuses one).
    pip = tuple(
        replace(p, url=recorded_url(p.url), index=p.index and recorded_url(p.index)) for p in pip
    )
    conda = tuple(
        replace(c, url=recorded_url(c.url), channel=recorded_url(c.channel)) for c in conda
    )
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
        stack=planned_stack(plan, None if request.torch_index else _index_of(pip, "torch")),
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


def expected_requests(
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    existing: Lock | None,
    options: LockOptions,
    selected: Iterable[str],
    plans: dict[str, TargetPlan] | None = None,
) -> list[PipRequest]:
    """The pip requests ``lock_target`` will make first, where they are known before
    it runs (no [conda]: pip resolves for the plan's Python), so ``lock_project`` can
    start them side by side. One found different later is only a wasted resolution.
    ``plans`` is given each target's plan, made on the way (``lock_target`` takes it:
    planning a target costs 0.7-0.9 ms, twice before)."""
    if loaded.spec.conda is not None:
        return []
    found = (
        _expected_request(loaded.spec, kb, existing, options, name, plans) for name in selected
    )
    return [request for request in found if request is not None]


def _expected_request(
    spec: Spec,
    kb: KnowledgeBase,
    existing: Lock | None,
    options: LockOptions,
    name: str,
    plans: dict[str, TargetPlan] | None,
) -> PipRequest | None:
    from gpuenv.plan import plan_target

    previous = existing.target(name) if existing else None
    try:
        plan = plan_target(
            name, spec, kb, detected=options.detected, torch_index=options.torch_index
        )
        if plans is not None:
            plans[name] = plan
        need = build_lock.needs(build_lock.declared(spec), cuda=plan.cuda)
        return _job(spec, plan, previous, options).pip_request(need)
    except Exception:  # noqa: BLE001 - lock_target meets it again, in its turn
        return None


def _sdist_scanner(options: LockOptions) -> Callable[[PipPackage], Scanned | None]:
    """What an sdist's build needs, read from it (``lock.sdistscan``): once per sdist.
    The scanner (tarfile, zipfile, the download path) loads with the first sdist: a
    lock of wheels only never needs it."""
    seen: dict[str, Scanned | None] = {}

    def scanned(package: PipPackage) -> Scanned | None:
        if package.sha256 not in seen:
            from gpuenv.lock.sdistscan import scan

            seen[package.sha256] = scan(package, options.cache_dir)
        return seen[package.sha256]

    return scanned


def _solve_conda(
    backends: Backends, job: _TargetJob, progress: Progress
) -> tuple[tuple[CondaPackage, ...], str]:
    """The target's conda records (none without [conda]), and the Python pip resolves for."""
    spec, plan = job.spec, job.plan
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
            preferences=job.keep.conda if job.keep else (),
            cache_dir=job.options.cache_dir,
            mirrors=job.options.mirrors,
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
    backends: Backends, job: _TargetJob, need: BuildNeeds
) -> tuple[tuple[PipPackage, ...], BuildNeeds]:
    """The pip resolution, and the build needs it ended with: a package that uv could only
    read by building it, whose build imports torch, is given the dependencies the spec or
    the knowledge base declares for it, and resolved again (once per package)."""
    while True:
        try:
            return backends.pip.resolve(job.pip_request(need)), need
        except NoCompatiblePlan as exc:  # say which target, and what the request held
            raise _unsatisfiable(exc, job) from None
        except ExternalToolError as exc:
            name = build_needing_torch(exc.stderr_tail or exc.message)
            declared = {n for n, _ in need.dependency_metadata}
            requires = build_lock.metadata_for(name, job.spec) if name else None
            if name is None or name in declared or requires is None:
                raise _metadata_needs_torch(exc, name) from None
            need = need.union(BuildNeeds(dependency_metadata=((name, requires),)))


def _unsatisfiable(exc: NoCompatiblePlan, job: _TargetJob) -> NoCompatiblePlan:
    """uv's conflict, named for its target; where the project's own dependencies took
    part, it says they come from its files (a conflict on a name the spec never lists
    was read as gpuenv's own)."""
    local = job.spec.local
    if exc.message.startswith("target "):
        return exc
    exc.message = f"target {job.plan.target}: {exc.message}"
    if local is not None and local.requirements:
        source = "pyproject.toml" if (local.root / "pyproject.toml").is_file() else "setup.py"
        exc.message += (
            f"\n(the request holds the project's own dependencies, from {local.root / source})"
        )
    exc.args = (exc.message, *exc.args[1:])
    return exc


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


def _build_pins(locked: LockedTarget) -> tuple[PipPackage, ...]:
    """The builds' versions, kept like any other pin (their sdists are not in ``pip``)."""
    return tuple(
        PipPackage(b.name, b.version, b.source.url, b.source.sha256 or "") for b in locked.builds
    )


def _check_conda_toolkit(job: _TargetJob, need: BuildNeeds, more: BuildNeeds) -> None:
    """A toolkit from conda is solved before pip: a build found only in the pip resolution
    cannot add one any more."""
    spec, plan = job.spec, job.plan
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
