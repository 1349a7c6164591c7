"""Files two distributions own, files that no longer match their RECORD, and CUDA
wheels torch never asked for.

The CUDA 12 and CUDA 13 wheels of cuDNN, NCCL, cuSPARSELt and NVSHMEM write the same
paths (``nvidia/cudnn/lib/libcudnn.so.9``), so installing one over the other replaces
the other's files while both stay "installed". Uninstalling the stray wheel deletes
those shared files, so the fix is ordered: uninstall the stray wheel, then
force-reinstall the right one. pip over conda is ``managers``' finding.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from gpuenv.doctor._catalog import wheel_cuda_major
from gpuenv.doctor._clashes import clashes, keep_and_stray
from gpuenv.doctor._context import Context
from gpuenv.doctor._fixes import clash_steps, entry_fix, numbered, pip_command
from gpuenv.doctor._libversion import fits
from gpuenv.doctor._records import Claim, Owner, on_disk
from gpuenv.doctor.environment import Dist
from gpuenv.doctor.model import Finding, Severity

_MAX_LISTED = 20
_MAX_DECIDED = 50  # files per clash whose on-disk owner is worked out


def _on_disk(ctx: Context, paths: list[str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for path in paths[:_MAX_DECIDED]:
        claim = on_disk(path, ctx.records.claims(path))
        counts[claim.owner.label if claim else "neither (changed or missing)"] += 1
    return dict(counts)


def _clash(ctx: Context, a: Owner, b: Owner, paths: list[str]) -> Finding:
    keep, stray, why = keep_and_stray(ctx, a, b)
    disk = _on_disk(ctx, paths)
    shown = ", ".join(f"{n} file(s) from {who}" for who, n in disk.items())
    return Finding(
        code="file-ownership-clash",
        severity=Severity.ERROR,
        message=f"{a.label} and {b.label} both own {len(paths)} file(s) with different "
        f"contents, e.g. {paths[0]}; on disk: {shown}",
        evidence={
            "owners": [a.to_json(), b.to_json()],
            "files": sorted(paths)[:_MAX_LISTED],
            "count": len(paths),
            "on_disk": disk,
            "keep": keep.label,
            "remove": stray.label,
            "keep_because": why,
        },
        fix=numbered(clash_steps(ctx, keep, stray, len(paths))),
    )


def _changed(ctx: Context, skip: set[str]) -> list[Finding]:
    """Files of the GPU stack's wheels that are missing or of another size than their
    RECORD says (not counting shared files, reported as clashes)."""
    findings = []
    for owner, paths in ctx.records.files_of.items():
        bad: list[dict[str, Any]] = []
        for path in paths:
            if path in skip or path in ctx.records.others:
                continue
            size = Claim(owner, *ctx.records.row(owner, path)).size
            if size is None:
                continue
            try:
                actual: int | None = os.stat(path).st_size  # noqa: PTH116
            except (OSError, ValueError):
                actual = None
            if actual != size:
                bad.append({"path": path, "record_size": size, "size": actual})
        if bad:
            findings.append(_changed_finding(ctx, owner, bad))
    return findings


def _changed_finding(ctx: Context, owner: Owner, bad: list[dict[str, Any]]) -> Finding:
    gone = sum(1 for b in bad if b["size"] is None)
    pin = f"{owner.name}=={owner.version}"
    return Finding(
        code="record-mismatch",
        severity=Severity.ERROR,
        message=f"{len(bad)} file(s) of {owner.label} no longer match its RECORD "
        f"({gone} missing, {len(bad) - gone} changed), e.g. {bad[0]['path']}",
        evidence={
            "owner": owner.to_json(),
            "files": bad[:_MAX_LISTED],
            "count": len(bad),
            "missing": gone,
        },
        fix=f"1. '{pip_command(ctx, owner, 'install', '--force-reinstall', '--no-deps', pin)}'"
        " (rewrites every file of the wheel).",
    )


def _stray_dists(ctx: Context, named: set[str]) -> list[Dist]:
    """nvidia-*-cuNN wheels on sys.path (the winner of each name) of another CUDA major
    than torch's that torch does not require."""
    torch = ctx.env.torch
    major = torch.cuda.major if torch is not None and torch.cuda is not None else None
    strays = []
    for dist in ctx.env.path_dists:
        wheel_major = wheel_cuda_major(dist.name)
        if not dist.name.startswith("nvidia-") or wheel_major is None or dist.name in named:
            continue
        if ctx.env.dist(dist.name) is not dist:
            continue  # a shadowed copy: python-path-shadowing's business
        if dist.name in ctx.torch_requires or wheel_major == major:
            continue
        strays.append(dist)
    return strays


