"""Files two pip distributions own with different contents, and which of the two to
keep: what the ``ownership`` and ``libraries`` checks both judge."""

from __future__ import annotations

from collections import defaultdict

from gpuenv.doctor._catalog import wheel_cuda_major
from gpuenv.doctor._context import Context
from gpuenv.doctor._records import Claim, Owner, differs


def _pip_owners(claims: list[Claim]) -> list[Owner]:
    owners: list[Owner] = []
    for claim in claims:
        owner = claim.owner
        if owner.kind != "pip" or owner in owners:
            continue
        if owner.dist is not None and owner.dist.installer() == "conda":
            continue
        owners.append(owner)
    return owners


def clashes(ctx: Context) -> dict[tuple[Owner, Owner], list[str]]:
    """(first, second) pip owners -> the paths both claim with different contents."""
    return ctx.memo("clashes", lambda: _clashes(ctx))


def _clashes(ctx: Context) -> dict[tuple[Owner, Owner], list[str]]:
    found: dict[tuple[Owner, Owner], list[str]] = defaultdict(list)
    for path, rows in ctx.records.multi.items():
        claims = [Claim(*row) for row in rows]
        owners = _pip_owners(claims)
        if len(owners) < 2:
            continue
        mine = [c for c in claims if c.owner in owners]
        if not differs(mine):
            continue
        found[(owners[0], owners[1])].append(path)
    return found


def keep_and_stray(ctx: Context, a: Owner, b: Owner) -> tuple[Owner, Owner, str]:
    """(keep, stray, why): the one torch requires, else the one of torch's CUDA major."""
    required = ctx.torch_requires
    if (a.name in required) != (b.name in required):
        keep = a if a.name in required else b
        return keep, b if keep is a else a, f"torch requires {keep.name}"
    torch = ctx.env.torch
    major = torch.cuda.major if torch is not None and torch.cuda is not None else None
    if major is not None and (wheel_cuda_major(a.name) == major) != (
        wheel_cuda_major(b.name) == major
    ):
        keep = a if wheel_cuda_major(a.name) == major else b
        return keep, b if keep is a else a, f"torch is a CUDA {major} build"
    return b, a, f"{b.name} was installed last"
