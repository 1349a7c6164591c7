"""``MAX_JOBS`` for a build: one compile job per core, unless free memory says fewer.

A compile job of a CUDA extension can take several gigabytes (flash-attn's nvcc jobs run
four threads each); with ``MAX_JOBS`` = all cores a build on a many-core machine is
killed by the out-of-memory killer. The memory one job needs is the package's
``job_memory_gb`` (``knowledge/data/packages.toml``); free memory is the smaller of the kernel's
``MemAvailable`` and what the process's cgroup still allows.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

GIB = 1 << 30


@dataclass(frozen=True)
class Jobs:
    """How many compile jobs a build runs at once, and what decided it (cores, free memory
    or the spec's ``max-jobs``)."""

    count: int
    reason: str


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_headroom(cgroup: Path) -> int | None:
    """cgroup v2: memory.max minus memory.current, when a limit is set."""
    try:
        limit = (cgroup / "memory.max").read_text(encoding="ascii").strip()
        if limit == "max":
            return None
        used = int((cgroup / "memory.current").read_text(encoding="ascii").strip())
        return max(0, int(limit) - used)
    except (OSError, ValueError):
        return None


def available_memory(root: Path = Path("/")) -> int | None:
    """Bytes a build can still use, or None when it cannot be read."""
    found = [
        value
        for value in (
            _meminfo_available(root / "proc" / "meminfo"),
            _cgroup_headroom(root / "sys" / "fs" / "cgroup"),
        )
        if value is not None
    ]
    return min(found) if found else None


def max_jobs(
    job_memory_gb: float,
    *,
    limit: int | None = None,
    ncores: int | None = None,
    memory: int | None = None,
) -> Jobs:
    """How many compile jobs to run at once, and why. ``limit`` is the spec's
    ``max-jobs``: it caps the answer, it never raises it above what memory allows."""
    n = ncores if ncores is not None else cores()
    free = memory if memory is not None else available_memory()
    reason = f"{n} core(s)"
    count = n
    if free is not None and job_memory_gb > 0:
        fits = max(1, math.floor(free / (job_memory_gb * GIB)))
        if fits < count:
            count = fits
            reason = f"{free / GIB:.1f} GiB free / {job_memory_gb:g} GiB per job"
    if limit is not None and limit < count:
        count, reason = limit, f"max-jobs = {limit} in gpuenv.toml"
    return Jobs(max(1, count), reason)
