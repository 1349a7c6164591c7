"""Whether a CUDA library's copy suits torch: its CUDA major and its version against
the build's (``libraries``, ``ownership`` and ``ldpath`` judge copies by it)."""

from __future__ import annotations

import re

from gpuenv.doctor._catalog import Library, catalog
from gpuenv.doctor._context import Context
from gpuenv.doctor._cudalibs import LibCopy


def expected_version(ctx: Context, library: Library | str) -> str | None:
    """The version of ``library`` torch was built with, as far as we know it."""
    lib = catalog().by_name(library) if isinstance(library, str) else library
    torch = ctx.env.torch
    if lib is None or torch is None or torch.cuda is None:
        return None
    if lib.versioned == "cuda":
        return str(torch.cuda)
    build = ctx.torch_build
    if build is None:
        return None
    if lib.versioned == "cudnn":
        return build.cudnn
    return build.nccl if lib.versioned == "nccl" else None


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


def fits(ctx: Context, copy: LibCopy) -> bool | None:
    """Whether a copy suits torch: its CUDA major is torch's and its version matches
    the build's; None when neither is known."""
    torch = ctx.env.torch
    want_major = torch.cuda.major if torch is not None and torch.cuda is not None else None
    major_ok = None
    if want_major is not None and copy.cuda_major is not None:
        major_ok = copy.cuda_major == want_major
    version_ok = matches(copy.version, expected_version(ctx, copy.library))
    if major_ok is False or version_ok is False:
        return False
    return True if major_ok or version_ok else None
