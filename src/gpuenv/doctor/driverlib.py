"""The ``libcuda.so.1`` the CUDA runtime would open, when it is not the driver's: a
toolkit's stub, a WSL shadow, a copy of another driver left in a container image or an
environment.

libcudart dlopens ``libcuda.so.1``; the loader searches ``LD_LIBRARY_PATH`` (relative
and empty entries from the current directory), libcudart's own RUNPATH, ``ld.so.cache``
(or the ``ld.so.conf`` directories) and the system directories. The driver's copy is
``libcuda.so.<driver version>`` (what the ``libcuda.so.1`` link of a driver install
points at), or, under WSL, the one in ``/usr/lib/wsl/lib``.
"""

from __future__ import annotations

from gpuenv.doctor._context import Context
from gpuenv.doctor._cudalibs import SearchDir
from gpuenv.doctor._libcuda import NAME, reachable, winner_not_driver
from gpuenv.doctor.model import Finding, Severity


def _entry_words(where: SearchDir) -> str:
    if where.via == "LD_LIBRARY_PATH":
        return f"LD_LIBRARY_PATH entry {where.entry!r} (resolves to {where.path})"
    return where.via


def check(ctx: Context) -> list[Finding]:
    found = winner_not_driver(ctx)
    if found is None:
        return []
    facts = ctx.request.hardware
    driver = facts.driver_version
    others = [f for f in reachable(ctx) if f.real != found.real]
    real_one = next((f for f in others if f.kind == "driver"), None)
    tail = (
        f"the driver's {real_one.path} comes later and is never used"
        if real_one
        else f"the driver is {driver}"
        if driver
        else "no NVIDIA driver was detected on this machine"
    )
    if found.where.via == "LD_LIBRARY_PATH":
        fix = f"1. remove {found.where.entry!r} from LD_LIBRARY_PATH."
    elif found.where.via.startswith("RUNPATH"):
        fix = f"1. delete {found.path} (it sits beside the environment's libcudart)."
    else:
        fix = f"1. delete or move {found.path} out of the loader's path, then run 'sudo ldconfig'."
    return [
        Finding(
            code="libcuda-not-the-driver",
            severity=Severity.ERROR if driver is not None else Severity.WARNING,
            message=f"CUDA would open {found.path} as {NAME} ({found.detail}), reached through "
            f"{_entry_words(found.where)}; {tail}",
            evidence={
                "file": str(found.path),
                "real_file": str(found.real),
                "kind": found.kind,
                "via": found.where.via,
                "entry": found.where.entry,
                "driver_version": str(driver) if driver else None,
                "other_copies": [{"file": str(f.path), "kind": f.kind} for f in others],
            },
            fix=fix + " 2. check with 'gpuenv doctor' that libcuda.so.1 is the driver's.",
        )
    ]
