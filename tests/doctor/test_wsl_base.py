"""WSL2 with a Linux driver inside, and a conda base environment holding a stack."""

from __future__ import annotations

from pathlib import Path

from gpuenv.doctor import Severity
from tests.doctor.conftest import FakeEnv, Run, codes, only

WSL_RELEASE = "5.15.153.1-microsoft-standard-WSL2"


def wsl_host(root: Path) -> Path:
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text(WSL_RELEASE + "\n")
    wsl_lib = root / "usr" / "lib" / "wsl" / "lib"
    wsl_lib.mkdir(parents=True)
    (wsl_lib / "libcuda.so.1").write_text("host driver")
    return wsl_lib


def test_healthy_wsl(clean_env: FakeEnv, run: Run, host_root: Path) -> None:
    wsl_lib = wsl_host(host_root)
    system = host_root / "usr" / "lib" / "x86_64-linux-gnu"
    system.mkdir(parents=True)
    (system / "libcuda.so").symlink_to(wsl_lib / "libcuda.so.1")  # a link to the host's is fine
    assert run(clean_env).findings == ()


def test_linux_driver_inside_wsl(clean_env: FakeEnv, run: Run, host_root: Path) -> None:
    wsl_host(host_root)
    system = host_root / "usr" / "lib" / "x86_64-linux-gnu"
    system.mkdir(parents=True)
    (system / "libcuda.so.550.54.15").write_text("linux driver")
    (system / "libnvidia-ml.so.1").write_text("linux driver")
    (host_root / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (host_root / "proc" / "driver" / "nvidia" / "version").write_text("NVRM version: 550.54.15")
    finding = only(run(clean_env), "wsl-linux-driver")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["kernel_release"] == WSL_RELEASE
    files = finding.evidence["files"]
    assert str(system / "libcuda.so.550.54.15") in files
    assert str(system / "libnvidia-ml.so.1") in files
    assert files[0].endswith("proc/driver/nvidia/version")


def test_libcuda_in_the_environment_inside_wsl(
    clean_env: FakeEnv, run: Run, host_root: Path
) -> None:
    wsl_host(host_root)
    (clean_env.prefix / "lib" / "libcuda.so.1").write_text("compat driver")
    finding = only(run(clean_env), "wsl-linux-driver")
    assert finding.evidence["files"] == [str(clean_env.prefix / "lib" / "libcuda.so.1")]


def test_no_wsl_no_finding(clean_env: FakeEnv, run: Run, host_root: Path) -> None:
    (host_root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (host_root / "proc" / "sys" / "kernel" / "osrelease").write_text("6.8.0-45-generic\n")
    system = host_root / "usr" / "lib" / "x86_64-linux-gnu"
    system.mkdir(parents=True)
    (system / "libcuda.so.1").write_text("linux driver")
    assert "wsl-linux-driver" not in codes(run(clean_env))


def test_conda_base_with_a_stack(tmp_path: Path, elf, run: Run) -> None:
    env = FakeEnv(tmp_path / "miniconda3", elf)
    env.site.mkdir(parents=True)
    (env.prefix / "condabin").mkdir()
    env.conda("conda", "24.7.1")
    env.conda("pytorch", "2.4.1")
    env.conda("cuda-cudart", "12.4.127")
    finding = only(run(env), "conda-base-env")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["prefix"] == str(env.prefix)
    assert finding.evidence["base_marker"] == str(env.prefix / "condabin")
    assert "conda pytorch 2.4.1" in finding.evidence["packages"]


def test_conda_base_with_conda_only(tmp_path: Path, elf, run: Run) -> None:
    env = FakeEnv(tmp_path / "miniconda3", elf)
    env.site.mkdir(parents=True)
    (env.prefix / "condabin").mkdir()
    env.conda("conda", "24.7.1")
    assert run(env).findings == ()
