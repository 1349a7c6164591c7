"""Duplicate, mismatched and missing CUDA libraries: every library of the catalogue
(``knowledge/data/cudalibs.toml``), resolved the way ``import torch`` resolves it (``_cudalibs``).

Copies compete only under one name: the loader looks for the exact needed name
(``libcudart.so.12``), so a ``libcudart.so.13`` elsewhere is not a rival. Each finding
names the winner, how it won (which variable, RPATH, preload or ``ld.so.conf`` file),
the losers, and a fix for the way it won.
"""

from __future__ import annotations

from typing import Any

from gpuenv.doctor._catalog import Library, catalog
from gpuenv.doctor._clashes import clashes, keep_and_stray
from gpuenv.doctor._context import Context
from gpuenv.doctor._cudalibs import (
    VIA_LD_LIBRARY_PATH,
    VIA_LD_PRELOAD,
    VIA_PRELOAD,
    LibCopy,
    LibraryIndex,
    Load,
)
from gpuenv.doctor._fixes import clash_steps, entry_fix, pip_command, plain_pip
from gpuenv.doctor._fsafe import resolved
from gpuenv.doctor._libversion import expected_version, fits
from gpuenv.doctor._syspath import PathEntry
from gpuenv.doctor.model import Finding, Severity


def same_version(a: str | None, b: str | None) -> bool:
    """Equal as far as both are known: a toolkit's "13.0" is the same as a wheel's
    "13.0.96"; an unknown version equals nothing."""
    if a is None or b is None:
        return False
    left, right = a.split("."), b.split(".")
    width = min(len(left), len(right))
    return left[:width] == right[:width]


def _kind(copy: LibCopy) -> tuple[str | None, int | None]:
    return copy.version, copy.cuda_major


def _alike(a: LibCopy, b: LibCopy) -> bool:
    if a.path == b.path:
        return True
    if a.cuda_major is not None and b.cuda_major is not None and a.cuda_major != b.cuda_major:
        return False
    return same_version(a.version, b.version)


def _distinct(copies: list[LibCopy]) -> int:
    kinds: list[LibCopy] = []
    for copy in copies:
        if not any(_alike(copy, k) for k in kinds):
            kinds.append(copy)
    return len(kinds)


def _rivals(ctx: Context, name: str) -> list[LibCopy]:
    """Every copy reachable under exactly this file name, in listing order."""
    seen: dict[Any, LibCopy] = {}
    for listing in ctx.libraries.listing.values():
        copy = listing.get(name)
        if copy is not None:
            seen.setdefault(copy.path, copy)
    return list(seen.values())


def _names(ctx: Context, library: Library) -> list[str]:
    """The names of ``library`` the process asks for (needed by torch's objects or by
    other CUDA libraries); without torch's objects, the highest SONAME on disk."""
    index = ctx.libraries
    names = [n for n in index.needed if catalog().match(n) == library]
    if names or index.loader is not None:
        return names
    sonames = sorted({c.soname for c in index.copies.get(library.name, []) if c.soname})
    return sonames[-1:]


def _evidence(ctx: Context, library: Library, name: str, copies: list[LibCopy]) -> dict[str, Any]:
    index = ctx.libraries
    load = index.loads.get(name)
    picked = load.copy if load else index.pick(name)
    expected = expected_version(ctx, library)
    torch = ctx.env.torch
    doubles = [d.to_json() for d in index.doubles if d.copy.library == library]
    return {
        "library": library.label,
        "needed_name": name,
        "needed_by": index.needed.get(name),
        "loaded_by": str(index.loader.path) if index.loader else None,
        "copies": [c.to_json() for c in copies],
        "picked": (load.to_json() if load else picked.to_json()) if picked else None,
        "torch_built_with": expected,
        "torch_cuda_major": torch.cuda.major if torch and torch.cuda else None,
        "picked_matches_torch": fits(ctx, picked) if picked else None,
        **({"also_loaded": doubles} if doubles else {}),
        "search_order": [d.label() for d in index.search],
        **({"torch_preload": index.preload.source} if index.preload_ran and index.preload else {}),
    }


def _describe(copy: LibCopy) -> str:
    parts = [copy.version or "version unknown"]
    if copy.cuda_major is not None:
        parts.append(f"CUDA {copy.cuda_major}")
    if copy.owner:
        parts.append(copy.owner)
    return f"{copy.path} ({', '.join(parts)})"


def _want(ctx: Context, library: Library) -> str:
    torch = ctx.env.torch
    expected = expected_version(ctx, library)
    major = torch.cuda.major if torch is not None and torch.cuda is not None else None
    if expected:
        return f"torch was built with {expected}"
    return f"torch is a CUDA {major} build" if major is not None else "torch expects another"


