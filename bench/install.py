"""`gpuenv install --frozen` against `uv venv` + `uv pip sync --require-hashes` (and
`python -m venv` + `pip install --require-hashes`) of the same locked artifacts, on the
tests' local index, run alternately (uv, gpuenv, pip, pip, gpuenv, uv, ...) so the
machine's load falls on all alike; medians, same-run ratios and the load printed.

Warm (default): each tool installed once before, so its cache holds every artifact;
each timed run builds a fresh environment (the previous one removed outside the
timing). --cold: every cache is emptied before each run too, and the page cache
dropped where the user may (root). --cold --touch-memory also touches the free memory
once before each run (``touched_memory``): on a virtual machine whose host backs a page
only when the guest first touches it, that first touch, not either tool, is most of a
cold run's system time. --scale N adds N small
wheels to the lock (the fixed cost shows at 10, the per-package cost at 200).

Target (issue 28): gpuenv <= 1.1x uv, warm and cold.

With --pypi (needs network) the environment is the issue's own: an H100 target on the
default index's torch 2.9.1 build (cu128) with transformers, accelerate and datasets
(about 66 artifacts, 3.9 GiB; --cold downloads that for every run of each tool).

--cuda installs the fixture's H100 target instead of its CPU one: a CUDA target's install
writes more of the activation (TORCH_CUDA_ARCH_LIST, the NVIDIA library folders), a
fixed cost the CPU target never shows.

Usage: .venv/bin/python bench/install.py [--runs N] [--cold [--touch-memory]] [--scale N] [--no-pip]
       [--heavy] [--torch-wheel PATH] [--pypi] [--cuda]
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _project import PYPI_SPEC, bench_index, scale_names
from _timing import REPO, alternate, compiled, interpreter, load, ratio, report


def dropped_caches() -> bool:
    """Every run of --cold starts from an empty page cache where this user may drop it
    (root): the pages an earlier run left (several GiB of wheels, unpacked twice) moved
    either tool's system time by up to 15 core-seconds, measured with /proc/stat, so a
    cold ratio said more about the order of the runs than about the tools."""
    subprocess.run(["sync"], check=False)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def touched_memory() -> float:
    """Write to all but 2 GiB of the available memory once, then free it; the seconds it
    took. This machine (a Firecracker guest) gives dropped pages back to its host, and
    the next first touch of each costs a host fault: writing 4 GB into the page cache
    took 7.1 s of system time after ``drop_caches`` and 1.2-1.5 s once the memory had
    been touched (dd, measured twice). A cold install writes 7.5 GB (uv) to 11.6 GB
    (gpuenv, the store's archives too), so without this the cold ratio mostly measured
    how much fresh memory each tool touched, at a cost a machine without a balloon
    does not have. The touch takes 40-50 s here: the host takes the pages back within
    a run's time, so it is done before every run."""
    import mmap

    start = time.perf_counter()
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        available = next(int(line.split()[1]) << 10 for line in meminfo if "MemAvailable" in line)
    size = max(0, available - (2 << 30)) >> 20 << 20
    if size:
        block = b"\x01" * (1 << 20)
        with mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as memory:
            for offset in range(0, size, 1 << 20):
                memory[offset : offset + (1 << 20)] = block
    return time.perf_counter() - start


def heavy_wheels(directory: Path, count: int, files: int) -> list[tuple[str, str, Path]]:
    """``count`` wheels of ``files`` small modules each: an environment the size of a
    real torch install in files (a torch cu12x prefix holds ~15-30k files)."""
    import base64
    import hashlib
    import zipfile

    directory.mkdir()
    out = []
    for n in range(count):
        name = f"heavy{n:02d}"
        path = directory / f"{name}-1.0-py3-none-any.whl"
        record = []
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            for i in range(files):
                data = (f"# module {i} of {name}\n" + "x = 1\n" * 300).encode()
                member = f"{name}/m{i:04d}.py"
                archive.writestr(zipfile.ZipInfo(member, (2020, 1, 1, 0, 0, 0)), data)
                digest = (
                    base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                )
                record.append(f"{member},sha256={digest},{len(data)}")
            info = f"{name}-1.0.dist-info"
            meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n"
            wheel = (
                "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            )
            archive.writestr(f"{info}/METADATA", meta)
            archive.writestr(f"{info}/WHEEL", wheel)
            archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
        out.append((name, hashlib.sha256(path.read_bytes()).hexdigest(), path))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cold", action="store_true", help="empty every cache before each run")
    parser.add_argument("--scale", type=int, default=0, help="add N small wheels to the lock")
    parser.add_argument("--no-pip", action="store_true", help="leave pip out")
    parser.add_argument(
        "--heavy",
        action="store_true",
        help="add 25 wheels of 1,200 files each (30k files: the size of a torch prefix)",
    )
    parser.add_argument(
        "--torch-wheel",
        type=Path,
        help="install this real torch wheel in place of the fixture's small one",
    )
    parser.add_argument("--pypi", action="store_true", help="the issue's H100 environment")
    parser.add_argument(
        "--cuda",
        action="store_true",
        help="the fixture's H100 target (torch's cu124 build) instead of its CPU one",
    )
    parser.add_argument(
        "--touch-memory",
        action="store_true",
        help="with --cold: touch the free memory before each run (see touched_memory)",
    )
    args = parser.parse_args()
    if args.touch_memory and not args.cold:
        parser.error("--touch-memory is for --cold runs")
    compiled()
    name = "h100" if args.pypi or args.cuda else "cpu"
    python = Path(interpreter())
    uv = str(REPO / ".venv" / "bin" / "uv")
    base = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}")
    with tempfile.TemporaryDirectory() as tmp, bench_index(Path(tmp), packages=args.scale) as bench:
        work = Path(tmp)
        project = work / "project"
        project.mkdir()
        spec = PYPI_SPEC.rstrip("\n") if args.pypi else bench.spec(name)
        if args.scale:
            deps = ", ".join(f'"{n}"' for n in ["transformers>=4.44", *scale_names(args.scale)])
            spec = "\n".join(
                f"dependencies = [{deps}]" if line.startswith("dependencies") else line
                for line in spec.splitlines()
            )
        (project / "gpuenv.toml").write_text(spec + "\n")
        subprocess.run(
            [str(python), "-m", "gpuenv", "lock"],
            env=bench.env,
            cwd=project,
            check=True,
            capture_output=True,
        )
        sys.path.insert(0, str(REPO / "src"))
        from gpuenv.install import requirements_text
        from gpuenv.lock.format import read_lock

        lock = read_lock(project / "gpuenv.lock")
        assert lock is not None
        if args.torch_wheel:
            import hashlib
            from dataclasses import replace

            from gpuenv.lock.format import write_lock

            digest = hashlib.sha256(args.torch_wheel.read_bytes()).hexdigest()
            target = lock.targets[name]
            pip = tuple(
                replace(p, url=args.torch_wheel.resolve().as_uri(), sha256=digest)
                if p.name == "torch"
                else p
                for p in target.pip
            )
            lock = replace(lock, targets={name: replace(target, pip=pip)})
            write_lock(project / "gpuenv.lock", lock)
        if args.heavy:
            from dataclasses import replace

            from gpuenv.lock.format import write_lock
            from gpuenv.lock.model import PipPackage

            extra = tuple(
                PipPackage(name, "1.0", path.as_uri(), sha256)
                for name, sha256, path in heavy_wheels(work / "heavy", 25, 1200)
            )
            target = lock.targets[name]
            lock = replace(lock, targets={name: replace(target, pip=target.pip + extra)})
            write_lock(project / "gpuenv.lock", lock)
        requirements = work / "requirements.txt"
        requirements.write_text(requirements_text(lock.targets[name]))
        store = Path(bench.env["GPUENV_HOME"])
        uv_venv, pip_venv = work / "uv-venv", work / "pip-venv"
        uv_cache, pip_cache = work / "uv-cache", work / "pip-cache"
        gpuenv_caches = [store / "cache"]

        def emptied(*paths: Path) -> Callable[[], None]:
            def empty() -> None:
                for path in paths:
                    shutil.rmtree(path, ignore_errors=True)
                if args.cold:
                    dropped_caches()
                if args.touch_memory:
                    touched_memory()

            return empty

        gpuenv_env = [store / "prefixes", project / ".gpuenv"]
        before = {
            "gpuenv": emptied(*gpuenv_env, *(gpuenv_caches if args.cold else [])),
            "uv": emptied(uv_venv, *([uv_cache] if args.cold else [])),
            "pip": emptied(pip_venv, *([pip_cache] if args.cold else [])),
        }
        sync = [
            uv,
            "pip",
            "sync",
            "--no-config",
            "--quiet",
            "--require-hashes",
            "--python",
            str(uv_venv / "bin" / "python"),
            str(requirements),
        ]
        pip_install = [
            str(python),
            "-m",
            "pip",
            "--python",
            str(pip_venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--require-hashes",
            "-r",
            str(requirements),
        ]
        uv_venv_argv = [uv, "venv", "--no-config", "--quiet", "--python", base, str(uv_venv)]
        commands = {
            "uv": ["sh", "-c", f"{shlex.join(uv_venv_argv)} && {shlex.join(sync)}"],
            "gpuenv": [str(python), "-m", "gpuenv", "install", "--frozen"],
        }
        if args.pypi and not args.cold:
            # uv checks each URL's freshness online; offline, its cache alone answers, as
            # gpuenv's first try does: both anchors are printed.
            offline = shlex.join([*sync[:3], "--offline", *sync[3:]])
            commands["uv offline"] = ["sh", "-c", f"{shlex.join(uv_venv_argv)} && {offline}"]
            before["uv offline"] = before["uv"]
        if not args.no_pip:
            venv = shlex.join([base, "-m", "venv", "--without-pip", str(pip_venv)])
            commands["pip"] = ["sh", "-c", f"{venv} && {shlex.join(pip_install)}"]
        if args.cold:
            how = "dropped" if dropped_caches() else "kept (not root: the ratios are noisier)"
            print(f"page cache before each run: {how}")
        if args.touch_memory:
            print(f"free memory touched before each run ({touched_memory():.0f} s here)")
        print(load())
        spent: dict[str, list[float]] = {}
        times = alternate(
            commands,
            runs=args.runs,
            env={
                **bench.env,
                "UV_CACHE_DIR": str(uv_cache),  # gpuenv keeps its own, in the store
                "PIP_CACHE_DIR": str(pip_cache),
            },
            cwd=project,
            before=before,
            cpu=spent,
        )
        packages = len(lock.targets[name].pip)
        print(f"-- {packages} locked artifacts, {'cold' if args.cold else 'warm'} caches")
        anchors = {"uv": "--require-hashes", "uv offline": "--offline"}
        for anchor, how in anchors.items():
            if anchor not in times:
                continue
            report(f"uv venv + uv pip sync {how}", times[anchor], cpu=spent[anchor])
            report(
                "gpuenv install --frozen",
                times["gpuenv"],
                baseline=times[anchor],
                cpu=spent["gpuenv"],
                cpu_baseline=spent[anchor],
            )
        if "pip" in times:
            report(
                "python -m venv + pip install --require-hashes",
                times["pip"],
                baseline=times["uv"],
                cpu=spent["pip"],
                cpu_baseline=spent["uv"],
            )
        for anchor in (a for a in anchors if a in times):  # a verdict against each anchor
            gpuenv_over_uv = ratio(times["gpuenv"], times[anchor])
            verdict = "within" if gpuenv_over_uv <= 1.1 else "OVER"
            print(f"gpuenv/{anchor} {gpuenv_over_uv:.2f} ({verdict} the 1.1x target)")
        print(load())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
