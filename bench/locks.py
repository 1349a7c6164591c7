"""Many `gpuenv lock` runs in a row, counting exit codes: an intermittent crash (exit
70, as the uv look-up race of issue 28 gave in 6 of 38 locks) shows as a count.

Each run starts a fresh process (the race was in `sysconfig`'s first use, once per
process); runs alternate between a fresh lock (no lock file) and a relock. On the
tests' local index by default; with --pypi the spec names no index at all, as the
crashing locks did, so the newest-torch look-up needs uv's own default index (needs
network).

Usage: .venv/bin/python bench/locks.py [--count 200] [--pypi]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _project import bench_index
from _timing import REPO, compiled, interpreter, load


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--pypi", action="store_true", help="no index in the spec (network)")
    args = parser.parse_args()
    compiled()
    codes: collections.Counter[int] = collections.Counter()
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, bench_index(Path(tmp)) as bench:
        project = Path(tmp) / "project"
        project.mkdir()
        spec = bench.spec("h100")
        if args.pypi:
            spec = "\n".join(
                line
                for line in spec.replace("550.54.15", "535.104.05").splitlines()
                if not line.startswith(("index-url", "torch-index"))
            )
        (project / "gpuenv.toml").write_text(spec + "\n")
        env = {**bench.env, "PYTHONPATH": str(REPO / "src")}
        print(load())
        started = time.perf_counter()
        for run in range(args.count):
            if run % 2 == 0:
                (project / "gpuenv.lock").unlink(missing_ok=True)
            done = subprocess.run(
                [interpreter(), "-m", "gpuenv", "lock"],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            codes[done.returncode] += 1
            if done.returncode != 0 and len(failures) < 5:
                failures.append(f"run {run}: exit {done.returncode}\n{done.stderr[-1500:]}")
        took = time.perf_counter() - started
    print(f"{args.count} locks in {took:.0f} s: exit codes {dict(sorted(codes.items()))}")
    for failure in failures:
        print(failure)
    print(load())
    return 0 if set(codes) == {0} else 1


if __name__ == "__main__":
    sys.exit(main())
