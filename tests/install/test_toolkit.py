"""Where CUDA_HOME points after an install: a checked system toolkit, the prefix's own
(conda's nvcc), or NVIDIA's wheels gathered under <prefix>/cuda."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.errors import InstallError
from gpuenv.install import cuda_home
from gpuenv.lock.model import LockedHardware, LockedTarget, StackSummary


def target(cuda: str | None = "12.4") -> LockedTarget:
    return LockedTarget(
        name="h100",
        input_hash="sha256:0",
        platform="linux-64",
        hardware=LockedHardware(False, "H100", ("9.0",), "550.54.15", "12.4", "declared"),
        stack=StackSummary(
            "3.11",
            cuda,
            "cu124",
            "2.4.1",
            None,
            None,
            None,
            None,
            (),
            "https://torch.invalid/whl/cu124",
        ),
        virtual_packages={},
    )


def fake_nvcc(home: Path, release: str) -> None:
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(
        f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.131'\n"
    )
    nvcc.chmod(0o755)


def test_no_toolkit_means_no_cuda_home(tmp_path: Path) -> None:
    assert cuda_home(tmp_path, target(), None) is None


def test_a_system_toolkit_is_checked_against_the_locked_cuda(tmp_path: Path) -> None:
    good, bad = tmp_path / "cuda-12.4", tmp_path / "cuda-11.8"
    fake_nvcc(good, "12.4")
    fake_nvcc(bad, "11.8")
    assert cuda_home(tmp_path / "prefix", target(), f"system:{good}") == good
    with pytest.raises(
        InstallError, match=r"has CUDA 11\.8; the lock's torch is built for CUDA 12\.4"
    ):
        cuda_home(tmp_path / "prefix", target(), f"system:{bad}")
    with pytest.raises(InstallError, match="no nvcc"):
        cuda_home(tmp_path / "prefix", target(), f"system:{tmp_path / 'missing'}")


def test_conda_nvcc_in_the_prefix_is_its_own_toolkit(tmp_path: Path) -> None:
    fake_nvcc(tmp_path, "12.4")
    assert cuda_home(tmp_path, target(), "auto") == tmp_path


def test_nvidia_wheels_are_gathered_into_a_usual_layout(tmp_path: Path) -> None:
    nvidia = tmp_path / "lib" / "python3.11" / "site-packages" / "nvidia"
    fake_nvcc(nvidia / "cuda_nvcc", "12.4")
    (nvidia / "cuda_runtime" / "include").mkdir(parents=True)
    (nvidia / "cuda_runtime" / "include" / "cuda_runtime.h").write_text("")
    (nvidia / "cuda_runtime" / "lib").mkdir()
    (nvidia / "cuda_runtime" / "lib" / "libcudart.so.12").write_text("")
    home = cuda_home(tmp_path, target(), "12.4")
    assert home == tmp_path / "cuda"
    assert (home / "bin" / "nvcc").resolve() == (nvidia / "cuda_nvcc" / "bin" / "nvcc").resolve()
    assert (home / "include" / "cuda_runtime.h").exists()
    assert (home / "lib64" / "libcudart.so.12").exists()


def test_a_toolkit_the_lock_lacks_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="holds no nvcc"):
        cuda_home(tmp_path, target(), "auto")
