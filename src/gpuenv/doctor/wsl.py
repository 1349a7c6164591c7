"""Inside WSL2 the driver lives on the Windows host and reaches Linux through
``/usr/lib/wsl/lib``. A Linux NVIDIA driver (its kernel module, or a ``libcuda``/
``libnvidia-ml`` outside that directory, in the system or the environment) shadows the
host's and breaks CUDA."""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpuenv.doctor._context import Context
from gpuenv.doctor._cudalibs import ld_so_conf_dirs
from gpuenv.doctor._fsafe import resolved
from gpuenv.doctor._libcuda import WSL_LIB, winner_not_driver, wsl_release
from gpuenv.doctor.model import Finding, Severity

_DRIVER_LIB = re.compile(r"^lib(cuda|nvidia-ml)\.so(\.\d+)*$")


def _driver_files(directory: Path, wsl_lib: Path) -> list[str]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if _DRIVER_LIB.match(entry.name):
            real = resolved(Path(entry.path))
            if not real.is_relative_to(wsl_lib):
                found.append(entry.path)
    return found


def _candidate_dirs(ctx: Context) -> list[Path]:
    host = ctx.request.host
    dirs = [host.path(d) for d in host.system_lib_dirs]
    dirs += [d.path for d in ld_so_conf_dirs(ctx)]
    dirs.append(ctx.env.prefix / "lib")
    dirs += [ctx.resolve_entry(e) for e in ctx.ld_library_path]
    unique: dict[Path, Path] = {}
    for directory in dirs:
        key = resolved(directory)
        if key != resolved(ctx.request.host.path(WSL_LIB)):
            unique.setdefault(key, directory)
    return list(unique.values())


def check(ctx: Context) -> list[Finding]:
    release = wsl_release(ctx)
    if release is None:
        return []
    host = ctx.request.host
    wsl_lib = resolved(host.path(WSL_LIB))
    files = [f for d in _candidate_dirs(ctx) for f in _driver_files(d, wsl_lib)]
    shadow = winner_not_driver(ctx)  # named, with how it is reached, by its own finding
    if shadow is not None:
        files = [f for f in files if resolved(Path(f)) != shadow.real]
    proc_driver = host.path("/proc/driver/nvidia/version")
    if proc_driver.is_file():
        files.insert(0, str(proc_driver))
    if not files:
        return []
    return [
        Finding(
            code="wsl-linux-driver",
            severity=Severity.ERROR,
            message=f"WSL ({release}) has a Linux NVIDIA driver or libcuda outside "
            f"{WSL_LIB}: {', '.join(files)}; it shadows the Windows host's driver",
            evidence={
                "kernel_release": release,
                "wsl_lib_dir": str(wsl_lib),
                "wsl_lib_dir_exists": wsl_lib.is_dir(),
                "files": files,
            },
            fix="remove the Linux driver inside WSL (sudo apt remove --purge 'nvidia-*' "
            "'libnvidia-*'; install only a CUDA toolkit package without the driver) and "
            "delete stray libcuda copies; the Windows driver provides libcuda",
        )
    ]
