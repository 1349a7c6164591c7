"""Which ``libcuda.so.1`` the CUDA runtime would open, and what each copy is: the
search the ``driverlib`` and ``wsl`` checks share (so neither imports the other).

libcudart dlopens ``libcuda.so.1``; the loader searches ``LD_LIBRARY_PATH`` (relative
and empty entries from the current directory), libcudart's own RUNPATH, ``ld.so.cache``
(or the ``ld.so.conf`` directories) and the system directories. The driver's copy is
``libcuda.so.<driver version>`` (what the ``libcuda.so.1`` link of a driver install
points at), or, under WSL, the one in ``/usr/lib/wsl/lib``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpuenv.doctor._context import Context
from gpuenv.doctor._cudalibs import SearchDir, ld_so_conf_dirs
from gpuenv.doctor._elf import read_dynamic
from gpuenv.doctor._fsafe import exists, read_text, resolved
from gpuenv.doctor._ldcache import read as read_cache

WSL_LIB = "/usr/lib/wsl/lib"


def wsl_release(ctx: Context) -> str | None:
    """The kernel release when it is a WSL kernel."""
    host = ctx.request.host
    for name in ("/proc/sys/kernel/osrelease", "/proc/version"):
        raw = read_text(host.path(name), 1 << 16)
        if raw is None:
            continue
        text = raw.strip()
        return text if "microsoft" in text.lower() else None
    return None


NAME = "libcuda.so.1"


_VERSIONED = re.compile(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class Found:
    """One ``libcuda.so.1`` on the runtime's search: the directory that reached it, the real
    file, and what it is (the driver's own copy, a stub, another driver's, or unknown)."""

    path: Path  # as found (the name the loader opens)
    real: Path
    where: SearchDir
    kind: str  # "driver", "stub", "other-driver", "unknown"
    detail: str


def _steps(ctx: Context) -> list[SearchDir]:
    steps = [SearchDir(ctx.resolve_entry(e), "LD_LIBRARY_PATH", e) for e in ctx.ld_library_path]
    cudart = next(
        (load for load in ctx.libraries.loads.values() if load.copy.library.name == "cudart"),
        None,
    )
    if cudart is not None:
        dynamic = read_dynamic(cudart.copy.path)
        origin = str(cudart.copy.path.parent)
        for entry in dynamic.runpath if dynamic else ():
            text = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
            steps.append(SearchDir(ctx.resolve_entry(text), f"RUNPATH of {cudart.copy.path.name}"))
    host = ctx.request.host
    cache = read_cache(host.path("/etc/ld.so.cache"))
    if cache is None:
        steps += ld_so_conf_dirs(ctx)
    elif NAME in cache:
        steps.append(SearchDir(host.path(str(Path(cache[NAME]).parent)), "ld.so.cache"))
    steps += [SearchDir(host.path(d), "system library directory") for d in host.system_lib_dirs]
    return steps


def _classify(ctx: Context, path: Path, real: Path) -> tuple[str, str]:
    host = ctx.request.host
    driver = ctx.request.hardware.driver_version
    wsl = wsl_release(ctx) is not None
    if wsl and real.is_relative_to(resolved(host.path(WSL_LIB))):
        return "driver", f"the Windows host's driver ({WSL_LIB})"
    version = _VERSIONED.match(real.name)
    if version and wsl:  # under WSL only the host's driver counts
        return "other-driver", f"a Linux driver's library ({version[1]}) inside WSL"
    if version and driver is not None and version[1] == str(driver):
        return "driver", f"driver {driver}"
    if "stubs" in path.parts or "stubs" in real.parts or real.name == "libcuda.so":
        return "stub", "a stub (for linking only; it answers CUDA_ERROR_STUB_LIBRARY)"
    if version:
        return "other-driver", f"the user-space library of driver {version[1]}"
    return "unknown", "a copy of unknown origin"


def reachable(ctx: Context) -> list[Found]:
    """Every ``libcuda.so.1`` on the search, the one the loader opens first."""
    found = []
    seen: set[Path] = set()
    for step in _steps(ctx):
        candidate = step.path / NAME
        if not exists(candidate):
            continue
        real = resolved(candidate)
        if real in seen:
            continue
        seen.add(real)
        kind, detail = _classify(ctx, candidate, real)
        found.append(Found(candidate, real, step, kind, detail))
    return found


def winner_not_driver(ctx: Context) -> Found | None:
    return ctx.memo("libcuda", lambda: _winner(ctx))


def _winner(ctx: Context) -> Found | None:
    copies = reachable(ctx)
    if not copies or copies[0].kind == "driver":
        return None
    return copies[0]
