"""`gpuenv detect --json` through the real pynvml, against the stand-in NVML.

Each test runs gpuenv in a subprocess whose ``LD_LIBRARY_PATH`` puts the stand-in
``libnvidia-ml.so.1`` first, so pynvml's own ``CDLL("libnvidia-ml.so.1")`` loads it.
"""

from __future__ import annotations

import ctypes.util
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.nvml import standin
from tests.nvml.standin import FakeNvml, RunDetect, a100, h100, t4

H100_BYTES = 81559 * standin.MIB


def _host_has_nvidia() -> bool:
    return (
        Path("/proc/driver/nvidia").exists()
        or ctypes.util.find_library("nvidia-ml") is not None
        or shutil.which("nvidia-smi") is not None
    )


needs_no_real_driver = pytest.mark.skipif(
    _host_has_nvidia(),
    reason="this machine has a real NVIDIA driver, so 'no NVML library' cannot be simulated",
)


def test_one_h100_driver_550(run_detect: RunDetect) -> None:
    result = run_detect(FakeNvml(gpus=(h100(),), driver="550.54.15", cuda=12040), "--json")
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert facts["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": standin.fake_uuid(0),
            "compute_capability": "9.0",
            "memory_total_bytes": H100_BYTES,
        }
    ]
    assert facts["driver_version"] == "550.54.15"
    assert facts["cuda_driver_version"] == "12.4"
    assert facts["measured"] is True
    assert facts["no_gpu_reason"] is None
    assert facts["sources"] == {
        "driver_version": "nvml",
        "cuda_driver_version": "nvml",
        "gpus": "nvml",
        "compute_capability": "nvml",
    }
    assert set(facts) >= {
        "gpus",
        "driver_version",
        "cuda_driver_version",
        "sources",
        "measured",
        "wsl",
        "notes",
    }


