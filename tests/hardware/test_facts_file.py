"""facts_to_json / facts_from_json: the detect --json format, and facts files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuenv.errors import FileFormatError
from gpuenv.hardware import (
    GpuFacts,
    HardwareFacts,
    WslFacts,
    facts_from_dict,
    facts_from_json,
    facts_to_json,
)
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

MIXED = HardwareFacts(
    gpus=(
        GpuFacts(
            0,
            "NVIDIA A100-SXM4-80GB",
            "GPU-a1000000-0000-4c6e-9a51-000000000000",
            ComputeCapability(8, 0),
            81920 << 20,
        ),
        GpuFacts(
            1,
            "Tesla T4",
            "GPU-7e570000-0001-4c6e-9a51-000000000001",
            ComputeCapability(7, 5),
            15360 << 20,
        ),
    ),
    driver_version=DriverVersion.parse("535.104.05"),
    cuda_driver_version=CudaVersion(12, 2),
    sources={"gpus": "nvml", "driver_version": "nvml", "cuda_driver_version": "nvml"},
    measured=True,
    notes=("a note",),
)


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(data))
    return path


def test_to_json_shape() -> None:
    data = facts_to_json(MIXED)
    assert data["gpus"][1] == {
        "index": 1,
        "name": "Tesla T4",
        "uuid": "GPU-7e570000-0001-4c6e-9a51-000000000001",
        "compute_capability": "7.5",
        "memory_total_bytes": 15360 << 20,
    }
    assert data["driver_version"] == "535.104.05"  # leading zero kept
    assert data["cuda_driver_version"] == "12.2"
    assert data["min_compute_capability"] == "7.5"
    assert data["measured"] is True
    assert data["wsl"] is None
    assert data["notes"] == ["a note"]
    json.dumps(data)  # serialisable as is


def test_round_trip_marks_facts_as_from_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, facts_to_json(MIXED))
    loaded = facts_from_json(path)
    assert loaded.gpus == MIXED.gpus
    assert loaded.driver_version == MIXED.driver_version
    assert loaded.cuda_driver_version == MIXED.cuda_driver_version
    assert loaded.min_compute_capability == ComputeCapability(7, 5)
    assert loaded.measured is False
    assert set(loaded.sources.values()) == {"file"}
    assert set(loaded.sources) == {
        "gpus",
        "driver_version",
        "cuda_driver_version",
        "compute_capability",
    }
    assert loaded.notes == ("a note", f"facts read from {path}")
    assert loaded.fingerprint().matches(MIXED.fingerprint())


def test_round_trip_with_wsl(tmp_path: Path) -> None:
    wsl = WslFacts(
        version=2,
        kernel_release="5.15.146.1-microsoft-standard-WSL2",
        wsl_lib_dir="/usr/lib/wsl/lib",
        host_driver_version=DriverVersion.parse("546.33"),
        shadowing_libcuda=("/usr/lib/x86_64-linux-gnu/libcuda.so.1",),
    )
    facts = HardwareFacts((), None, None, wsl=wsl, no_gpu_reason="driver-not-loaded")
    loaded = facts_from_json(write(tmp_path, facts_to_json(facts)))
    assert loaded.wsl == wsl
    assert loaded.no_gpu_reason == "driver-not-loaded"


def test_a_minimal_hand_written_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "gpus": [{"name": "H100", "compute_capability": "sm_90"}],
            "driver_version": "550.54.15",
            "cuda_driver_version": None,
        },
    )
    loaded = facts_from_json(path)
    assert loaded.gpus == (GpuFacts(0, "H100", None, ComputeCapability(9, 0)),)
    assert loaded.sources == {
        "gpus": "file",
        "driver_version": "file",
        "compute_capability": "file",
    }


def test_every_problem_is_listed_with_its_path(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "gpus": [
                {"name": "H100", "compute_capability": "nine", "memory_total_bytes": True},
                {"compute_capability": "9.0", "colour": "green"},
                "not an object",
            ],
            "driver_version": 550,
            "cuda_driver_version": "12.4.1",
            "extra": 1,
        },
    )
    with pytest.raises(FileFormatError) as caught:
        facts_from_json(path)
    message = caught.value.message
    assert message.startswith(f"{path}: not a hardware facts file:")
    for expected in (
        "gpus[0].compute_capability: 'nine' is not a compute capability",
        "gpus[0].memory_total_bytes: expected int, got true",
        "gpus[1].colour: unknown key",
        "gpus[1].name: expected str, got null",
        'gpus[2]: expected dict, got "not an object"',
        "driver_version: expected str, got 550",
        "cuda_driver_version: '12.4.1' is not a CUDA version",
        "extra: unknown key",
    ):
        assert expected in message
    assert caught.value.exit_code == 2
    assert caught.value.hint is not None


@pytest.mark.parametrize(
    ("content", "expected"),
    [("{", "invalid JSON"), ("[]", "(top level): expected dict, got []")],
)
def test_not_json_or_not_an_object(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "facts.json"
    path.write_text(content)
    with pytest.raises(FileFormatError, match=re.escape(expected)):
        facts_from_json(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="cannot read hardware facts"):
        facts_from_json(tmp_path / "nope.json")


def test_from_dict_names_its_origin() -> None:
    with pytest.raises(FileFormatError, match=r"^inline: "):
        facts_from_dict({"gpus": "all of them"}, origin="inline")
