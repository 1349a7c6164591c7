"""Packages installed into a conda base environment: conda itself runs from base, so
a broken base breaks every environment, and base cannot be recreated."""

from __future__ import annotations

from gpuenv.doctor._context import Context
from gpuenv.doctor.model import Finding, Severity

_STACK_CONDA = ("pytorch", "torch", "cudatoolkit", "cudnn", "nccl", "tensorflow", "jax")
_STACK_PIP = ("torch", "tensorflow", "jax", "nvidia-")
_MAX_LISTED = 25


def _stack(ctx: Context) -> list[str]:
    found = [
        f"conda {p.name} {p.version}"
        for p in ctx.env.conda_packages
        if p.name.startswith(_STACK_CONDA) or p.name.startswith("cuda-")
    ]
    found += [f"pip {d.name} {d.version}" for d in ctx.env.dists if d.name.startswith(_STACK_PIP)]
    return sorted(found)


def check(ctx: Context) -> list[Finding]:
    env = ctx.env
    if not env.conda_base:
        return []
    packages = _stack(ctx)
    if not packages:
        return []
    marker = env.prefix / ("condabin" if (env.prefix / "condabin").is_dir() else "envs")
    return [
        Finding(
            code="conda-base-env",
            severity=Severity.WARNING,
            message=f"{env.prefix} is a conda base environment and holds a GPU stack "
            f"({len(packages)} packages, e.g. {packages[0]})",
            evidence={
                "prefix": str(env.prefix),
                "base_marker": str(marker),
                "packages": packages[:_MAX_LISTED],
                "count": len(packages),
            },
            fix="create a separate environment for the stack (gpuenv install, or conda "
            "create -n NAME) and remove these packages from base",
        )
    ]
