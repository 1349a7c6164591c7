"""Choose a stack per target, and say why.

``make_plan`` is pure: the spec, the knowledge base and (for ``detect`` targets)
measured hardware facts in; a ``Plan`` out. For each target it keeps only the torch
builds of the target's platform that the driver can run and whose arch list covers every
GPU, takes the newest torch release matching the spec that has such a build (by default
the newest release *every* target can run: one torch for the project), then that
release's newest such CUDA. Every decision is recorded as a sentence in ``reasons``.
When nothing fits it raises ``NoCompatiblePlan`` naming each obstacle and concrete
alternatives, the one that changes least first.

Modules: ``_model`` (values), ``_hardware`` (a target's hardware, and what rules it out
before any build: a driver its GPU cannot run, a Jetson's L4T), ``_search`` (the search),
``_shared`` (one torch for all targets), ``_reasons`` (explaining a choice),
``_alternatives`` (obstacles and alternatives when nothing fits).
"""

from __future__ import annotations

from typing import Literal

from packaging.version import InvalidVersion, Version

from gpuenv._network import join_index
from gpuenv.errors import NoCompatiblePlan
from gpuenv.hardware import HardwareFacts
from gpuenv.knowledge import DriverCompat, KnowledgeBase, TorchBuild, TorchRelease
from gpuenv.plan._hardware import (
    cuda_ceiling,
    driver_range_problem,
    gpu_models,
    l4t_problem,
    target_hardware,
)
from gpuenv.plan._model import (
    DEFAULT_TORCH_INDEX,
    KNOWN_PYTHONS,
    Constraints,
    Plan,
    TargetHardware,
    TargetPlan,
    UnverifiedFact,
)
from gpuenv.plan._reasons import Choice, reasons, unverified
from gpuenv.plan._search import Notes, paired_companion, search, spec_text
from gpuenv.plan._seen import Seen, with_seen
from gpuenv.plan._shared import SharedTorch, participates, shared_reason, shared_torch
from gpuenv.spec import Spec, parse_version_spec
from gpuenv.versions import CudaVersion

__all__ = [
    "DEFAULT_TORCH_INDEX",
    "FACTS_FILE",
    "KNOWN_PYTHONS",
    "Constraints",
    "Plan",
    "SharedTorch",
    "TargetHardware",
    "TargetPlan",
    "UnverifiedFact",
    "constraints",
    "make_plan",
    "plan_target",
    "spec_text",
    "target_hardware",
]

# Where a user's facts file lives (the CLI resolves it; named here for messages).
FACTS_FILE = "your facts file ($GPUENV_FACTS, default ~/.config/gpuenv/facts.toml)"


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


def constraints(spec: Spec, target: str | None = None) -> Constraints:
    """What the spec asks of ``target`` (its own ``torch`` key wins over [stack]'s)."""
    stack = spec.stack
    own = spec.targets[target].torch if target is not None else None
    torch = own if own is not None else stack.torch
    return Constraints(
        torch=parse_version_spec(torch),
        torch_text=torch,
        python=stack.python,
        cuda=_requested_cuda(spec),
        mode=DriverCompat(stack.driver_compat),
        torchvision=stack.torchvision,
        torchaudio=stack.torchaudio,
        torch_key=f"targets.{target}.torch" if own is not None else "stack.torch",
        pypi_build=target is not None and spec.targets[target].build == "pypi",
        exclude_newer=spec.pip.exclude_newer,
        exclude_newer_packages=tuple(spec.pip.exclude_newer_packages.items()),
    )


def _os_packages(hw: TargetHardware, build: TorchBuild) -> dict[str, str]:
    """conda's virtual packages of the target's operating system."""
    if hw.platform == "osx-arm64":
        return {"__osx": build.macos or "11.0", "__unix": "0"}
    if hw.platform == "win-64":
        return {"__win": "0"}
    return {"__glibc": hw.glibc, "__linux": "5.10", "__unix": "0"}


def _virtual_packages(hw: TargetHardware, kb: KnowledgeBase, build: TorchBuild) -> dict[str, str]:
    packages = _os_packages(hw, build)
    ceiling = cuda_ceiling(hw, kb)
    if ceiling is not None:
        packages["__cuda"] = str(ceiling)
    if hw.min_cc is not None:
        packages["__cuda_arch"] = str(hw.min_cc)
    return dict(sorted(packages.items()))


def _refuse(name: str, hw: TargetHardware, c: Constraints, kb: KnowledgeBase) -> NoCompatiblePlan:
    # Loaded only when nothing fits: a plan that succeeds never needs it.
    from gpuenv.plan._alternatives import Problem, alternatives, obstacles

    matching = [r.on(hw.platform) for r in kb.torch_matching(c.torch)]
    where = kb.facts_file or FACTS_FILE
    found = obstacles(matching, hw, c, kb, where)
    return NoCompatiblePlan(
        f"no torch build fits target '{name}' ({hw.describe()}):\n"
        + "\n".join(f"- {o}" for o in found),
        target=name,
        alternatives=alternatives(Problem(name, hw, c, kb, kb.torch_matching(c.torch))),
    )


def _companion(release: TorchRelease, package: str, wanted: str | bool | None) -> str | None:
    if wanted is False:
        return None
    version = paired_companion(release, package, wanted)
    return None if version is None else str(version)


