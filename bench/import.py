"""`gpuenv import` over every repository of the import tests (tests/fixtures/importers:
conda files, requirements, freeze, Dockerfiles, NGC, pyproject/Poetry, cog-shaped,
conda-lock, pixi, uv, Pipfile, TensorFlow/JAX), each for an H100 on driver 550, an RTX 4090
on driver 535 and a CPU:

- import wall time per repository (median of --runs; issue budget: < 1 s typical,
  < 5 s for a large one such as the conda-lock file, whose reader imports conda-lock);
- the share of imports whose written spec `gpuenv plan` accepts unchanged;
- the share of the lockable repositories (tests/fixtures/importers/lockable: the pins
  the fixture index serves) whose written spec `gpuenv lock` locks unchanged, against
  the fixture indexes served on loopback (--check-resolves asks them too).

Usage: .venv/bin/python bench/import.py [--runs N] [--no-lock]
The machine may be shared: the load average is printed with the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import REPO, interpreter, load

FIXTURES = REPO / "tests" / "fixtures" / "importers"
TARGETS = {
    "h100": ("--gpu", "H100", "--driver", "550.54.15"),
    "rtx4090": ("--gpu", "RTX 4090", "--driver", "535.104.05"),
    "cpu": ("--gpu", "none"),
}
NOT_REPOSITORIES = {"bad", "__pycache__", "lockable"}


def repositories() -> list[Path]:
    found = [p for p in sorted(FIXTURES.iterdir()) if p.is_dir() and p.name not in NOT_REPOSITORIES]
    found += sorted(p for p in (FIXTURES / "lockable").iterdir() if p.is_dir())
    return found


CPU: dict[str, list[float]] = {}


# --check-resolves' uv resolution, from each import's --json: its seconds, its answers.
CHECK: list[float] = []
ANSWERS: dict[str, int] = {}


def _run(argv: list[str], env: dict[str, str], key: str | None = None) -> tuple[int, float]:
    """Exit code and wall seconds; with ``key``, the CPU seconds (user + system) the
    command used are kept under it: on a loaded machine they say more than wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if key is not None:
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        CPU.setdefault(key, []).append(used)
        _note_check(done.stdout)
    return done.returncode, took


def _note_check(stdout: bytes) -> None:
    try:
        resolution = json.loads(stdout).get("resolution")
    except ValueError:
        return
    if isinstance(resolution, dict):
        CHECK.append(float(resolution["seconds"]))
        answer = {True: "resolves", False: "does not", None: "not checked"}[resolution["resolves"]]
        ANSWERS[answer] = ANSWERS.get(answer, 0) + 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-lock", action="store_true")
    args = parser.parse_args()
    python = interpreter()
    sys.path.insert(0, str(REPO))
    from tests.fixtures.pkgindex.index import serve
    from tests.fixtures.pkgindex.plugin import build_tree

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_tree(root / "index")
        with serve(root / "index") as url:
            env = {
                **os.environ,
                "XDG_CACHE_HOME": str(root / "cache"),
                "GPUENV_IMPORT_INDEX": f"{url}/simple",
                "GPUENV_INDEX_URL": f"{url}/simple",
                "GPUENV_TORCH_INDEX": f"{url}/whl",
            }
            times: dict[str, list[float]] = {}
            outcomes = {"written": 0, "refused": 0, "planned": 0, "locked": 0, "lockable": 0}
            for repo in repositories():
                name = repo.relative_to(FIXTURES).as_posix()
                for target, flags in TARGETS.items():
                    out = root / "out" / name / target / "gpuenv.toml"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    argv = [python, "-m", "gpuenv", "import", str(repo), *flags, "-o", str(out)]
                    argv += ["--force", "--json"]
                    codes = []
                    for _ in range(args.runs):
                        code, took = _run(argv, env, name)
                        codes.append(code)
                        times.setdefault(name, []).append(took)
                    if codes[-1] not in (0, 1):  # 1: written, but does not resolve
                        outcomes["refused"] += 1  # exit 3: a TensorFlow/JAX project, say
                        continue
                    outcomes["written"] += 1
                    before = out.read_text()
                    spec = ["-f", str(out)]
                    if _run([python, "-m", "gpuenv", *spec, "plan"], env)[0] == 0:
                        outcomes["planned"] += 1
                    if name.startswith("lockable/") and not args.no_lock:
                        outcomes["lockable"] += 1
                        code, _ = _run([python, "-m", "gpuenv", *spec, "lock"], env)
                        if code == 0 and out.read_text() == before:
                            outcomes["locked"] += 1
    print(f"{load()}; medians of {args.runs} runs per repository and target")
    print(f"  {'repository':<35} {'wall':>8} {'CPU':>8}")
    for name, values in times.items():
        wall_ms = statistics.median(values) * 1000
        cpu_ms = statistics.median(CPU[name]) * 1000
        print(f"  import {name:<28} {wall_ms:6.0f} ms {cpu_ms:5.0f} ms")
    medians = sorted(statistics.median(v) for v in times.values())
    typical = statistics.median(medians)
    cpu = sorted(statistics.median(v) for v in CPU.values())
    print(
        f"CPU time: typical {statistics.median(cpu) * 1000:.0f} ms, "
        f"largest {cpu[-1] * 1000:.0f} ms (what the import itself costs)"
    )
    print(
        f"typical (median of repositories) {typical * 1000:.0f} ms; "
        f"slowest {medians[-1] * 1000:.0f} ms"
    )
    if CHECK:
        answers = ", ".join(f"{k} {v}" for k, v in sorted(ANSWERS.items()))
        print(
            f"--check-resolves' uv run: median {statistics.median(CHECK) * 1000:.0f} ms, "
            f"slowest {max(CHECK) * 1000:.0f} ms of each import ({answers})"
        )
    total = outcomes["written"] + outcomes["refused"]
    print(
        f"imports: {total}; written {outcomes['written']}, refused (another framework) "
        f"{outcomes['refused']}; planned unchanged {outcomes['planned']}/{outcomes['written']}"
    )
    if outcomes["lockable"]:
        print(f"locked unchanged: {outcomes['locked']}/{outcomes['lockable']} (lockable/)")
    verdict = "within" if typical < 1.0 and medians[-1] < 5.0 else "OVER"
    print(f"wall time {verdict} the budget (typical < 1 s, largest < 5 s)")
    verdict = "within" if statistics.median(cpu) < 1.0 and cpu[-1] < 5.0 else "OVER"
    print(f"CPU time {verdict} the budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
