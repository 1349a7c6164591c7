"""`gpuenv detect`: flags, rendering and exit codes, with injected HardwareFacts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from unittest.mock import create_autospec

import pytest

import gpuenv.hardware
from gpuenv.cli import COMMANDS, main
from gpuenv.errors import HardwareDetectionError
from gpuenv.hardware import (
    DetectOverrides,
    GpuFacts,
    HardwareFacts,
    HostPaths,
    WslFacts,
    facts_to_json,
)
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion
from tests.conftest import CliResult

H100 = GpuFacts(
    0,
    "NVIDIA H100 80GB HBM3",
    "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11",
    ComputeCapability(9, 0),
    81559 << 20,
)
T4 = GpuFacts(
    1, "Tesla T4", "GPU-7e570000-0001-4c6e-9a51-000000000001", ComputeCapability(7, 5), 15 << 30
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
    fake = create_autospec(gpuenv.hardware.detect, return_value=facts)  # the real signature
    monkeypatch.setattr(gpuenv.hardware, "detect", fake)


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
    broken = create_autospec(
        gpuenv.hardware.detect,
        side_effect=HardwareDetectionError("NVML failed while reading the GPUs: GPU is lost"),
    )
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


# ---- plan and init use detection ---------------------------------------------------

DETECT_SPEC = (
    '[project]\nname = "here"\n\n[stack]\npython = "3.11"\ntorch = "2.4.*"\n\n'
    '[targets.here]\ngpu = "detect"\ndriver = "detect"\n'
)


def test_plan_detects_this_machine(
    seen: list[DetectOverrides | None], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(DETECT_SPEC)
    result = cli("-f", str(spec), "plan", "--json")
    assert result.code == 0, result.err + result.out
    target = result.json()["targets"]["here"]
    assert target["cu_tag"] == "cu124"
    assert target["hardware"]["source"] == "measured"
    assert target["hardware"]["driver"] == "550.54.15"
    assert len(seen) == 1


def test_plan_with_facts_from_a_file(
    seen: list[DetectOverrides | None], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(DETECT_SPEC)
    facts = tmp_path / "node.json"
    facts.write_text(json.dumps(facts_to_json(replace(ONE_H100, gpus=(T4,)))))
    result = cli("-f", str(spec), "plan", "--facts", str(facts), "--json")
    assert result.code == 0, result.err + result.out
    hardware = result.json()["targets"]["here"]["hardware"]
    assert hardware["source"] == "file"
    assert hardware["compute_capabilities"] == ["7.5"]
    assert seen == [], "a facts file replaces detection"


def test_plan_does_not_detect_for_declared_targets(
    seen: list[DetectOverrides | None], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(DETECT_SPEC.replace('gpu = "detect"\ndriver = "detect"', 'gpu = "none"'))
    assert cli("-f", str(spec), "plan", "--json").code == 0
    assert seen == []


def test_plan_detect_without_a_gpu_is_exit_3(
    monkeypatch: pytest.MonkeyPatch, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    answer(monkeypatch, NO_GPU)
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(DETECT_SPEC)
    result = cli("-f", str(spec), "plan", "--json")
    assert result.code == 3
    assert "no NVIDIA driver is installed" in result.json()["error"]["message"]


def test_init_detect_writes_this_machine(
    seen: list[DetectOverrides | None], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    spec = tmp_path / "gpuenv.toml"
    result = cli("-f", str(spec), "init", "--detect", "--torch", "2.4")
    assert result.code == 0, result.err
    text = spec.read_text()
    assert 'gpu = "NVIDIA H100 80GB HBM3"' in text
    assert 'driver = "550.54.15"' in text
    plan = cli("-f", str(spec), "plan", "--json")
    assert plan.code == 0, plan.err
    (target,) = plan.json()["targets"].values()
    assert target["cu_tag"] == "cu124"
    assert target["hardware"]["source"] == "declared"


def test_init_detect_mixed_gpus_takes_the_constraining_one(
    monkeypatch: pytest.MonkeyPatch, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    answer(monkeypatch, replace(ONE_H100, gpus=(H100, T4)))
    spec = tmp_path / "gpuenv.toml"
    assert cli("-f", str(spec), "init", "--detect").code == 0
    assert 'gpu = "Tesla T4"' in spec.read_text()


def test_init_detect_unknown_gpu_uses_its_compute_capability(
    monkeypatch: pytest.MonkeyPatch, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    odd = GpuFacts(0, "NVIDIA Prototype X", None, ComputeCapability(8, 9))
    answer(monkeypatch, replace(ONE_H100, gpus=(odd,)))
    spec = tmp_path / "gpuenv.toml"
    assert cli("-f", str(spec), "init", "--detect").code == 0
    text = spec.read_text()
    assert "[targets.this-machine]" in text
    assert 'compute-capability = "8.9"' in text
    assert cli("-f", str(spec), "plan", "--json").code == 0


def test_init_detect_without_a_gpu_writes_a_cpu_target(
    monkeypatch: pytest.MonkeyPatch, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    answer(monkeypatch, NO_GPU)
    spec = tmp_path / "gpuenv.toml"
    result = cli("-f", str(spec), "init", "--detect")
    assert result.code == 0
    assert "no NVIDIA GPU here (no-driver): the target is CPU-only" in result.err
    assert 'gpu = "none"' in spec.read_text()


def test_init_detect_conflicts_with_gpu(
    seen: list[DetectOverrides | None], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    result = cli("-f", str(tmp_path / "gpuenv.toml"), "init", "--detect", "--gpu", "H100")
    assert result.code == 2
    assert seen == []
