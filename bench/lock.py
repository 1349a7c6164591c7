"""`gpuenv lock` against `uv pip compile --generate-hashes` on the same inputs, run
alternately (uv, gpuenv, gpuenv, uv, ...) so the machine's load falls on both alike;
medians and same-run ratios, with the load printed.

The inputs: torch 2.4.1 (cu124 build), torchvision, torchaudio and transformers, for
Python 3.11 on x86_64, on the tests' local index (real wheels, served on loopback).
uv gets the cu124 index as an extra index (unsafe-best-match, so both indexes are
considered) and, as gpuenv does, names its interpreter (`--python <path>`: without it
uv searches the PATH, ~100 ms through shims, and the ratio measured that search).

gpuenv's lock of bytes it locked before begins the uv runs that lock made as it starts
(lock.headstart), before its own modules load: the fresh lock and the relock below
measure that, as a user who locks an unchanged spec again meets it. A lock of a spec
just edited has no such recipe: "spec edited" measures that one (a comment added before
each run), printed beside them but not part of the verdict.

Cases (each its own alternating run):
- one target: a fresh lock (no lock file) against uv with no output file, and a relock
  (the lock kept: pins kept) against uv with its last output kept. `uv pip compile`
  prefers the versions pinned in an existing output file, as gpuenv keeps a lock's
  pins, and that saves it about 150 ms on the --pypi environment: an anchor that keeps
  its file is a relock, and a fresh lock measured against it is not a fair ratio;
- `--targets N`: N identical targets (four nodes of one machine class) against one;
- `--scale 10,50,200`: that many more small wheels (benchpkg-NNN) in the request;
- `--cold`: every run starts with empty caches (gpuenv's and uv's): a first lock on a
  machine, which also builds what gpuenv keeps of its own code and data (the compiled
  dataclass methods and patterns, the knowledge base's parsed files, the validated spec:
  about 300 ms on two cores, once per machine, gpuenv version and spec);
- `--cold-network`: only what came from the network is emptied (uv's cache, gpuenv's
  index pages, wheel metadata and resolution notes): a new project's lock on a machine
  that ran gpuenv before;
- `--check-after`: `lock --check` and `install --frozen` right after a lock (the lock
  leaves lock --check's note) against the same commands with no note (cache emptied of
  it: the full check), and the lock itself beside uv.
With --pypi (needs network) the one-target case is the issue's own: an H100 on the
default index's torch 2.9.1 build (cu128) with transformers, accelerate and datasets.

Targets (issue 28): one target <= 1.1x uv, four identical targets <= 1.2x one.

Usage: .venv/bin/python bench/lock.py [--runs N (9; 15 with --pypi)] [--targets 4]
       [--scale 10,50,200] [--cold | --cold-network] [--pypi]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _project import PYPI_REQUIREMENTS, PYPI_SPEC, REQUIREMENTS, Bench, bench_index, scale_names
from _timing import REPO, alternate, compiled, interpreter, load, ratio, report


def _spec(bench: Bench, *, targets: int, extra: list[str], pypi: bool) -> str:
    spec = bench.spec("h100")
    if extra:
        deps = ", ".join(f'"{r}"' for r in [*REQUIREMENTS[3:], *extra])
        spec = "\n".join(
            f"dependencies = [{deps}]" if line.startswith("dependencies") else line
            for line in spec.splitlines()
        )
    if pypi:
        return PYPI_SPEC
    if targets > 1:
        block = '[targets.h100]\ngpu = "H100"\ndriver = "550.54.15"\n'
        nodes = "".join(block.replace("h100]", f"node-{n}]") for n in range(targets))
        spec = spec.replace(block.rstrip("\n"), nodes.rstrip("\n"))
    return spec.rstrip("\n") + "\n"


def _uv_argv(bench: Bench, project: Path, *, pypi: bool, output: str = "uv.txt") -> list[str]:
    indexes = (
        []
        if pypi
        else ["--index-url", bench.default_index, "--extra-index-url", f"{bench.torch_base}/cu124"]
    )
    return [
        str(REPO / ".venv" / "bin" / "uv"),
        "pip",
        "compile",
        "--no-config",
        "--quiet",
        "requirements.in",
        "--generate-hashes",
        *indexes,
        "--index-strategy",
        "unsafe-best-match",
        "--python-version",
        "3.11",
        "--python-platform",
        "x86_64-manylinux_2_28",
        "--python",
        interpreter(),  # the interpreter gpuenv names to uv
        "-o",
        str(project / output),
    ]


def _project(bench: Bench, name: str, *, targets: int, extra: list[str], pypi: bool) -> Path:
    project = bench.root / name
    project.mkdir()
    (project / "gpuenv.toml").write_text(_spec(bench, targets=targets, extra=extra, pypi=pypi))
    if pypi:
        lines = PYPI_REQUIREMENTS + extra
    else:
        lines = [r.replace("torch==2.4.1", "torch==2.4.1+cu124") for r in REQUIREMENTS] + extra
    (project / "requirements.in").write_text("\n".join(lines) + "\n")
    return project


def _emptied(*paths: Path) -> Callable[[], None]:
    def empty() -> None:
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    return empty


def one_case(bench: Bench, args: argparse.Namespace, *, extra: list[str], label: str) -> float:
    project = _project(bench, f"one-{label}", targets=1, extra=extra, pypi=args.pypi)
    gpuenv = [interpreter(), "-m", "gpuenv", "lock"]
    own = Path(bench.env["XDG_CACHE_HOME"]) / "gpuenv"
    caches = [own, Path(bench.env["UV_CACHE_DIR"])]
    if args.cold_network:  # gpuenv's compiled code and checked-file notes kept
        caches = [Path(bench.env["UV_CACHE_DIR"])]
        caches += [own / part for part in ("uv", "index", "wheel-metadata", "uv-resolved")]
    cold = args.cold or args.cold_network
    fresh = _emptied(project / "gpuenv.lock", *(caches if cold else []))
    edited = _project(bench, f"one-{label}-edited", targets=1, extra=extra, pypi=args.pypi)
    edits = [0]

    def edit() -> None:  # new bytes each run: no recipe for lock.headstart to begin from
        edits[0] += 1
        with (edited / "gpuenv.toml").open("a") as spec:
            spec.write(f"# edit {edits[0]}\n")
        _emptied(edited / "gpuenv.lock", *(caches if cold else []))()

    cpu: dict[str, list[float]] = {}
    uv_fresh = _emptied(project / "uv-fresh.txt", *(caches if cold else []))
    times = alternate(
        {
            "uv fresh": _uv_argv(bench, project, pypi=args.pypi, output="uv-fresh.txt"),
            "gpuenv": gpuenv,
            "uv kept": _uv_argv(bench, project, pypi=args.pypi),
            "gpuenv relock": gpuenv,
            "gpuenv edited": [*gpuenv[:-1], "-f", str(edited / "gpuenv.toml"), "lock"],
        },
        runs=args.runs,
        env=bench.env,
        cwd=project,
        before={
            "uv fresh": uv_fresh,
            "uv kept": _emptied(*caches) if cold else (lambda: None),
            "gpuenv": fresh,
            "gpuenv relock": _emptied(*caches) if cold else (lambda: None),
            "gpuenv edited": edit,
        },
        cpu=cpu,
    )
    state = "cold network" if args.cold_network else "cold" if args.cold else "warm"
    print(f"-- one target{label and f', {label}'} ({state} caches)")
    pairs = (
        ("uv fresh", "no output file", "gpuenv", "no lock file"),
        ("uv kept", "its output kept", "gpuenv relock", "relock, pins kept"),
    )
    for anchor, anchor_title, name, title in pairs:
        report(f"uv pip compile ({anchor_title})", times[anchor], cpu=cpu[anchor])
        report(
            f"gpuenv lock ({title})",
            times[name],
            baseline=times[anchor],
            cpu=cpu[name],
            cpu_baseline=cpu[anchor],
        )
    report(
        "gpuenv lock (spec edited, no lock file)",
        times["gpuenv edited"],
        baseline=times["uv fresh"],
        cpu=cpu["gpuenv edited"],
        cpu_baseline=cpu["uv fresh"],
    )
    relock = ratio(times["gpuenv relock"], times["uv kept"])
    verdict = "within" if relock <= 1.1 else "OVER"
    print(f"relock: gpuenv/uv {relock:.2f} ({verdict} the 1.1x target)")
    return ratio(times["gpuenv"], times["uv fresh"])


def targets_case(bench: Bench, args: argparse.Namespace) -> float:
    one = _project(bench, "targets-1", targets=1, extra=[], pypi=args.pypi)
    many = _project(bench, f"targets-{args.targets}", targets=args.targets, extra=[], pypi=False)
    gpuenv = [interpreter(), "-m", "gpuenv", "lock"]
    one_lock, many_lock = one / "gpuenv.lock", many / "gpuenv.lock"
    times = alternate(
        {
            "uv": [*_uv_argv(bench, one, pypi=False)],
            "one": [*gpuenv[:-1], "-f", str(one / "gpuenv.toml"), "lock"],
            "many": [*gpuenv[:-1], "-f", str(many / "gpuenv.toml"), "lock"],
        },
        runs=args.runs,
        env=bench.env,
        cwd=one,
        before={"one": _emptied(one_lock), "many": _emptied(many_lock)},
    )
    print(f"-- {args.targets} identical targets against one (warm caches)")
    report("uv pip compile --generate-hashes", times["uv"])
    report("gpuenv lock, 1 target", times["one"], baseline=times["uv"])
    report(f"gpuenv lock, {args.targets} identical targets", times["many"], baseline=times["uv"])
    many_over_one = ratio(times["many"], times["one"])
    verdict = "within" if many_over_one <= 1.2 else "OVER"
    print(f"{args.targets} targets / 1 target: {many_over_one:.2f} ({verdict} the 1.2x target)")
    return many_over_one


def check_after_case(bench: Bench, args: argparse.Namespace) -> None:
    """The first `lock --check` and `install --frozen` after `gpuenv lock`, against the
    same with no note of the check left (the full check, as before a lock left one)."""
    project = _project(bench, "check-after", targets=1, extra=[], pypi=False)
    gpuenv = [interpreter(), "-m", "gpuenv"]
    notes = Path(bench.env["XDG_CACHE_HOME"]) / "gpuenv" / "lock-check"
    env = {**os.environ, **bench.env}

    def relocked() -> None:  # the lock written again, the notes of every check gone
        _emptied(project / "gpuenv.lock", notes)()
        subprocess.run([*gpuenv, "lock"], cwd=project, env=env, check=True, capture_output=True)

    def noteless() -> None:
        _emptied(notes)()

    install = [*gpuenv, "install", "--frozen"]
    cpu: dict[str, list[float]] = {}
    times = alternate(
        {
            "check after lock": [*gpuenv, "lock", "--check"],
            "check, no note": [*gpuenv, "lock", "--check"],
            "install after lock": install,
            "install, no note": install,
        },
        runs=args.runs,
        env=bench.env,
        cwd=project,
        before={
            "check after lock": relocked,
            "check, no note": noteless,
            "install after lock": relocked,
            "install, no note": noteless,
        },
        cpu=cpu,
    )
    print("-- right after gpuenv lock (warm caches; the target installed before)")
    for after, before in (
        ("check after lock", "check, no note"),
        ("install after lock", "install, no note"),
    ):
        report(before, times[before], cpu=cpu[before])
        report(
            after, times[after], baseline=times[before], cpu=cpu[after], cpu_baseline=cpu[before]
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    # Against the network a run's wall time spreads by 10-15 %: 15 runs there (about a
    # minute) keep the median's own noise well under the 10 % the target leaves.
    parser.add_argument("--runs", type=int, default=None, help="9; 15 with --pypi")
    parser.add_argument("--pypi", action="store_true", help="lock against the default index")
    parser.add_argument("--targets", type=int, default=0, help="N identical targets vs one")
    parser.add_argument("--scale", default="", help="comma-separated package counts")
    parser.add_argument("--cold", action="store_true", help="empty every cache before each run")
    parser.add_argument(
        "--cold-network",
        action="store_true",
        help="empty only the caches of what came from the network before each run",
    )
    parser.add_argument(
        "--check-after", action="store_true", help="lock --check and install after a lock"
    )
    args = parser.parse_args()
    if args.runs is None:
        args.runs = 15 if args.pypi else 9
    compiled()
    counts = [int(n) for n in args.scale.split(",") if n]
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_index(Path(tmp), packages=max(counts, default=0)) as bench,
    ):
        print(load())
        first = one_case(bench, args, extra=[], label="")
        verdict = "within" if first <= 1.1 else "OVER"
        print(f"no lock file: gpuenv/uv {first:.2f} ({verdict} the 1.1x target)")
        if args.targets > 1:
            targets_case(bench, args)
        if args.check_after:
            check_after_case(bench, args)
        for count in counts:
            scaled = one_case(bench, args, extra=scale_names(count), label=f"+{count} packages")
            print(f"gpuenv/uv at +{count} packages: {scaled:.2f}")
        print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
