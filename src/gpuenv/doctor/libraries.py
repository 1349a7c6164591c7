"""Duplicate, mismatched and missing CUDA libraries (runtime, cuBLAS, cuDNN, NCCL).

For each library: every copy the environment can reach, the one the loader picks for
torch's ``libtorch_cuda.so`` (see ``_cudalibs``), and whether that copy matches what
torch was built with (``torch/version.py``'s ``cuda``; cuDNN and NCCL from the
knowledge base's entry for the build).
"""

from __future__ import annotations

import re
from typing import Any

from gpuenv.doctor._context import Context
from gpuenv.doctor._cudalibs import FAMILIES, LIB_RE, LibCopy, LibraryIndex
from gpuenv.doctor.model import Finding, Severity

_LABEL = {"cudart": "libcudart", "cublas": "libcublas", "cudnn": "libcudnn", "nccl": "libnccl"}


def expected_version(ctx: Context, family: str) -> str | None:
    """The version of ``family`` torch was built with, as far as we know it."""
    torch = ctx.env.torch
    if torch is None or torch.cuda is None:
        return None
    if family in ("cudart", "cublas"):
        return str(torch.cuda)
    build = ctx.torch_build
    if build is None:
        return None
    return build.cudnn if family == "cudnn" else build.nccl


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2])


def matches(version: str | None, expected: str | None) -> bool | None:
    """Same major, and a minor no older than the build's; None when unknown."""
    if version is None or expected is None:
        return None
    have, want = _numbers(version), _numbers(expected)
    if len(have) < 2 or len(want) < 2:
        return None
    return have[0] == want[0] and have[1] >= want[1]


def _needed_name(index: LibraryIndex, family: str, copies: list[LibCopy]) -> str | None:
    if index.loader is not None:
        for name in index.loader.needed:
            match = LIB_RE.match(name)
            if match and match[1] == family:
                return name
        return None
    sonames = sorted({c.soname for c in copies if c.soname})
    return sonames[-1] if sonames else None


def _evidence(ctx: Context, family: str, copies: list[LibCopy]) -> dict[str, Any]:
    index = ctx.libraries
    needed = _needed_name(index, family, copies)
    picked = index.pick(needed) if needed else None
    expected = expected_version(ctx, family)
    return {
        "library": _LABEL[family],
        "needed_name": needed,
        "loaded_by": str(index.loader.path) if index.loader else None,
        "copies": [c.to_json() for c in copies],
        "picked": picked.to_json() if picked else None,
        "torch_built_with": expected,
        "picked_matches_torch": matches(picked.version, expected) if picked else None,
        "search_order": [f"{d.path} ({d.via})" for d in index.search],
    }


def same_version(a: str | None, b: str | None) -> bool:
    """Equal as far as both are known: a toolkit's "13.0" is the same as a wheel's
    "13.0.96"; an unknown version equals nothing."""
    if a is None or b is None:
        return False
    left, right = a.split("."), b.split(".")
    width = min(len(left), len(right))
    return left[:width] == right[:width]


def _distinct(copies: list[LibCopy]) -> int:
    kinds: list[str | None] = []
    for copy in copies:
        if not any(same_version(copy.version, k) for k in kinds):
            kinds.append(copy.version)
    return len(kinds)


def _duplicate(ctx: Context, family: str, copies: list[LibCopy]) -> Finding:
    evidence = _evidence(ctx, family, copies)
    picked, ok = evidence["picked"], evidence["picked_matches_torch"]
    label = _LABEL[family]
    versions = ", ".join(sorted({c.version or "unknown" for c in copies}))
    if ok is False:
        severity = Severity.ERROR
        tail = (
            f"the loader picks {picked['path']} ({picked['version']}), but torch was built"
            f" with {evidence['torch_built_with']}"
        )
    else:
        # Copies the loader never visits (a toolkit not on the path) are only worth a note.
        picked_version = picked["version"] if picked else None
        others = [
            c
            for c in copies
            if ctx.libraries.searched(c) and not same_version(c.version, picked_version)
        ]
        severity = Severity.WARNING if others or picked is None else Severity.INFO
        tail = f"the loader picks {picked['path']}" if picked else "no copy is on the search path"
    return Finding(
        code="duplicate-cuda-library",
        severity=severity,
        message=f"{len(copies)} copies of {label} ({versions}) are reachable; {tail}",
        evidence=evidence,
        fix=(
            f"keep one {label}: remove the other copies' directories from LD_LIBRARY_PATH, "
            "and install CUDA libraries with one manager only (the nvidia-* wheels torch "
            "depends on, or conda's packages)"
        ),
    )


def _mismatch(ctx: Context, family: str, copies: list[LibCopy]) -> Finding:
    evidence = _evidence(ctx, family, copies)
    picked = evidence["picked"]
    return Finding(
        code="cuda-library-mismatch",
        severity=Severity.ERROR,
        message=(
            f"the loader picks {picked['path']} ({picked['version']}) for "
            f"{evidence['needed_name']}, but torch was built with "
            f"{evidence['torch_built_with']}"
        ),
        evidence=evidence,
        fix=(
            f"install the {_LABEL[family]} torch depends on (reinstall torch with its "
            "nvidia-* dependencies) and drop the stray directory from LD_LIBRARY_PATH"
        ),
    )


def _missing(ctx: Context, family: str, needed: str) -> Finding:
    index = ctx.libraries
    loader = index.loader
    return Finding(
        code="cuda-library-missing",
        severity=Severity.ERROR,
        message=(
            f"{loader.path if loader else 'torch'} needs {needed}, and no directory on "
            "its search path holds it: importing torch will fail"
        ),
        evidence={
            "needed_name": needed,
            "loaded_by": str(loader.path) if loader else None,
            "copies_elsewhere": [c.to_json() for c in index.copies.get(family, [])],
            "search_order": [f"{d.path} ({d.via})" for d in index.search],
        },
        fix="reinstall torch with its dependencies (the nvidia-* wheels or conda's CUDA "
        "packages) into this environment",
    )


def check(ctx: Context) -> list[Finding]:
    index = ctx.libraries
    findings = []
    for family in FAMILIES:
        copies = index.copies.get(family, [])
        needed = _needed_name(index, family, copies)
        if index.loader is not None and needed and index.pick(needed) is None:
            findings.append(_missing(ctx, family, needed))
        elif _distinct(copies) > 1:
            findings.append(_duplicate(ctx, family, copies))
        elif copies and needed:
            picked = index.pick(needed)
            if picked and matches(picked.version, expected_version(ctx, family)) is False:
                findings.append(_mismatch(ctx, family, copies))
    return findings