def _how(ctx: Context, name: str, copies: list[LibCopy]) -> str:
    load = ctx.libraries.loads.get(name)
    if load is None:
        return "the loader's default search finds it first"
    if load.by != VIA_PRELOAD:
        return load.how
    entry = load.step.entry or ""
    folder = load.step.path.relative_to(entry) if entry else load.step.path
    how = f"torch's preload takes it first, from {folder} in sys.path entry {entry}"
    if any(c.path.parent != load.copy.path.parent and fits(ctx, c) for c in copies):
        how += " (torch tries nvidia/<library>/lib before nvidia/cu<major>/lib)"
    return how


def _wheel_for(ctx: Context, library: Library) -> str | None:
    """The distribution (with its pin) torch requires for this library."""
    for name, pin in ctx.torch_requires.items():
        if name == library.wheel or name.startswith(library.wheel + "-cu"):
            return f"{name}=={pin}" if pin else name
    return None


def _ld_path_steps(ctx: Context, load: Load | None, copies: list[LibCopy]) -> list[str]:
    entries = {
        c.where.entry
        for c in copies
        if c.where.via == VIA_LD_LIBRARY_PATH and fits(ctx, c) is False
    }
    if load is not None and load.step.via == VIA_LD_LIBRARY_PATH:
        entries.add(load.step.entry)
    return [
        f"remove {entry!r} from LD_LIBRARY_PATH (where your shell profile, module or "
        "activation script sets it)"
        for entry in sorted(e for e in entries if e is not None)
    ]


def _command(ctx: Context, name: str, action: str, *args: str) -> str:
    from gpuenv.doctor._records import Owner

    dist = ctx.env.dist(name)
    if dist is None:
        return plain_pip(ctx, action, *args)
    return pip_command(
        ctx, Owner("pip", dist.name, dist.version, dist.path, dist=dist), action, *args
    )


def _winner_steps(ctx: Context, library: Library, load: Load) -> list[str]:
    owner = load.copy.owner or ""
    if load.by == VIA_LD_PRELOAD:
        return [f"remove {load.step.entry} from LD_PRELOAD"]
    shared = _shared_steps(ctx, load.copy)
    if shared:
        return shared
    if load.by == VIA_PRELOAD and owner.startswith("pip "):
        name = owner.split()[1]
        return [
            f"'{_command(ctx, name, 'uninstall', name)}' (torch's preload loads its copy "
            "first; torch does not need it)"
        ]
    step = _path_step(ctx, library, load)
    return [step] if step else []


def _path_step(ctx: Context, library: Library, load: Load) -> str | None:
    wheel = _wheel_for(ctx, library)
    if load.step.via.startswith(("ld.so.cache", "ld.so.conf")):
        where = load.step.entry or "the system's ld.so.conf"
        return (
            f"install {wheel or 'the ' + library.label + ' torch expects'} into the "
            f"environment so torch finds its own copy first: {load.copy.path.parent} is on "
            f"the loader's default path through {where}, not LD_LIBRARY_PATH"
        )
    if load.step.via.startswith(("RPATH", "RUNPATH")):
        if wheel:
            name = wheel.split("==", 1)[0]
            return (
                f"'{_command(ctx, name, 'install', '--force-reinstall', '--no-deps', wheel)}' "
                "(the environment's own copy is the wrong one)"
            )
        return f"reinstall the {library.label} torch expects (the environment's copy is wrong)"
    if load.step.via == "system library directory":
        return (
            f"move the stray {load.copy.path} out of the system directory, or install "
            f"{wheel or library.label} into the environment"
        )
    return None


def _shared_steps(ctx: Context, copy: LibCopy) -> list[str]:
    """When two wheels own the winning file, the ordered fix of that clash."""
    path = str(copy.path)
    for (a, b), paths in clashes(ctx).items():
        if path in paths:
            keep, stray, _why = keep_and_stray(ctx, a, b)
            return clash_steps(ctx, keep, stray, len(paths))
    return []


def _foreign_entry(ctx: Context, load: Load | None) -> PathEntry | None:
    """The sys.path entry outside the environment (PYTHONPATH, a .pth line, the user
    site) whose wheel torch's preload took the library from: the fix takes the entry
    off the path; a pip uninstall in the environment would not reach it (seen on a real
    H200 with a cu12 cuDNN on PYTHONPATH)."""
    if load is None or load.by != VIA_PRELOAD:
        return None
    owner = load.copy.owner or ""
    if not owner.startswith("pip "):
        return None
    dist = ctx.env.dist(owner.split()[1])
    entry = ctx.env.entry(dist.site_packages) if dist is not None else None
    return entry if entry is not None and not entry.own else None


def fix_for(ctx: Context, library: Library, load: Load | None, copies: list[LibCopy]) -> str:
    """Ordered steps that make torch load the right copy, for the way the wrong one won."""
    entry = _foreign_entry(ctx, load)
    if entry is not None and load is not None:
        return entry_fix(ctx, entry, [(load.copy.owner or "").split()[1]])
    steps = _ld_path_steps(ctx, load, copies)
    if load is not None and load.step.via != VIA_LD_LIBRARY_PATH:
        steps += _winner_steps(ctx, library, load)
    if not steps:
        wheel = _wheel_for(ctx, library) or "reinstall torch with its nvidia-* dependencies"
        steps.append(
            f"install the {library.label} torch depends on ({wheel}) and keep other "
            "copies off LD_LIBRARY_PATH"
        )
    return " ".join(f"{i}. {s}." for i, s in enumerate(steps, 1))


