"""The spec change that would lock a target from the default index alone, offered when
the torch index cannot be reached (networks that reach PyPI only).

Only PyPI's own torch build comes from the default index: a GPU target gets it when
its CUDA is the one PyPI's build is for (``[stack] cuda``), a CPU target on linux-64
with ``build = "pypi"``. A torch index that is named (``[pip] torch-index``,
``GPUENV_TORCH_INDEX``) serves every build, so the change starts by removing it. The
change is planned before it is offered: it is named only when the planner, given it,
chooses PyPI's build for the target.

When PyPI's build of the planned release cannot run on the target (it is built for a
CUDA newer than the driver runs, or without the GPU's arch), the route is the newest
older release the user's torch specifier allows whose PyPI build the target runs: a
torch pinned to it, and its CUDA.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpuenv.errors import GpuenvError, NetworkError

if TYPE_CHECKING:
    from gpuenv.hardware import HardwareFacts
    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.plan import TargetPlan
    from gpuenv.spec import Spec

# How index_role names the torch index in a NetworkError's message.
_TORCH_INDEX_ROLE = "the torch index"


def pypi_route(
    name: str,
    spec: Spec,
    kb: KnowledgeBase,
    *,
    detected: HardwareFacts | None = None,
    torch_index: str | None = None,
) -> str | None:
    """The exact spec change that locks target ``name`` from the default index alone,
    or None when none fits (or the target already does). A torch index that is named
    (``[pip] torch-index``, ``torch_index``: ``GPUENV_TORCH_INDEX``) is used for every
    build, PyPI's too: when the build planned is PyPI's own, the change is removing it
    (the hint had told the user to set the key that was set, never this)."""
    from gpuenv.plan import plan_target

    removals = _removals(spec, torch_index)
    if spec.pip.torch_index:
        spec = replace(spec, pip=replace(spec.pip, torch_index=None))
    try:
        plan = plan_target(name, spec, kb, detected=detected)
    except GpuenvError:
        return None
    # A named torch index stays the user's choice for another build: only the build
    # the default index carries as it is planned is offered then.
    trial = None if plan.pypi_default or removals else _trial(name, spec, kb, plan)
    try:
        chosen = plan_target(name, trial[0], kb, detected=detected) if trial else plan
    except GpuenvError:  # PyPI's CUDA of this release does not run here
        trial, chosen = None, plan
    if (trial is not None or removals) and chosen.pypi_default:
        changes = [*removals, *([f"set {trial[1]}"] if trial else [])]
    elif not removals and not plan.pypi_default:
        older = _older_release(name, spec, kb, plan, detected)
        if older is None:
            return None
        changes, chosen = older
    else:
        return None
    cost = (
        ", a CUDA build that runs on a CPU and brings several GB of CUDA libraries"
        if plan.hardware.cpu
        else ""
    )
    return (
        f"to lock {name} from the default index alone, {' and '.join(changes)}: "
        f"torch {chosen.torch} {chosen.cu_tag} is PyPI's own build{cost}"
    )


# How many older releases are planned, at most, looking for one whose PyPI build runs:
# a failed lock's hint, bounded (each try plans the target once or twice, a few ms).
OLDER_RELEASES_TRIED = 12


def _older_release(
    name: str,
    spec: Spec,
    kb: KnowledgeBase,
    plan: TargetPlan,
    detected: HardwareFacts | None,
) -> tuple[list[str], TargetPlan] | None:
    """The changes that pin the newest release older than the planned one (within the
    user's torch specifier) whose PyPI build the target runs, and the plan they give;
    None when no such release is found among the next ``OLDER_RELEASES_TRIED``."""
    from packaging.version import Version

    from gpuenv.plan import constraints, plan_target

    wanted = constraints(spec, name)
    planned = Version(plan.torch)
    older = [r for r in kb.torch_matching(wanted.torch) if r.version < planned]
    for release in older[:OLDER_RELEASES_TRIED]:
        pinned, change = _with_torch(spec, name, str(release.version), wanted.torch_key)
        try:
            first = plan_target(name, pinned, kb, detected=detected)
            if first.pypi_default:
                return [f"set {change}"], first
            trial = _trial(name, pinned, kb, first)
            if trial is None:
                continue
            chosen = plan_target(name, trial[0], kb, detected=detected)
        except GpuenvError:
            continue
        if chosen.pypi_default:
            return [f"set {change}", f"set {trial[1]}"], chosen
    return None


def _with_torch(spec: Spec, name: str, version: str, key: str) -> tuple[Spec, str]:
    """``spec`` with torch pinned to ``version`` where the target's torch comes from
    (``key``: its own ``torch``, else [stack]'s), and the change as the user writes it."""
    if key != "stack.torch":
        target = replace(spec.targets[name], torch=version)
        return replace(spec, targets={**spec.targets, name: target}), (
            f'[targets.{name}] torch = "{version}"'
        )
    every = " (for every target)" if len(spec.targets) > 1 else ""
    return replace(spec, stack=replace(spec.stack, torch=version)), (
        f'[stack] torch = "{version}"{every}'
    )


def _removals(spec: Spec, torch_index: str | None) -> list[str]:
    """What names a torch index now, as the user undoes it."""
    every = " (for every target)" if len(spec.targets) > 1 else ""
    out = ["unset GPUENV_TORCH_INDEX"] if torch_index else []
    if spec.pip.torch_index:
        out.append(f"remove [pip] torch-index{every}")
    return out


def _trial(name: str, spec: Spec, kb: KnowledgeBase, plan: TargetPlan) -> tuple[Spec, str] | None:
    """The spec with the change that asks for PyPI's build of the planned release, and
    the change as the user writes it; None when PyPI has no CUDA build to ask for."""
    release = kb.torch_release(plan.torch)
    build = release.on(plan.hardware.platform).pypi_cuda_build() if release else None
    if build is None or build.cuda is None:  # (cuda: for the type checker)
        return None  # PyPI has no build here, or its build is the CPU one
    if plan.hardware.cpu:
        target = replace(spec.targets[name], build="pypi")
        return replace(spec, targets={**spec.targets, name: target}), (
            f'[targets.{name}] build = "pypi"'
        )
    toolkit = spec.stack.toolkit
    if toolkit and toolkit != "auto" and not toolkit.startswith("system:"):
        return None  # the toolkit pins the wheels' CUDA
    change = f'[stack] cuda = "{build.cuda}"' + (
        " (for every target)" if len(spec.targets) > 1 else ""
    )
    return replace(spec, stack=replace(spec.stack, cuda=str(build.cuda))), change


def with_pypi_route(
    error: NetworkError,
    name: str,
    spec: Spec,
    kb: KnowledgeBase,
    *,
    torch_index: str | None,
    detected: HardwareFacts | None = None,
) -> NetworkError:
    """``error`` with the PyPI route (``extra["pypi_route"]``), when the torch index
    failed and a route fits: ``partial_lock_error`` shows it under the target's line."""
    if not error.message.startswith(_TORCH_INDEX_ROLE):
        return error
    route = pypi_route(name, spec, kb, detected=detected, torch_index=torch_index)
    if route is not None:
        error.extra["pypi_route"] = route
    return error
