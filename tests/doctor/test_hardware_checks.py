"""The driver, the arch list and the wheel's source, against injected hardware facts."""

from __future__ import annotations

from gpuenv.doctor import Severity
from tests.doctor.conftest import NO_GPU, FakeEnv, Run, codes, hardware, only


def test_driver_older_than_the_build(clean_env: FakeEnv, run: Run) -> None:
    facts = hardware(driver="470.57.02", cuda="11.4")
    finding = only(run(clean_env, facts=facts), "driver-too-old")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["driver_version"] == "470.57.02"
    assert finding.evidence["driver_cuda"] == "11.4"
    assert finding.evidence["environment_cuda"] == "12.4"
    assert finding.evidence["environment_cuda_from"].endswith("torch/version.py")


def test_driver_within_minor_version_compatibility(clean_env: FakeEnv, run: Run) -> None:
    finding = only(
        run(clean_env, facts=hardware(driver="535.104.05", cuda="12.2")), "driver-too-old"
    )
    assert finding.severity is Severity.WARNING
    assert finding.evidence["minor_compat_driver_floor"] is not None


def test_driver_cuda_derived_from_driver_version(clean_env: FakeEnv, run: Run) -> None:
    finding = only(run(clean_env, facts=hardware(driver="450.80.02", cuda=None)), "driver-too-old")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["driver_cuda"].startswith("11.")


def test_gpu_newer_than_the_arch_list(clean_env: FakeEnv, run: Run) -> None:
    facts = hardware(cc="12.0", driver="570.86.15", cuda="12.8", name="NVIDIA GeForce RTX 5090")
    finding = only(run(clean_env, facts=facts), "arch-not-covered")
    assert finding.severity is Severity.ERROR
    ev = finding.evidence
    assert ev["compute_capability"] == "12.0"
    assert ev["build"] == "cu124"
    assert "9.0" in ev["arch_list"] and "12.0" not in ev["arch_list"]
    assert ev["arch_list_from"].startswith("gpuenv knowledge base")
    assert "sm_120" in finding.message


def test_gpu_older_than_the_arch_list(clean_env: FakeEnv, run: Run) -> None:
    facts = hardware(cc="3.7", driver="470.57.02", cuda="11.4", name="Tesla K80")
    report = run(clean_env, facts=facts)
    assert only(report, "arch-not-covered").evidence["gpu"] == "Tesla K80"


def test_cpu_torch_on_a_gpu_machine(clean_env: FakeEnv, run: Run) -> None:
    clean_env.torch(version="2.4.1+cpu", cuda=None)
    report = run(clean_env)
    finding = only(report, "cpu-torch-with-gpu")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["torch"] == "2.4.1+cpu"
    assert finding.evidence["gpus"] == ["NVIDIA H100 80GB HBM3 (9.0)"]
    assert finding.evidence["driver_version"] == "550.54.15"


def test_cpu_torch_without_gpu_is_fine(clean_env: FakeEnv, run: Run) -> None:
    clean_env.torch(version="2.4.1+cpu", cuda=None)
    assert "cpu-torch-with-gpu" not in codes(run(clean_env, facts=NO_GPU))