def _target_plan(
    choice: Choice, c: Constraints, kb: KnowledgeBase, notes: Notes, how: str
) -> TargetPlan:
    found, hw = choice.found, choice.hw
    release, build = found.release, found.build
    ceiling = cuda_ceiling(hw, kb)
    return TargetPlan(
        target=choice.name,
        hardware=hw,
        python=found.python,
        torch=str(release.version),
        torchvision=_companion(release, "torchvision", c.torchvision),
        torchaudio=_companion(release, "torchaudio", c.torchaudio),
        cuda=str(build.cuda) if build.cuda else None,
        cu_tag=build.tag,
        arch_list=tuple(str(a) for a in build.arch),
        cudnn=build.cudnn,
        nccl=build.nccl,
        index_url=choice.index_url,
        pypi_default=release.pypi_default == build.tag and release.on_pypi(found.python),
        driver_compat=c.mode.value,
        driver_cuda=str(ceiling) if ceiling else None,
        virtual_packages=_virtual_packages(hw, kb, build),
        reasons=tuple(reasons(choice, c, kb, notes)),
        unverified=unverified(choice, kb),
        torch_choice=how,
    )


def plan_target(
    name: str,
    spec: Spec,
    kb: KnowledgeBase,
    *,
    detected: HardwareFacts | None = None,
    torch_index: str | None = None,
    shared: SharedTorch | Literal["compute"] | None = "compute",
) -> TargetPlan:
    """Plan one target. With ``[stack] same-torch`` (the default) its torch is the
    project's shared one, computed here from every target unless ``make_plan`` passes it
    in (``shared``: the precomputed one; ``None``: none applies)."""
    c = constraints(spec, name)
    hw = target_hardware(name, spec.targets[name], kb, detected)
    models = gpu_models(spec.targets[name], kb, detected)
    given_index = torch_index or spec.pip.torch_index
    blocked = driver_range_problem(name, hw, kb) or l4t_problem(name, models, given_index)
    if blocked is not None:
        raise blocked
    if shared == "compute":
        shared = (
            shared_torch(spec, kb, c, detected=detected, torch_index=given_index)
            if participates(spec, name)
            else None
        )
    common = shared if isinstance(shared, SharedTorch) and name in shared.participants else None
    notes = Notes()
    pool = [common.release] if common else kb.torch_matching(c.torch)
    found = search(pool, hw, c, kb, notes)
    if found is None:
        raise _refuse(name, hw, c, kb)
    if common is not None:
        torch_reason, how = shared_reason(common, name, kb, c), "shared"
    else:
        torch_reason = (
            f"torch {found.release.version}: newest release matching {c.torch_text!r} that fits"
        )
        how = (
            "own"
            if spec.targets[name].torch is not None
            else ("shared" if spec.stack.same_torch else "free")
        )
    base = given_index or DEFAULT_TORCH_INDEX
    index = join_index(base, found.build.tag)  # a query (?token=) stays at the end
    choice = Choice(name, found, hw, index, tuple(models), torch_reason, given_index is not None)
    return _target_plan(choice, c, kb, notes, how)


def _newer_on_index(spec: Spec, kb: KnowledgeBase, seen: str | None) -> tuple[str, ...]:
    """A notice when the index has a torch newer than the data knows and the spec admits it."""
    newest = kb.newest_torch
    try:
        version = Version(seen) if seen else None
    except InvalidVersion:
        version = None
    if version is None or newest is None or version <= newest.version:
        return ()
    asked = [spec.stack.torch, *(t.torch for t in spec.targets.values() if t.torch)]
    if not any(parse_version_spec(a).contains(version) for a in asked):
        return ()
    known = f"{newest.version.major}.{newest.version.minor}"
    where = kb.facts_file or FACTS_FILE
    return (
        f"torch {version} is on the index (seen by the last 'gpuenv lock') but this gpuenv's "
        f"knowledge stops at {known}: upgrade gpuenv or add the facts in {where}",
    )


def make_plan(
    spec: Spec,
    kb: KnowledgeBase,
    *,
    only: str | None = None,
    detected: HardwareFacts | None = None,
    torch_index: str | None = None,
    newest_on_index: str | None = None,
    seen_builds: Seen | None = None,
) -> Plan:
    """Plan every target (or ``only`` one); the first unsatisfiable target raises.
    ``newest_on_index``: the newest torch an index showed (``gpuenv lock`` remembers it),
    for a notice when the data does not know it yet. ``seen_builds``: the builds the torch
    index served when ``gpuenv lock`` last read it (``lock.index_builds.seen_builds``):
    those the data lacks are considered too, marked as seen on the index."""
    names = [only] if only else list(spec.targets)
    given_index = torch_index or spec.pip.torch_index
    if seen_builds:
        kb = with_seen(kb, seen_builds, given_index or DEFAULT_TORCH_INDEX)
    shared = (
        shared_torch(spec, kb, constraints(spec), detected=detected, torch_index=given_index)
        if spec.stack.same_torch
        else None
    )
    targets = tuple(
        plan_target(n, spec, kb, detected=detected, torch_index=torch_index, shared=shared)
        for n in names
    )
    return Plan(targets, _newer_on_index(spec, kb, newest_on_index))
