"""`gpuenv detect`: flags, rendering and exit codes, with injected HardwareFacts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import gpuenv.hardware
from gpuenv.cli import COMMANDS, main
from gpuenv.errors import HardwareDetectionError
from gpuenv.hardware import DetectOverrides, GpuFacts, HardwareFacts, HostPaths, WslFacts
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

H100 = GpuFacts(
    0,
    "NVIDIA H100 80GB HBM3",
    "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11",
    ComputeCapability(9, 0),
    81559 << 20,
)
ONE_H100 = HardwareFacts(
    gpus=(H100,),
    driver_version=DriverVersion.parse("550.54.15"),
    cuda_driver_version=CudaVersion(12, 4),
    sources={
        "gpus": "nvml",
        "driver_version": "nvml",
        "cuda_driver_version": "nvml",
        "compute_capability": "nvml",
    },
    measured=True,
)
NO_GPU = HardwareFacts(
    gpus=(),
    driver_version=None,
    cuda_driver_version=None,
    measured=True,
    notes=("no GPU: no NVIDIA driver is installed",),
    no_gpu_reason="no-driver",
)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[DetectOverrides | None]:
    """Make ``hardware.detect`` answer ``ONE_H100``; records the overrides it got."""
    calls: list[DetectOverrides | None] = []

    def fake(
        *, overrides: DetectOverrides | None = None, host: HostPaths | None = None
    ) -> HardwareFacts:
        calls.append(overrides)
        return ONE_H100

    for name in ("GPUENV_OVERRIDE_CUDA_DRIVER", "GPUENV_OVERRIDE_COMPUTE_CAP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(gpuenv.hardware, "detect", fake)
    return calls


def answer(monkeypatch: pytest.MonkeyPatch, facts: HardwareFacts) -> None:
    monkeypatch.setattr(gpuenv.hardware, "detect", lambda **_: facts)


def test_registered() -> None:
    assert COMMANDS["detect"][0] == "gpuenv.cli.detect_cmd"


def test_json(seen: list[DetectOverrides | None], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["detect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11",
            "compute_capability": "9.0",
            "memory_total_bytes": 81559 << 20,
        }
    ]
    assert data["driver_version"] == "550.54.15"
    assert data["cuda_driver_version"] == "12.4"
    assert data["measured"] is True
    assert data["wsl"] is None
    assert seen == [DetectOverrides()]


def test_table(seen: list[DetectOverrides | None], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["detect"]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    assert header.split()[:2] == ["#", "GPU"]
    assert "NVIDIA H100 80GB HBM3" in row
    assert "79.6 GiB" in row
    assert "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11" in row
    assert "driver:             550.54.15  (nvml)" in out
    assert "CUDA (driver max):  12.4  (nvml)" in out


def test_no_gpu_is_exit_0_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(monkeypatch, NO_GPU)
    assert main(["detect"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no NVIDIA GPU (no-driver)\n")
    assert "note: no GPU: no NVIDIA driver is installed" in out
    assert main(["detect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"] == []
    assert data["no_gpu_reason"] == "no-driver"


def test_wsl_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    wsl = WslFacts(2, None, "/usr/lib/wsl/lib", DriverVersion.parse("546.33"))
    answer(monkeypatch, HardwareFacts((), None, None, wsl=wsl, no_gpu_reason="no-devices"))
    assert main(["detect"]) == 0
    assert "WSL2:               host driver 546.33" in capsys.readouterr().out


def test_overrides_are_read_from_the_environment(
    seen: list[DetectOverrides | None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GPUENV_OVERRIDE_CUDA_DRIVER", "12.1")
    monkeypatch.setenv("GPUENV_OVERRIDE_COMPUTE_CAP", "")
    assert main(["detect", "--json"]) == 0
    capsys.readouterr()
    assert seen == [DetectOverrides(cuda_driver_version=CudaVersion(12, 1))]


def test_bad_override_is_exit_2(
    seen: list[DetectOverrides | None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GPUENV_OVERRIDE_COMPUTE_CAP", "ninety")
    assert main(["detect", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "usage"
    assert error["message"].startswith("GPUENV_OVERRIDE_COMPUTE_CAP: ")
    assert seen == []


def test_detection_error_is_exit_5(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(**_: object) -> HardwareFacts:
        raise HardwareDetectionError("NVML failed while reading the GPUs: GPU is lost")

    monkeypatch.setattr(gpuenv.hardware, "detect", broken)
    assert main(["detect"]) == 5
    captured = capsys.readouterr()
    assert "gpuenv: error: NVML failed while reading the GPUs: GPU is lost" in captured.err
    assert "Traceback" not in captured.err


def test_parser_imports_nothing_heavy() -> None:
    code = (
        "import sys; from gpuenv.cli import build_parser; build_parser(only='detect');"
        "print(sorted(m for m in ('pynvml', 'rich', 'pydantic', 'gpuenv.hardware._detect')"
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