def _duplicate(ctx: Context, library: Library, name: str, copies: list[LibCopy]) -> Finding:
    evidence = _evidence(ctx, library, name, copies)
    index = ctx.libraries
    load = index.loads.get(name)
    picked = load.copy if load else index.pick(name)
    ok = fits(ctx, picked) if picked else None
    system_only = False
    if ok is False and picked is not None:
        severity = Severity.ERROR
        tail = f"{_how(ctx, name, copies)}: {_describe(picked)}, but {_want(ctx, library)}"
    else:
        # Copies the loader never visits (a toolkit not on the path) are only worth a note.
        others = [
            c for c in copies if index.searched(c) and picked is not None and not _alike(c, picked)
        ]
        # torch loads its own fitting copy and the others sit in the system's library
        # directories (an NGC or CUDA base image's libcudnn in /usr/lib, seen on a real
        # H200 image): the copies are worth a warning, but the fix must not ask to install
        # what is installed and loaded.
        system_only = (
            ok is True
            and load is not None
            and (load.by == VIA_PRELOAD or load.step.via.startswith(("RPATH", "RUNPATH")))
            and not any(_on_ld_library_path(index, c) for c in others)
        )
        severity = Severity.WARNING if others or picked is None else Severity.INFO
        tail = f"it loads {_describe(picked)}" if picked else "no copy is on the search path"
    shown = "; ".join(_describe(c) for c in copies)
    if severity is Severity.INFO:
        fix = f"nothing needed now; keep only one {library.label} reachable"
    elif system_only:
        fix = (
            f"nothing to change for torch, which loads its own {library.label}; the other "
            f"copies are found first only by a program that loads {name} before importing "
            "torch: remove them from the system's library path if one does"
        )
    else:
        # A copy LD_PRELOAD forces in is fixed there, whether or not it fits.
        fix = fix_for(ctx, library, load if ok is False or _preloaded(load) else None, copies)
    return Finding(
        code="duplicate-cuda-library",
        severity=severity,
        message=f"{len(copies)} copies of {name} are reachable ({shown}); {tail}",
        evidence=evidence,
        fix=fix,
    )


def _on_ld_library_path(index: LibraryIndex, copy: LibCopy) -> bool:
    """Whether ``copy``'s directory is reached through an LD_LIBRARY_PATH entry."""
    wanted = resolved(copy.where.path)
    return any(d.via == VIA_LD_LIBRARY_PATH and resolved(d.path) == wanted for d in index.search)


def _preloaded(load: Load | None) -> bool:
    return load is not None and load.by == VIA_LD_PRELOAD


def _mismatch(ctx: Context, library: Library, name: str, copies: list[LibCopy]) -> Finding:
    evidence = _evidence(ctx, library, name, copies)
    load = ctx.libraries.loads.get(name)
    picked = load.copy if load else ctx.libraries.pick(name)
    assert picked is not None
    return Finding(
        code="cuda-library-mismatch",
        severity=Severity.ERROR,
        message=f"{name} loads from {_describe(picked)}, but {_want(ctx, library)}; "
        f"{_how(ctx, name, copies)}",
        evidence=evidence,
        fix=fix_for(ctx, library, load, copies),
    )


def _missing(ctx: Context, library: Library, name: str, by: str) -> Finding:
    index = ctx.libraries
    wheel = _wheel_for(ctx, library)
    return Finding(
        code="cuda-library-missing",
        severity=Severity.ERROR,
        message=(
            f"{by} needs {name}, and no directory on its search path holds it: "
            "importing torch will fail"
        ),
        evidence={
            "needed_name": name,
            "needed_by": by,
            "loaded_by": str(index.loader.path) if index.loader else None,
            "copies_elsewhere": [c.to_json() for c in index.copies.get(library.name, [])],
            "search_order": [d.label() for d in index.search],
        },
        fix=f"install {wheel} into this environment ('{plain_pip(ctx, 'install', str(wheel))}')"
        if wheel
        else "reinstall torch with its dependencies (the nvidia-* wheels or conda's CUDA "
        "packages) into this environment",
    )


def check(ctx: Context) -> list[Finding]:
    index = ctx.libraries
    findings = []
    missing = {name: by for name, by, _steps in index.missing}
    for library in catalog().libraries:
        for name in _names(ctx, library):
            if name in missing:
                findings.append(_missing(ctx, library, name, missing[name]))
                continue
            copies = _rivals(ctx, name)
            load = index.loads.get(name)
            if load is not None and all(c.path != load.copy.path for c in copies):
                copies.insert(0, load.copy)
            if _distinct(copies) > 1:
                findings.append(_duplicate(ctx, library, name, copies))
                continue
            picked = load.copy if load else index.pick(name)
            if picked is not None and fits(ctx, picked) is False:
                findings.append(_mismatch(ctx, library, name, copies))
    return findings
