"""torch, torchvision and torchaudio: released in lock-step and built per CUDA tag.

A companion of another release fails to import its C++ ops; one built for another CUDA
major is refused by torchvision's own check, and a CPU companion of a CUDA torch has no
GPU kernels. The pairing comes from the knowledge base; a wheel's build from its local
version (``+cu124``), or, for a plain PyPI wheel, the PyPI default build of its release.
"""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from gpuenv.doctor._context import Context
from gpuenv.doctor.environment import Dist, local_tag, public_version
from gpuenv.doctor.model import Finding, Severity
from gpuenv.names import COMPANIONS
from gpuenv.versions import CudaVersion, VersionFormatError


def _expected(ctx: Context, name: str) -> tuple[Version | None, str]:
    release = ctx.torch_release
    if release is not None:
        paired = release.torchvision if name == "torchvision" else release.torchaudio
        return paired, f"gpuenv knowledge base ({release.source})"
    return None, ""


def _pairing(ctx: Context, dist: Dist) -> Finding | None:
    torch = ctx.env.torch
    have = public_version(dist.version)
    if torch is None or have is None:
        return None
    expected, source = _expected(ctx, dist.name)
    if expected is None:
        companion_of = ctx.kb.release_for_companion(dist.name, have)
        if companion_of is None or str(companion_of.version) == torch.public:
            return None
        paired_with = str(companion_of.version)
        source = f"gpuenv knowledge base ({companion_of.source})"
    elif have == expected or (
        ctx.torch_release is not None and have in ctx.torch_release.paired(dist.name)
    ):
        return None
    else:
        paired_with = None
    return Finding(
        code="trio-mismatch",
        severity=Severity.ERROR,
        message=f"{dist.name} {dist.version} is not paired with torch {torch.version}"
        + (
            f" (expected {dist.name} {expected})"
            if expected
            else f" (it pairs with torch {paired_with})"
        ),
        evidence={
            "torch": torch.version,
            "torch_version_file": str(torch.version_file),
            dist.name: dist.version,
            f"{dist.name}_dist_info": str(dist.path),
            f"expected_{dist.name}": str(expected) if expected else None,
            f"{dist.name}_pairs_with_torch": paired_with,
            "pairing_from": source,
        },
        fix=f"install the {dist.name} released with torch {torch.public}, from the same "
        f"index as torch (its {torch.tag} build)",
    )


def _companion_tag(ctx: Context, dist: Dist) -> tuple[str | None, str]:
    local = local_tag(dist.version)
    if local is not None:
        return local, f"{dist.path.name}"
    have = public_version(dist.version)
    release = ctx.kb.release_for_companion(dist.name, have) if have else None
    if release is not None and release.pypi_default:
        return release.pypi_default, f"PyPI default build of torch {release.version}"
    return None, ""


def _cuda(tag: str) -> CudaVersion | None:
    try:
        return CudaVersion.from_tag(tag)
    except VersionFormatError:
        return None


def _tag_severity(torch_tag: str, other: str) -> Severity | None:
    if torch_tag == other:
        return None
    mine, theirs = _cuda(torch_tag), _cuda(other)
    if mine is not None and theirs is not None and mine.major == theirs.major:
        return Severity.WARNING
    return Severity.ERROR


def _tags(ctx: Context, dist: Dist) -> Finding | None:
    torch = ctx.env.torch
    if torch is None:
        return None
    tag, tag_from = _companion_tag(ctx, dist)
    severity = _tag_severity(torch.tag, tag) if tag else None
    if severity is None or tag is None:
        return None
    evidence: dict[str, Any] = {
        "torch": torch.version,
        "torch_build": torch.tag,
        "torch_version_file": str(torch.version_file),
        dist.name: dist.version,
        f"{dist.name}_build": tag,
        f"{dist.name}_build_from": tag_from,
    }
    return Finding(
        code="trio-cu-tag-mismatch",
        severity=severity,
        message=f"{dist.name} {dist.version} is the {tag} build, torch {torch.version} the "
        f"{torch.tag} build",
        evidence=evidence,
        fix=f"reinstall {dist.name} from torch's index (the {torch.tag} build)",
    )


def check(ctx: Context) -> list[Finding]:
    if ctx.env.torch is None:
        return []
    findings: list[Finding] = []
    for name in COMPANIONS:
        dist = ctx.env.dist(name)
        if dist is None:
            continue
        findings.extend(f for f in (_pairing(ctx, dist), _tags(ctx, dist)) if f is not None)
    return findings