def test_pynvml_calls_what_the_issue_lists(run_detect: RunDetect, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    result = run_detect(FakeNvml(gpus=(h100(),)), "--json", env={standin.LOG_VAR: str(log)})
    assert result.returncode == 0, result.stderr
    calls = log.read_text().split()
    assert calls[0] == "nvmlInitWithFlags"
    assert calls[-1] == "nvmlShutdown"
    assert set(calls) == {
        "nvmlInitWithFlags",
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetCount_v2",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetCudaComputeCapability",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlShutdown",
    }


def test_eight_h100s(run_detect: RunDetect) -> None:
    result = run_detect(FakeNvml(gpus=tuple(h100(i) for i in range(8))), "--json")
    assert result.returncode == 0, result.stderr
    gpus = result.json["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert len({g["uuid"] for g in gpus}) == 8
    assert {g["compute_capability"] for g in gpus} == {"9.0"}
    assert result.json["min_compute_capability"] == "9.0"


def test_a100_plus_t4_lowest_capability_constrains(run_detect: RunDetect) -> None:
    result = run_detect(FakeNvml(gpus=(a100(0), t4(1))), "--json")
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert [(g["name"], g["compute_capability"]) for g in facts["gpus"]] == [
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("Tesla T4", "7.5"),
    ]
    assert facts["min_compute_capability"] == "7.5"


def test_driver_not_loaded(run_detect: RunDetect) -> None:
    result = run_detect(FakeNvml(init_error=standin.NVML_ERROR_DRIVER_NOT_LOADED), "--json")
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert facts["gpus"] == []
    assert facts["no_gpu_reason"] == "driver-not-loaded"
    assert facts["notes"][0] == "no GPU: the NVIDIA driver is installed but not loaded"
    assert "nvml" not in facts["sources"].values()


def test_zero_devices(run_detect: RunDetect) -> None:
    result = run_detect(FakeNvml(gpus=()), "--json")
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert facts["gpus"] == []
    assert facts["no_gpu_reason"] == "no-devices"
    assert facts["driver_version"] == "550.54.15"
    assert facts["cuda_driver_version"] == "12.4"
    assert facts["sources"]["gpus"] == "nvml"
    assert any("sees no GPU" in note for note in facts["notes"])


def test_zero_devices_human_output(run_detect: RunDetect) -> None:
    result = run_detect(FakeNvml(gpus=()))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no NVIDIA GPU (no-devices)")
    assert "Traceback" not in result.stderr


def test_nvml_reporting_library_not_found_falls_back(run_detect: RunDetect) -> None:
    """NVML_ERROR_LIBRARY_NOT_FOUND from init is what pynvml raises for a missing
    library; the fallbacks run and, with nothing else here, report none."""
    result = run_detect(FakeNvml(init_error=standin.NVML_ERROR_LIBRARY_NOT_FOUND), "--json")
    assert result.returncode == 0, result.stderr
    notes = result.json["notes"]
    assert "NVML: libnvidia-ml.so.1 not found (no NVIDIA user-space driver)" in notes
    assert any(note.startswith("/proc:") for note in notes)
    assert any(note.startswith("nvidia-smi:") for note in notes)


@needs_no_real_driver
def test_library_absent_falls_back_then_reports_none(run_detect: RunDetect) -> None:
    result = run_detect(None, "--json", library=False)
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert facts["gpus"] == []
    assert facts["no_gpu_reason"] == "no-driver"
    assert facts["notes"][0] == "no GPU: no NVIDIA driver is installed"
    assert "NVML: libnvidia-ml.so.1 not found (no NVIDIA user-space driver)" in facts["notes"]
    assert "nvidia-smi: not found" in facts["notes"]


@needs_no_real_driver
def test_nvidia_smi_on_path_when_nvml_absent(run_detect: RunDetect, tmp_path: Path) -> None:
    fixtures = Path(__file__).parents[1] / "fixtures" / "hardware"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=*) cat '{fixtures / 'nvidia-smi-query-h100x2.csv'}' ;;\n"
        f"  *) cat '{fixtures / 'nvidia-smi-banner.txt'}' ;;\n"
        "esac\n"
    )
    smi.chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    result = run_detect(None, "--json", library=False, env={"PATH": path})
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert [g["uuid"] for g in facts["gpus"]] == [
        "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11",
        "GPU-0c1d2e3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5",
    ]
    assert facts["sources"] == {
        "driver_version": "nvidia-smi",
        "cuda_driver_version": "nvidia-smi",
        "gpus": "nvidia-smi",
        "compute_capability": "nvidia-smi",
    }
    assert facts["cuda_driver_version"] == "12.4"


def test_unsupported_fields_are_unknown_not_errors(run_detect: RunDetect) -> None:
    fake = FakeNvml(
        gpus=(h100(),),
        failures={
            "nvmlDeviceGetCudaComputeCapability": standin.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetMemoryInfo_v2": standin.NVML_ERROR_NOT_SUPPORTED,
        },
    )
    result = run_detect(fake, "--json")
    assert result.returncode == 0, result.stderr
    gpu = result.json["gpus"][0]
    assert gpu["compute_capability"] is None
    # v2 unsupported: the v1 call answers.
    assert gpu["memory_total_bytes"] == H100_BYTES


def test_implausible_numbers_are_rejected(run_detect: RunDetect) -> None:
    bogus = standin.FakeGpu("NVIDIA H100 80GB HBM3", standin.fake_uuid(0), "99.0", 0)
    result = run_detect(FakeNvml(gpus=(bogus,), cuda=0, driver="garbage"), "--json")
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert facts["cuda_driver_version"] is None
    assert facts["driver_version"] is None
    assert facts["gpus"][0]["compute_capability"] is None
    assert facts["gpus"][0]["memory_total_bytes"] is None
    notes = " ".join(facts["notes"])
    assert "CUDA driver version 0 is not plausible" in notes
    assert "'garbage' is not plausible" in notes


def test_lost_gpu_is_an_error_not_a_traceback(run_detect: RunDetect) -> None:
    fake = FakeNvml(gpus=(h100(),), failures={"nvmlDeviceGetName": standin.NVML_ERROR_GPU_IS_LOST})
    result = run_detect(fake, "--json")
    assert result.returncode == 5
    error = result.json["error"]
    assert error["kind"] == "hardware"
    assert "GPU is lost" in error["message"]
    assert "Traceback" not in result.stderr


