"""What a target resolves besides ``[pip] dependencies``: its own dependencies
(``[targets.<name>.pip]``), the dependency groups (``[pip.groups]`` and the project's
PEP 735 ``[dependency-groups]``), the local project's dependencies (``[project] path``,
read by ``gpuenv.spec._local``) and, when the project is compiled against the prefix's
torch, its build requirements and a toolkit.

Every group is locked for every target (like uv's lock); which packages each group
brings is recorded in the target's ``groups`` table, so that ``install`` installs the
groups asked for and nothing else (``groups_closure``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from gpuenv.errors import UsageError
from gpuenv.names import TORCH_FAMILY, normalize_name

# `install` reads the groups only: the build needs (and packaging's requirement parser)
# load when a lock asks what a local project's build needs.
if TYPE_CHECKING:
    from gpuenv.lock.builds import BuildNeeds
    from gpuenv.lock.model import PipPackage
    from gpuenv.spec import BuildOptions, LocalProject, Spec


def groups(spec: Spec) -> dict[str, tuple[str, ...]]:
    """Every dependency group: the spec's ``[pip.groups]``, then the project's
    ``[dependency-groups]`` (a group named in both takes both lists)."""
    out: dict[str, list[str]] = {name: list(reqs) for name, reqs in spec.pip.groups.items()}
    for name, reqs in (spec.local.groups if spec.local else {}).items():
        out.setdefault(name, [])
        out[name] += [r for r in reqs if r not in out[name]]
    return {name: tuple(reqs) for name, reqs in sorted(out.items())}


def project_requirements(spec: Spec) -> tuple[str, ...]:
    """The local project's dependencies (none without one)."""
    local = spec.local
    if local is None:
        return ()
    if local.requirements is None:
        raise UsageError(
            f"the project at {local.root} computes its dependencies in setup.py "
            "(install_requires is not a literal list): gpuenv does not run it to find them",
            hint="declare them in pyproject.toml ([project] dependencies = [...]), "
            "or set [project] path = false in gpuenv.toml and list them in [pip] dependencies",
        )
    return local.requirements


def base_requirements(spec: Spec, target: str) -> tuple[str, ...]:
    """What every install of ``target`` holds besides the torch family: [pip], the
    target's own, the project's."""
    own = spec.targets[target].dependencies
    return tuple(dict.fromkeys((*spec.pip.dependencies, *own, *project_requirements(spec))))


def requirements(spec: Spec, target: str) -> tuple[str, ...]:
    """Everything ``target`` resolves besides the torch family and the build needs."""
    grouped = [r for reqs in groups(spec).values() for r in reqs]
    return tuple(dict.fromkeys((*base_requirements(spec, target), *grouped)))


def inputs(spec: Spec, target: str) -> dict[str, object]:
    """The parts of the input hash these add (empty for a spec that uses none of them,
    which keeps the hashes such specs had)."""
    out: dict[str, object] = {}
    own = spec.targets[target].dependencies
    if own:
        out["target-dependencies"] = list(own)
    found = groups(spec)
    if found:
        out["groups"] = {name: list(reqs) for name, reqs in found.items()}
    local = spec.local
    if local is not None:
        out["project"] = {
            "requirements": None if local.requirements is None else list(local.requirements),
            "build": project_needs(spec, cuda="any").requirements,
            "toolkit": local.cuda,
        }
    return out


def project_needs(spec: Spec, *, cuda: str | None) -> BuildNeeds:
    """A project compiled against the prefix's torch builds in the prefix: its build
    requirements (torch's family aside: the locked one) are installed there first, and a
    CUDA project needs nvcc."""
    from gpuenv.lock.builds import BuildNeeds

    local = spec.local
    if local is None or not local.package or not _in_prefix(spec):
        return BuildNeeds()
    wanted = [r for r in local.build_requires if normalize_name(_name(r) or "") not in TORCH_FAMILY]
    return BuildNeeds(requirements=tuple(wanted), toolkit=cuda is not None and _toolkit(spec))


def _in_prefix(spec: Spec) -> bool:
    """The project builds without isolation: it uses torch's cpp_extension, unless
    ``[pip.build.<name>] no-build-isolation`` says otherwise."""
    local, options = _project_build(spec)
    said = options.no_build_isolation if options is not None else None
    return local.uses_torch if said is None else said


def _toolkit(spec: Spec) -> bool:
    """The project's build needs nvcc: it has CUDA sources, unless
    ``[pip.build.<name>] toolkit`` says otherwise."""
    local, options = _project_build(spec)
    said = options.toolkit if options is not None else None
    return local.cuda if said is None else said


def _project_build(spec: Spec) -> tuple[LocalProject, BuildOptions | None]:
    """The project's own build (``[project]``) and its ``[pip.build.<name>]`` table."""
    local = spec.local
    assert local is not None
    return local, spec.pip.build.get(local.name)


def _name(line: str) -> str | None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(line).name
    except InvalidRequirement:
        return None


def closure(roots: Iterable[str], pip: Iterable[PipPackage]) -> set[str]:
    """The packages ``roots`` reach through the lock's dependency edges."""
    by_name = {p.name: p for p in pip}
    seen: set[str] = set()
    todo = [normalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        todo.extend(by_name[name].requires)
    return seen


def group_members(
    spec: Spec, target: str, pip: tuple[PipPackage, ...], requested: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """Per group, the locked packages that only it brings (``requested``: every
    requirement line the target resolved; those not from a group are its base)."""
    found = groups(spec)
    if not found:
        return {}
    grouped = {line for reqs in found.values() for line in reqs}
    grouped -= set(base_requirements(spec, target))
    base = closure(_names(line for line in requested if line not in grouped), pip)
    return {name: tuple(sorted(closure(_names(reqs), pip) - base)) for name, reqs in found.items()}


def left_out(members: Mapping[str, tuple[str, ...]], chosen: Iterable[str]) -> set[str]:
    """The locked packages an install leaves out: those of the groups not chosen that no
    chosen group brings too."""
    picked = set(chosen)
    keep = {n for name, names in members.items() if name in picked for n in names}
    return {n for name, names in members.items() if name not in picked for n in names} - keep


def _names(lines: Iterable[str]) -> list[str]:
    return [n for n in (_name(line) for line in lines) if n]
