"""Timing helpers shared by the benchmarks: medians of repeated wall-clock runs."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
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


def compiled() -> None:
    """Byte-compile gpuenv's sources first: where PYTHONDONTWRITEBYTECODE is set (as on
    the shared build machines), every run of a checkout would otherwise compile the
    modules changed since the last compile and measure that, not gpuenv."""
    import compileall

    compileall.compile_dir(str(REPO / "src"), quiet=1)


def alternate(
    commands: Mapping[str, Sequence[str]],
    *,
    runs: int,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    before: Mapping[str, Callable[[], None]] | None = None,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Wall-clock seconds of each command, run in turn (A B, B A, A B, ...) so that
    the machine's load falls on all of them alike; ``before[name]`` runs untimed
    before each of that command's runs (a cache emptied, a lock removed). One untimed
    round first. A command that fails stops the benchmark, with its output. ``cpu``,
    when given, receives each run's CPU seconds (user and system, the command and its
    children: uv's included), which a loaded machine moves far less than the wall
    clock: the two side by side tell a slower program from a busier machine."""
    full_env = {**os.environ, **(env or {})}
    names = list(commands)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(runs + 1):
        for name in names if round_ % 2 == 0 else reversed(names):
            if before and name in before:
                before[name]()
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(
                list(commands[name]), env=full_env, cwd=cwd, capture_output=True, check=False
            )
            took = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode != 0:
                raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]!r}")
            if round_:
                times[name].append(took)
                spent = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
                if cpu is not None:
                    cpu.setdefault(name, []).append(spent)
    return times


def load() -> str:
    """The machine's load while it was measured (other work on a shared machine)."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} CPUs"


def ratio(times: Sequence[float], baseline: Sequence[float]) -> float:
    return statistics.median(times) / statistics.median(baseline)


def median_ms(times: Sequence[float]) -> float:
    return statistics.median(times) * 1000


def report(
    name: str,
    times: Sequence[float],
    *,
    baseline: Sequence[float] | None = None,
    cpu: Sequence[float] | None = None,
    cpu_baseline: Sequence[float] | None = None,
) -> None:
    """One line: the median (and fastest) wall time, its ratio to ``baseline``'s; with
    ``cpu``, the median CPU time too (and its ratio to ``cpu_baseline``'s)."""
    fastest = min(times) * 1000
    line = f"{name:<44} median {median_ms(times):8.1f} ms  (min {fastest:.1f}, n={len(times)})"
    if baseline:
        line += f"  ratio {statistics.median(times) / statistics.median(baseline):.2f}x"
    if cpu:
        line += f"  cpu {median_ms(cpu):.1f} ms"
        if cpu_baseline:
            line += f" ({statistics.median(cpu) / statistics.median(cpu_baseline):.2f}x)"
    print(line)
