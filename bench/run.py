"""`gpuenv run -- true` overhead against running `true` directly (budget: 50 ms), and
`gpuenv run --unverified -- true` of a CUDA target on this machine when it has no
NVIDIA driver (budget: 30 ms in all; NVML is not even imported then).

Builds a small project whose target points at a prefix holding what an install
leaves for `run` (gpuenv.lock, the project's lock state, completion marker,
environment delta, a passing verification record for this machine), so the
measurement needs no network and no real install, and goes through the whole gate.
The CUDA target has no record: the gate looks for the driver, then runs anyway.

Usage: .venv/bin/python bench/run.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import REPO, median_ms, report, wall

sys.path.insert(0, str(REPO / "src"))


def _locked_target(gpu: bool = False) -> object:
    """A CPU target as `gpuenv lock` writes one (a small but complete lock); with
    ``gpu``, an H100 target of the cu124 build."""
    from gpuenv.lock.model import LockedHardware, LockedTarget, PipPackage, StackSummary

    def wheel(name: str, version: str, requires: tuple[str, ...] = ()) -> PipPackage:
        url = f"https://files.invalid/{name.replace('-', '_')}-{version}-py3-none-any.whl"
        return PipPackage(name, version, url, "c" * 64, None, requires)

    deps = [wheel(f"dep-{i}", f"1.{i}.0") for i in range(40)]
    tag = "cu124" if gpu else "cpu"
    torch = wheel("torch", f"2.4.1+{tag}", tuple(d.name for d in deps))
    hardware = (
        LockedHardware(False, "H100", ("9.0",), "550.54.15", "12.4", "declared")
        if gpu
        else LockedHardware(True, None, (), None, None, "declared")
    )
    return LockedTarget(
        name="cpu",
        input_hash="sha256:" + "a" * 64,
        platform="linux-64",
        hardware=hardware,
        stack=StackSummary(
            "3.11",
            "12.4" if gpu else None,
            tag,
            "2.4.1",
            None,
            None,
            None,
            None,
            ("9.0",) if gpu else (),
            f"https://t.invalid/{tag}",
        ),
        virtual_packages={"__glibc": "2.28"},
        pip=(torch, *deps),
    )


def make_project(root: Path, *, gpu: bool = False) -> Path:
    from gpuenv.activation import ActivationInputs, write_activation_files
    from gpuenv.install import record_lock_state
    from gpuenv.lock.format import write_lock_file
    from gpuenv.lock.model import Lock
    from gpuenv.store import Store, point_project

    store = Store(root / "store")
    target = _locked_target(gpu)
    lock = Lock("sha256:" + "d" * 64, {"cpu": target})  # type: ignore[dict-item]
    lock_hash = target.content_hash  # type: ignore[attr-defined]
    prefix = store.prefix_for("cpu", lock_hash)
    (prefix / "bin").mkdir(parents=True)
    inputs = ActivationInputs(
        prefix=prefix,
        name="bench:cpu",
        store_root=store.prefixes,
        bin_dirs=(prefix / "bin",),
        lib_dirs=(prefix / "lib",),
        cuda_home=None,
        cuda_version="12.4" if gpu else None,
    )
    write_activation_files(prefix, inputs)
    cuda = "12.4" if gpu else None
    store.mark_installed(prefix, lock_hash=lock_hash, target="cpu", python="3.11", cuda=cuda)
    project = root / "project"
    project.mkdir()
    (project / "gpuenv.toml").write_text('[project]\nname = "bench"\n')
    wrote = write_lock_file(project / "gpuenv.lock", lock)
    point_project(store, project, "cpu", prefix)
    record_lock_state(project, lock, ("cpu",), digest=wrote.digest)  # as `gpuenv install`
    if not gpu:
        _record_verification(prefix, lock_hash)
    return project


def _record_verification(prefix: Path, lock_hash: str) -> None:
    """A passing record for this machine, as `gpuenv verify` writes one, so that the
    measured run goes through the gate's success path."""
    from datetime import datetime, timezone

    from gpuenv.verify.gate import machine_fingerprint
    from gpuenv.verify.model import ProbeResult
    from gpuenv.verify.record import make_record, write_record

    now = datetime.now(timezone.utc)
    record = make_record(
        lock_hash=lock_hash,
        fingerprint=machine_fingerprint(),
        result=ProbeResult(passed=True, mode="cpu"),
        started_at=now,
        finished_at=now,
        target="cpu",
    )
    write_record(prefix, record)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    gpuenv = REPO / ".venv" / "bin" / "gpuenv"
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp))
        env = {"GPUENV_HOME": str(Path(tmp) / "store")}
        direct = wall([true], runs=args.runs, env=env, cwd=project)
        python = wall([str(REPO / ".venv" / "bin" / "python"), "-c", "pass"], runs=args.runs)
        run = wall([str(gpuenv), "run", "--", true], runs=args.runs, env=env, cwd=project)
        check = subprocess.run(
            [str(gpuenv), "run", "--", true], cwd=project, env={**os.environ, **env}, check=False
        ).returncode
        report("true", direct)
        report("python -c pass (interpreter start)", python)
        report("gpuenv run -- true", run, baseline=direct)
        overhead = median_ms(run) - median_ms(direct)
        verdict = "within" if overhead <= 50 else "OVER"
        print(f"overhead {overhead:.1f} ms: {verdict} the 50 ms budget (exit {check})")
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp), gpu=True)
        env = {"GPUENV_HOME": str(Path(tmp) / "store")}
        argv = [str(gpuenv), "run", "--unverified", "--", true]
        unverified = wall(argv, runs=args.runs, env=env, cwd=project)
        check = subprocess.run(argv, cwd=project, env={**os.environ, **env}, check=False)
        report("gpuenv run --unverified -- true (CUDA target)", unverified, baseline=python)
        from gpuenv.hardware.fingerprint import nvml_library_present

        driver = "an NVIDIA driver library" if nvml_library_present() else "no NVIDIA driver"
        verdict = "within" if median_ms(unverified) <= 30 else "OVER"
        print(
            f"{median_ms(unverified):.1f} ms on a machine with {driver}: {verdict} the 30 ms "
            f"budget (exit {check.returncode})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