def _own(ctx: Context, dist: Dist) -> bool:
    entry = ctx.env.entry(dist.site_packages)
    return entry is None or entry.own


def _stray_fix(ctx: Context, strays: list[Dist]) -> str:
    steps = []
    own = [d for d in strays if _own(ctx, d)]
    if own:
        owner = Owner("pip", own[0].name, own[0].version, own[0].path, dist=own[0])
        steps.append(f"1. '{pip_command(ctx, owner, 'uninstall', *(d.name for d in own))}'.")
    for dist in strays:
        entry = ctx.env.entry(dist.site_packages)
        if entry is not None and not entry.own:
            steps.append(entry_fix(ctx, entry, [dist.name]))
    return " ".join(dict.fromkeys(steps))


def _strays(ctx: Context, named: set[str]) -> Finding | None:
    torch = ctx.env.torch
    if torch is None:
        return None
    strays = _stray_dists(ctx, named)
    if not strays:
        return None
    major = torch.cuda.major if torch.cuda is not None else None
    what = f"a CUDA {major} build" if major is not None else "a CPU build"
    names = [d.name for d in strays]
    index = ctx.libraries
    preloaded = sorted(
        {
            str(load.copy.path)
            for load in [*index.loads.values(), *index.doubles]
            if load.by == "torch's preload" and _pip_name(load.copy.owner) in names
        }
    )
    return Finding(
        code="stray-cuda-wheel",
        severity=Severity.WARNING if major is not None else Severity.INFO,
        message=f"{', '.join(f'{d.name} {d.version} ({d.site_packages})' for d in strays)}: "
        f"CUDA wheels torch {torch.version} ({what}) does not use"
        + ("; torch's preload can still load them first" if major is not None else ""),
        evidence={
            "distributions": [
                {"name": d.name, "version": d.version, "dist_info": str(d.path)} for d in strays
            ],
            "torch": torch.version,
            "torch_requires": sorted(n for n in ctx.torch_requires if n.startswith("nvidia-")),
            "loaded_by_torch_preload": preloaded,
        },
        fix=_stray_fix(ctx, strays),
    )


def _pip_name(owner: str | None) -> str | None:
    """``"pip nvidia-cudnn-cu12 9.1.0.70"`` -> ``"nvidia-cudnn-cu12"``."""
    parts = (owner or "").split()
    return parts[1] if len(parts) >= 2 and parts[0] == "pip" else None


def _named_by_libraries(ctx: Context) -> set[str]:
    """Wheels whose wrong library torch loads: the library finding names them, with
    its fix, more precisely than a stray-wheel note would."""
    names = set()
    index = ctx.libraries
    for name, load in index.loads.items():
        pip = _pip_name(load.copy.owner)
        if name in index.needed and pip and fits(ctx, load.copy) is False:
            names.add(pip)
    return names


def check(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    shared: set[str] = set()
    named = _named_by_libraries(ctx)
    for (a, b), paths in sorted(clashes(ctx).items(), key=lambda item: item[1][0]):
        findings.append(_clash(ctx, a, b, paths))
        shared.update(paths)
        named.update((a.name, b.name))
    findings += _changed(ctx, shared)
    stray = _strays(ctx, named)
    return [*findings, *([stray] if stray else [])]
