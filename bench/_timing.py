"""Timing helpers shared by the benchmarks: medians of repeated wall-clock runs."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def interpreter() -> str:
    """A real interpreter (never a pyenv shim, which adds ~80 ms per start)."""
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def wall(
    argv: Sequence[str], *, runs: int, env: dict[str, str] | None = None, cwd: Path | None = None
) -> list[float]:
    """Wall-clock seconds of ``runs`` runs of ``argv`` (one warm-up run first)."""
    full_env = {**os.environ, **(env or {})}
    subprocess.run(argv, env=full_env, cwd=cwd, capture_output=True, check=False)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=full_env, cwd=cwd, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return times


def median_ms(times: Sequence[float]) -> float:
    return statistics.median(times) * 1000


def report(name: str, times: Sequence[float], *, baseline: Sequence[float] | None = None) -> None:
    fastest = min(times) * 1000
    line = f"{name:<44} median {median_ms(times):8.1f} ms  (min {fastest:.1f}, n={len(times)})"
    if baseline:
        line += f"  ratio {statistics.median(times) / statistics.median(baseline):.2f}x"
    print(line)
