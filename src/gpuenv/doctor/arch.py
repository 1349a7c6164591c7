"""GPUs whose compute capability the installed torch build has no kernels for.

The build's arch list comes from the knowledge base's entry for the installed release
and wheel tag (the compiled ``TORCH_CUDA_ARCH_LIST``); ``--deep`` adds the list the
probe reads from ``torch.cuda.get_arch_list()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuenv.doctor._context import Context
from gpuenv.doctor.model import Finding, Severity
from gpuenv.versions import ArchTarget, ComputeCapability, VersionFormatError, arch_covering


def parse_arch_list(entries: Sequence[str]) -> tuple[ArchTarget, ...]:
    """``torch.cuda.get_arch_list()`` form (``sm_90``, ``compute_90``) to arch targets."""
    sass: set[ComputeCapability] = set()
    ptx: set[ComputeCapability] = set()
    for entry in entries:
        try:
            cc = ArchTarget.parse(entry).cc
        except VersionFormatError:
            continue
        (ptx if entry.startswith("compute_") else sass).add(cc)
    return tuple(ArchTarget(cc, ptx=cc in ptx) for cc in sorted(sass | ptx))


def uncovered(ctx: Context, arch: tuple[ArchTarget, ...], arch_from: str) -> list[Finding]:
    torch = ctx.env.torch
    if torch is None or not arch:
        return []
    findings = []
    for gpu in ctx.request.hardware.gpus:
        cc = gpu.compute_capability
        if cc is None or arch_covering(arch, cc) is not None:
            continue
        findings.append(
            Finding(
                code="arch-not-covered",
                severity=Severity.ERROR,
                message=f"GPU {gpu.index} ({gpu.name}, {cc.sm}) is not in torch {torch.version}'s "
                f"arch list ({', '.join(str(a) for a in arch)}): kernels fail with 'no kernel "
                "image is available'",
                evidence={
                    "gpu": gpu.name,
                    "gpu_index": gpu.index,
                    "compute_capability": str(cc),
                    "torch": torch.version,
                    "build": torch.tag,
                    "arch_list": [str(a) for a in arch],
                    "arch_list_from": arch_from,
                },
                fix="install a torch build whose arch list covers this GPU (gpuenv plan "
                "with the GPU named picks one)",
            )
        )
    return findings


def check(ctx: Context) -> list[Finding]:
    build = ctx.torch_build
    if build is None or build.is_cpu or not ctx.request.hardware.gpus:
        return []
    return uncovered(ctx, build.arch, f"gpuenv knowledge base ({build.source})")
