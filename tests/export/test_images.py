"""export dockerfile's base image from the lock's stack: CUDA, cuDNN major, toolkit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuenv.errors import UsageError
from gpuenv.export.dockerfile import base_image, images
from gpuenv.lock.model import CondaPackage, LockedHardware, LockedTarget, PipPackage, StackSummary

STACK = StackSummary(
    "3.11",
    "12.4",
    "cu124",
    "2.4.1",
    None,
    None,
    "9.1.0.70",
    "2.20.5",
    (),
    "https://torch.invalid/whl/cu124",
)


def _target(stack: StackSummary = STACK, **fields: object) -> LockedTarget:
    base = LockedTarget(
        "h100",
        "sha256:" + "0" * 64,
        "linux-64",
        LockedHardware(False, "H100", ("9.0",), "550.54.15", "12.4", "declared"),
        stack,
        {},
    )
    return replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cuda", "cudnn", "image"),
    [
        ("12.4", "9.1.0.70", "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"),
        ("12.1", "8.9.2.26", "nvidia/cuda:12.1.1-cudnn8-runtime-ubuntu22.04"),
        ("11.8", "8.7.0.84", "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04"),
        ("12.3", "9.0.0.312", "nvidia/cuda:12.3.2-cudnn9-runtime-ubuntu22.04"),
        # no cuDNN 9 image for CUDA 12.1, none at all for 12.8: the plain one
        ("12.1", "9.1.0.70", "nvidia/cuda:12.1.1-runtime-ubuntu22.04"),
        ("12.8", "9.7.1.26", "nvidia/cuda:12.8.2-runtime-ubuntu22.04"),
        ("12.6", None, "nvidia/cuda:12.6.3-runtime-ubuntu22.04"),
    ],
)
def test_the_image_carries_the_locks_cuda_and_cudnn(
    cuda: str, cudnn: str | None, image: str
) -> None:
    found, why = base_image(_target(replace(STACK, cuda=cuda, cudnn=cudnn)), images())
    assert found == image
    assert f"the lock: {cuda}" in why


def test_a_locked_toolkit_makes_it_devel() -> None:
    nvcc = CondaPackage("cuda-nvcc", "12.4.131", "h0", 0, "c", "linux-64", "u", "0" * 64, "0" * 32)
    assert base_image(_target(conda=(nvcc,)), images())[0].endswith("-cudnn-devel-ubuntu22.04")
    wheel = PipPackage("nvidia-cuda-nvcc-cu12", "12.4.131", "u", "0" * 64)
    assert "-devel-" in base_image(_target(pip=(wheel,)), images())[0]


def test_a_cpu_build_gets_plain_ubuntu_and_an_unknown_cuda_is_refused() -> None:
    cpu = replace(STACK, cuda=None, cu_tag="cpu", cudnn=None)
    assert base_image(_target(cpu), images())[0] == "ubuntu:22.04"
    with pytest.raises(UsageError, match=r"CUDA 10\.2"):
        base_image(_target(replace(STACK, cuda="10.2")), images())


def test_every_image_entry_says_where_it_came_from() -> None:
    data = images()
    for table in ("cuda-images", "cpu-image", "micromamba", "uv"):
        assert data[table]["source"] and data[table]["checked"]
    for cuda, release in data["cuda-images"]["releases"].items():
        assert release["version"].startswith(cuda + ".")


def test_the_cli_offers_exactly_the_formats_the_library_writes() -> None:
    from gpuenv import export
    from gpuenv.cli import export_cmd

    assert tuple(export.FORMATS) == export_cmd.FORMATS


@pytest.mark.parametrize("platform", ["win-64", "osx-arm64"])
@pytest.mark.parametrize("fmt", ["dockerfile", "slurm"])
def test_a_macos_or_windows_target_is_no_linux_image_or_slurm_job(platform: str, fmt: str) -> None:
    """An Ubuntu image installing win_amd64 wheels (which fails at its build) and a
    Slurm job for a Mac were written without a word: refused, naming the target."""
    from gpuenv.export import ExportContext, export
    from gpuenv.lock.model import Lock

    cpu = LockedHardware(True, None, (), None, None, "declared")
    target = _target(name="win", platform=platform, hardware=cpu)
    lock = Lock(spec_hash="sha256:" + "1" * 64, targets={"win": target})
    context = ExportContext(lock=lock, target=target, project="p")
    with pytest.raises(UsageError, match=f"target win is for {platform}: ") as refused:
        export(fmt, context)
    assert "gpuenv export requirements --target win" in str(refused.value.hint)
    for other in ("requirements", "pylock"):  # what that machine installs from
        assert export(other, context).text
