"""The value types: overrides from text, WSL problems, the constraining GPU."""

from __future__ import annotations

import pytest

from gpuenv.errors import UsageError
from gpuenv.hardware import DetectOverrides, GpuFacts, HardwareFacts, WslFacts
from gpuenv.versions import ComputeCapability, CudaVersion


def test_overrides_empty_means_absent() -> None:
    overrides = DetectOverrides.from_values(cuda_driver="", compute_cap=None)
    assert overrides == DetectOverrides()
    assert overrides.empty


def test_overrides_parse() -> None:
    overrides = DetectOverrides.from_values(cuda_driver="12.4", compute_cap="sm_86")
    assert overrides.cuda_driver_version == CudaVersion(12, 4)
    assert overrides.compute_capability == ComputeCapability(8, 6)
    assert not overrides.empty


@pytest.mark.parametrize(
    ("cuda", "cc", "variable"),
    [
        ("550.54.15", None, "GPUENV_OVERRIDE_CUDA_DRIVER"),
        (None, "ninety", "GPUENV_OVERRIDE_COMPUTE_CAP"),
    ],
)
def test_bad_override_is_a_usage_error(cuda: str | None, cc: str | None, variable: str) -> None:
    with pytest.raises(UsageError, match=f"^{variable}: ") as caught:
        DetectOverrides.from_values(cuda_driver=cuda, compute_cap=cc)
    assert caught.value.exit_code == 2
    assert caught.value.hint


def test_lowest_compute_capability_constrains() -> None:
    facts = HardwareFacts(
        gpus=(
            GpuFacts(0, "A100", None, ComputeCapability(8, 0)),
            GpuFacts(1, "T4", None, ComputeCapability(7, 5)),
            GpuFacts(2, "unknown", None, None),
        ),
        driver_version=None,
        cuda_driver_version=None,
    )
    assert facts.min_compute_capability == ComputeCapability(7, 5)
    assert HardwareFacts((), None, None).min_compute_capability is None


def test_wsl_problems() -> None:
    healthy = WslFacts(2, "5.15.146.1-microsoft-standard-WSL2", "/usr/lib/wsl/lib", None)
    assert healthy.problems == ()
    shadowed = WslFacts(
        2,
        None,
        "/usr/lib/wsl/lib",
        None,
        nvml_library="/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        linux_driver_files=("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",),
    )
    assert len(shadowed.problems) == 2
    assert "NVML loaded /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" in shadowed.problems[1]
    loaded_from_host = WslFacts(
        2, None, "/usr/lib/wsl/lib", None, nvml_library="/usr/lib/wsl/lib/libnvidia-ml.so.1"
    )
    assert loaded_from_host.problems == ()


def test_overrides_from_environ() -> None:
    environ = {"GPUENV_OVERRIDE_CUDA_DRIVER": " 12.4 ", "GPUENV_OVERRIDE_COMPUTE_CAP": ""}
    assert DetectOverrides.from_environ(environ) == DetectOverrides(CudaVersion(12, 4), None)
    assert DetectOverrides.from_environ({}).empty