def test_overrides_from_environment(run_detect: RunDetect) -> None:
    env = {"GPUENV_OVERRIDE_CUDA_DRIVER": "12.1", "GPUENV_OVERRIDE_COMPUTE_CAP": ""}
    result = run_detect(FakeNvml(gpus=(h100(),)), "--json", env=env)
    assert result.returncode == 0, result.stderr
    facts = result.json
    assert facts["cuda_driver_version"] == "12.1"
    assert facts["sources"]["cuda_driver_version"] == "override"
    assert facts["gpus"][0]["compute_capability"] == "9.0"  # empty override = absent
    assert facts["measured"] is False


def test_human_table(run_detect: RunDetect) -> None:
    result = run_detect(FakeNvml(gpus=(a100(0), t4(1))))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "NVIDIA A100-SXM4-80GB" in lines[1]
    assert standin.fake_uuid(1, "7e570000") in lines[2]  # piped: UUIDs are not cropped
    assert "driver:             550.54.15  (nvml)" in lines
    assert "lowest compute cap: 7.5  (nvml)" in lines


StandinEnv = Callable[[FakeNvml], dict[str, str]]


def _gpuenv(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuenv", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_init_detect_then_plan(standin_env: StandinEnv, tmp_path: Path) -> None:
    env = standin_env(FakeNvml(gpus=(a100(0), t4(1)), driver="550.54.15", cuda=12040))
    spec = str(tmp_path / "gpuenv.toml")
    init = _gpuenv(env, "-f", spec, "init", "--detect", "--torch", "2.4")
    assert init.returncode == 0, init.stderr
    assert 'gpu = "Tesla T4"' in Path(spec).read_text()
    plan = _gpuenv(env, "-f", spec, "plan", "--json")
    assert plan.returncode == 0, plan.stderr
    (target,) = json.loads(plan.stdout)["targets"].values()
    assert target["cu_tag"] == "cu124"
    assert target["hardware"]["compute_capabilities"] == ["7.5"]


def test_plan_detect_target_through_nvml(standin_env: StandinEnv, tmp_path: Path) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        '[project]\nname = "here"\n\n[stack]\npython = "3.11"\ntorch = "2.4.*"\n\n'
        '[targets.here]\ngpu = "detect"\ndriver = "detect"\n'
    )
    env = standin_env(FakeNvml(gpus=(h100(),), driver="535.104.05", cuda=12020))
    plan = _gpuenv(env, "-f", str(spec), "plan", "--json")
    assert plan.returncode == 0, plan.stderr
    target = json.loads(plan.stdout)["targets"]["here"]
    assert target["cu_tag"] == "cu121"
    assert target["hardware"]["source"] == "measured"


FINGERPRINT = (
    "import json, sys\n"
    "from gpuenv.hardware.fingerprint import fingerprint\n"
    "found = fingerprint(proc_root=sys.argv[1])\n"
    "print(json.dumps([found.driver_version, list(found.gpu_uuids), found.source]))\n"
)


def test_fingerprint_falls_back_to_nvml_without_proc(
    standin_env: StandinEnv, tmp_path: Path
) -> None:
    env = standin_env(FakeNvml(gpus=(h100(1), h100(0))))
    out = subprocess.run(
        [sys.executable, "-c", FINGERPRINT, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout) == [
        "550.54.15",
        [standin.fake_uuid(0), standin.fake_uuid(1)],
        "nvml",
    ]


def test_fingerprint_is_empty_when_nvml_cannot_start(
    standin_env: StandinEnv, tmp_path: Path
) -> None:
    env = standin_env(FakeNvml(init_error=standin.NVML_ERROR_DRIVER_NOT_LOADED))
    out = subprocess.run(
        [sys.executable, "-c", FINGERPRINT, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout) == [None, [], "none"]
