"""The libcuda.so.1 CUDA would open when it is not the driver's, and a CUDA build on a
machine with no driver (in-process with injected facts, and through the real detection
path with the stand-in NVML)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gpuenv.doctor import Severity
from tests.doctor.conftest import H100, NO_GPU, ElfFactory, FakeEnv, Run, codes, only
from tests.doctor.test_wsl_base import wsl_host
from tests.nvml.standin import NVML_ERROR_DRIVER_NOT_LOADED, FakeNvml, h100


def driver_lib(host_root: Path, elf: ElfFactory, version: str = "550.54.15") -> Path:
    system = host_root / "usr" / "lib" / "x86_64-linux-gnu"
    real = elf.install(system / f"libcuda.so.{version}", "libcuda.so.1", variant=version)
    (system / "libcuda.so.1").symlink_to(real.name)
    return system / "libcuda.so.1"


def test_the_drivers_libcuda_is_no_finding(
    clean_env: FakeEnv, run: Run, host_root: Path, elf: ElfFactory
) -> None:
    driver_lib(host_root, elf)
    assert run(clean_env).findings == ()


def test_stub_through_a_relative_ld_library_path_entry(
    clean_env: FakeEnv, run: Run, host_root: Path, tmp_path: Path, elf: ElfFactory
) -> None:
    driver_lib(host_root, elf)
    stubs = tmp_path / "cuda" / "lib64" / "stubs"  # the run's current directory is tmp_path
    stub = elf.install(stubs / "libcuda.so", "libcuda.so.1", variant="stub")
    (stubs / "libcuda.so.1").symlink_to(stub.name)
    report = run(clean_env, environ={"LD_LIBRARY_PATH": "cuda/lib64/stubs"})
    finding = only(report, "libcuda-not-the-driver")
    assert finding.severity is Severity.ERROR
    ev = finding.evidence
    assert ev["file"] == str(stubs / "libcuda.so.1")  # the file, not only the entry
    assert ev["kind"] == "stub"
    assert ev["entry"] == "cuda/lib64/stubs"
    assert str(stubs / "libcuda.so.1") in finding.message
    assert "stub" in finding.message
    assert ev["other_copies"][0]["kind"] == "driver"
    assert finding.fix.startswith("1. remove 'cuda/lib64/stubs' from LD_LIBRARY_PATH")
    assert "ld-library-path-relative" in codes(report)  # the entry has its own finding


def test_a_container_leftover_of_another_driver(
    clean_env: FakeEnv, run: Run, host_root: Path, elf: ElfFactory
) -> None:
    driver_lib(host_root, elf, version="535.104.05")  # baked into the image
    finding = only(run(clean_env), "libcuda-not-the-driver")  # the driver is 550.54.15
    assert finding.evidence["kind"] == "other-driver"
    assert "driver 535.104.05" in finding.message
    assert "sudo ldconfig" in finding.fix


def test_a_wsl_shadow(clean_env: FakeEnv, run: Run, host_root: Path, elf: ElfFactory) -> None:
    wsl_lib = wsl_host(host_root)
    (wsl_lib / "libcuda.so.1").unlink()
    elf.install(wsl_lib / "libcuda.so.1", "libcuda.so.1", variant="wsl")
    shadow = driver_lib(host_root, elf)  # a Linux driver's libcuda installed inside WSL
    report = run(clean_env)
    finding = only(report, "libcuda-not-the-driver")
    assert finding.evidence["file"].endswith("usr/lib/x86_64-linux-gnu/libcuda.so.1")
    assert Path(finding.evidence["file"]) == shadow
    # the WSL check names the same file no more; it keeps what only it knows
    assert "wsl-linux-driver" not in codes(report)


def test_cuda_build_without_a_driver_is_a_warning(clean_env: FakeEnv, run: Run) -> None:
    finding = only(run(clean_env, facts=NO_GPU), "no-nvidia-driver")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["environment_cuda"] == "12.4"


def test_cpu_build_without_a_driver_is_fine(clean_env: FakeEnv, run: Run) -> None:
    clean_env.torch(version="2.4.1+cpu", cuda=None)
    assert "no-nvidia-driver" not in codes(run(clean_env, facts=NO_GPU))


# --- the real detection path: `gpuenv doctor` in a subprocess with the stand-in NVML ---


def doctor_json(env: dict[str, str], prefix: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "gpuenv", "doctor", "--prefix", str(prefix), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _codes(data: dict[str, object]) -> dict[str, dict[str, object]]:
    findings = data["findings"]
    assert isinstance(findings, list)
    return {f["code"]: f for f in findings}


def test_standin_nvml_driver_not_loaded(
    clean_env: FakeEnv, standin_env: Callable[[FakeNvml], dict[str, str]], tmp_path: Path
) -> None:
    env = standin_env(FakeNvml(init_error=NVML_ERROR_DRIVER_NOT_LOADED))
    env["HOME"] = str(tmp_path / "home")
    found = _codes(doctor_json(env, clean_env.prefix))
    assert "no-nvidia-driver" in found, found
    assert found["no-nvidia-driver"]["severity"] == "warning"


def test_standin_nvml_driver_too_old_for_the_build(
    clean_env: FakeEnv, standin_env: Callable[[FakeNvml], dict[str, str]], tmp_path: Path
) -> None:
    env = standin_env(FakeNvml(gpus=(h100(),), driver="470.57.02", cuda=11040))
    env["HOME"] = str(tmp_path / "home")
    found = _codes(doctor_json(env, clean_env.prefix))
    assert found["driver-too-old"]["severity"] == "error"
    assert found["driver-too-old"]["evidence"]["driver_version"] == "470.57.02"
    assert "no-nvidia-driver" not in found
    # the stand-in's directory on LD_LIBRARY_PATH holds no CUDA library: nothing about it
    assert not any(code.startswith("ld-library-path") for code in found), found
    assert os.environ.get("GPUENV_FAKE_NVML") is None


def test_facts_h100_fixture_is_a_driver(clean_env: FakeEnv, run: Run) -> None:
    assert H100.driver_version is not None
    assert "no-nvidia-driver" not in codes(run(clean_env))
