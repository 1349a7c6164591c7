"""WSL: recognise it, and find a Linux driver or libcuda that shadows the host's.

Under WSL2 the GPU belongs to the Windows host. Its driver reaches the distribution as
the libraries in ``/usr/lib/wsl/lib`` (``libcuda.so.1``, ``libnvidia-ml.so.1``,
``nvidia-smi``); NVIDIA's WSL guide warns against installing a Linux display driver
inside WSL, because its copies of those libraries are found first and fail.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuenv.hardware._fallback import list_dir, read_text
from gpuenv.hardware.model import HostPaths, WslFacts
from gpuenv.hardware.parse import parse_wsl_kernel_release
from gpuenv.versions import DriverVersion

# Folders the dynamic loader searches by default (Debian/Ubuntu multiarch, Fedora/RHEL,
# and /usr/local/lib), relative to the root.
LIBRARY_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "usr/lib64",
    "lib64",
    "usr/lib",
    "usr/local/lib",
)
# A Linux driver's nvidia-smi (the host's lives in /usr/lib/wsl/lib).
_LINUX_SMI = ("usr/bin/nvidia-smi",)


def _is_wsl_copy(path: Path, wsl_lib: Path) -> bool:
    """True when ``path`` is (a link to) a file in ``/usr/lib/wsl``: not a shadow."""
    try:
        real = Path(os.path.realpath(path))
    except OSError:
        return False
    return real.is_relative_to(Path(os.path.realpath(wsl_lib)).parent)


def _foreign(host: HostPaths, prefixes: tuple[str, ...]) -> list[str]:
    """Files named ``<prefix>*`` in the library folders that are not the host's copies,
    once each (``/lib`` is often a link to ``/usr/lib``)."""
    found: dict[str, str] = {}
    for folder in LIBRARY_DIRS:
        for entry in list_dir(host.root / folder) or []:
            if not entry.name.startswith(prefixes) or _is_wsl_copy(entry, host.wsl_lib):
                continue
            found.setdefault(os.path.realpath(entry), "/" + str(entry.relative_to(host.root)))
    return sorted(set(found.values()))


def _linux_driver_files(host: HostPaths) -> list[str]:
    files = _foreign(host, ("libnvidia-ml.so",))
    for rel in _LINUX_SMI:
        candidate = host.root / rel
        if candidate.is_file() and not _is_wsl_copy(candidate, host.wsl_lib):
            files.append("/" + rel)
    if (host.proc / "driver" / "nvidia" / "version").is_file():
        files.append("/proc/driver/nvidia")
    return files


def read_wsl(
    host: HostPaths,
    *,
    driver_version: DriverVersion | None,
    driver_source: str | None,
    nvml_library: str | None,
) -> WslFacts | None:
    """WSL facts, or None when this is not WSL. The host driver is the driver version
    NVML or nvidia-smi reported (inside WSL they report the Windows driver)."""
    release_text = read_text(host.proc / "sys" / "kernel" / "osrelease")
    release = release_text.strip() if release_text else None
    version = parse_wsl_kernel_release(release) if release else None
    wsl_lib = host.wsl_lib if host.wsl_lib.is_dir() else None
    if version is None and wsl_lib is None:
        return None
    host_driver = driver_version if driver_source in ("nvml", "nvidia-smi") else None
    return WslFacts(
        version=version or 2,
        kernel_release=release,
        wsl_lib_dir=str(host.wsl_lib) if wsl_lib else None,
        host_driver_version=host_driver,
        nvml_library=nvml_library,
        shadowing_libcuda=tuple(_foreign(host, ("libcuda.so",))),
        linux_driver_files=tuple(_linux_driver_files(host)),
    )
