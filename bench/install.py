"""Warm-cache install of the same locked artifacts: `gpuenv install --frozen` vs
`uv venv` + `uv pip sync --require-hashes` vs `python -m venv` + `pip install
--require-hashes`, on the tests' local index (budget: gpuenv within 1.3x of uv).

Each tool first installs once to warm its cache; each timed run then builds a fresh
environment (the previous one is removed outside the timing).

Usage: .venv/bin/python bench/install.py [--runs N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _project import bench_index
from _timing import REPO, report


def timed(
    setup: Callable[[], None], argv_list: list[list[str]], env: dict[str, str], cwd: Path, runs: int
) -> list[float]:
    times = []
    for index in range(runs + 1):  # the first run warms the caches
        setup()
        started = time.perf_counter()
        for argv in argv_list:
            done = subprocess.run(
                argv, env=env, cwd=cwd, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise SystemExit(f"{argv[:3]} failed: {done.stderr[-2000:]}")
        if index:
            times.append(time.perf_counter() - started)
    return times


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
    args = parser.parse_args()
    python = REPO / ".venv" / "bin" / "python"
    uv = str(REPO / ".venv" / "bin" / "uv")
    base = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}")
    with tempfile.TemporaryDirectory() as tmp, bench_index(Path(tmp)) as bench:
        work = Path(tmp)
        project = work / "project"
        project.mkdir()
        (project / "gpuenv.toml").write_text(bench.spec("cpu"))
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
            cpu = lock.targets["cpu"]
            pip = tuple(
                replace(p, url=args.torch_wheel.resolve().as_uri(), sha256=digest)
                if p.name == "torch"
                else p
                for p in cpu.pip
            )
            lock = replace(lock, targets={"cpu": replace(cpu, pip=pip)})
            write_lock(project / "gpuenv.lock", lock)
        if args.heavy:
            from dataclasses import replace

            from gpuenv.lock.format import write_lock
            from gpuenv.lock.model import PipPackage

            extra = tuple(
                PipPackage(name, "1.0", path.as_uri(), sha256)
                for name, sha256, path in heavy_wheels(work / "heavy", 25, 1200)
            )
            cpu = lock.targets["cpu"]
            lock = replace(lock, targets={"cpu": replace(cpu, pip=cpu.pip + extra)})
            write_lock(project / "gpuenv.lock", lock)
        requirements = work / "requirements.txt"
        requirements.write_text(requirements_text(lock.targets["cpu"]))
        store = Path(bench.env["GPUENV_HOME"])

        def reset_gpuenv() -> None:
            shutil.rmtree(store / "prefixes", ignore_errors=True)
            shutil.rmtree(project / ".gpuenv", ignore_errors=True)

        def reset(venv: Path) -> Callable[[], None]:
            return lambda: shutil.rmtree(venv, ignore_errors=True)

        gpuenv = timed(
            reset_gpuenv,
            [[str(python), "-m", "gpuenv", "install", "--frozen"]],
            bench.env,
            project,
            args.runs,
        )
        uv_venv = work / "uv-venv"
        uv_env = {**bench.env, "UV_CACHE_DIR": str(work / "uv-cache")}
        uv_sync = timed(
            reset(uv_venv),
            [
                [uv, "venv", "--no-config", "--quiet", "--python", base, str(uv_venv)],
                [
                    uv,
                    "pip",
                    "sync",
                    "--no-config",
                    "--quiet",
                    "--require-hashes",
                    "--python",
                    str(uv_venv / "bin" / "python"),
                    str(requirements),
                ],
            ],
            uv_env,
            work,
            args.runs,
        )
        pip_venv = work / "pip-venv"
        pip_env = {**bench.env, "PIP_CACHE_DIR": str(work / "pip-cache")}
        pip = timed(
            reset(pip_venv),
            [
                [base, "-m", "venv", "--without-pip", str(pip_venv)],
                [
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
                ],
            ],
            pip_env,
            work,
            max(3, args.runs // 2),
        )
        report("uv venv + uv pip sync --require-hashes", uv_sync)
        report("gpuenv install --frozen", gpuenv, baseline=uv_sync)
        report("python -m venv + pip install --require-hashes", pip, baseline=uv_sync)
        ratio = statistics.median(gpuenv) / statistics.median(uv_sync)
        print(
            f"gpuenv/uv ratio {ratio:.2f} "
            f"({'within' if ratio <= 1.3 else 'OVER'} the 1.3x budget); "
            f"gpuenv/pip ratio {statistics.median(gpuenv) / statistics.median(pip):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
