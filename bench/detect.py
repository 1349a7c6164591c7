"""`gpuenv detect` wall time, and the in-process fingerprint (issue 3 budgets:
detect < 0.2 s with no GPU and with the stand-in NVML; fingerprint < 5 ms).

Usage: .venv/bin/python bench/detect.py [--runs N]
Builds the stand-in libnvidia-ml.so.1 (needs gcc) into a temporary folder. Prints
medians, and the ratio to a bare interpreter start measured in the same run.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _timing import REPO, interpreter, median_ms, report, wall

sys.path.insert(0, str(REPO))
from tests.nvml import standin  # (the repo root must be on the path first)

DETECT_BUDGET_MS = 200.0
FINGERPRINT_BUDGET_MS = 5.0
PROC_FIXTURE = REPO / "tests" / "fixtures" / "hardware" / "proc-h100x2"


def in_process(call: Callable[[], object], runs: int) -> list[float]:
    call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def fingerprint_import(python: str, runs: int) -> list[float]:
    """Seconds to import gpuenv.hardware.fingerprint in a fresh interpreter."""
    code = (
        "import time; t = time.perf_counter(); import gpuenv.hardware.fingerprint;"
        "print(time.perf_counter() - t)"
    )
    out = [subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)]
    out += [
        subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
        for _ in range(runs)
    ]
    return [float(o.stdout) for o in out[1:]]


def detect_runs(python: str, runs: int, lib_dir: Path, empty: Path) -> dict[str, list[float]]:
    one = standin.FakeNvml(gpus=(standin.h100(),)).spec()
    eight = standin.FakeNvml(gpus=tuple(standin.h100(i) for i in range(8))).spec()
    cases = {
        "gpuenv detect (no GPU)": ({"LD_LIBRARY_PATH": str(empty)}, []),
        "gpuenv detect --json (no GPU)": ({"LD_LIBRARY_PATH": str(empty)}, ["--json"]),
        "gpuenv detect (stand-in, 1 H100)": (
            {"LD_LIBRARY_PATH": str(lib_dir), standin.SPEC_VAR: one},
            [],
        ),
        "gpuenv detect --json (stand-in, 8 H100)": (
            {"LD_LIBRARY_PATH": str(lib_dir), standin.SPEC_VAR: eight},
            ["--json"],
        ),
    }
    return {
        name: wall([python, "-m", "gpuenv", "detect", *args], runs=runs, env=env)
        for name, (env, args) in cases.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    runs = max(args.runs, 7)
    python = interpreter()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        lib_dir = standin.build(Path(tmp) / "lib")
        empty = Path(tmp) / "empty"
        empty.mkdir()
        bare = wall([python, "-c", "pass"], runs=runs)
        report("python -c pass", bare)
        for name, times in detect_runs(python, runs, lib_dir, empty).items():
            report(name, times, baseline=bare)
            ok &= median_ms(times) < DETECT_BUDGET_MS

    fingerprint = importlib.import_module("gpuenv.hardware.fingerprint")
    proc = in_process(
        lambda: fingerprint.fingerprint(proc_root=str(PROC_FIXTURE), nvml_fallback=False),
        runs * 20,
    )
    here = in_process(lambda: fingerprint.fingerprint(nvml_fallback=False), runs * 20)
    imported = fingerprint_import(python, runs)
    report("fingerprint() on a /proc tree, 2 GPUs", proc)
    report("fingerprint() on this machine's /proc", here)
    report("import gpuenv.hardware.fingerprint", imported)
    ok &= median_ms(proc) < FINGERPRINT_BUDGET_MS
    print(
        f"budgets: detect < {DETECT_BUDGET_MS:.0f} ms, fingerprint < {FINGERPRINT_BUDGET_MS:.0f} ms"
        f" (median {statistics.median(proc) * 1e6:.0f} us): {'within' if ok else 'OVER'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
