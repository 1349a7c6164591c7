"""The real probe in a real interpreter, against the fake torch: every GPU check's
decision, and every way a probe run can go wrong (none of which may pass)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.verify import Expectations, run_probe
from tests.verify.conftest import LOCKED, check, fake_env, probe

NO_SM90 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]
KERNEL = "no kernel image is available for execution on the device"


def test_a_passing_gpu_environment() -> None:
    result = probe()
    assert result.passed, (result.reason, [(c.name, c.detail) for c in result.failed_checks])
    assert result.reason is None and result.returncode == 0
    names = [c.name for c in result.checks]
    assert names == [
        "torch-import",
        "driver",
        "devices",
        "versions",
        "arch",
        "matmul:cuda:0",
        "cudnn",
        "torchvision",
        "torchaudio",
        "linkage",
        "nccl",
    ]
    matmul = check(result, "matmul:cuda:0")
    assert matmul.data["dtype"] == "bfloat16" and matmul.data["tflops"] > 0
    assert "TFLOP/s" in matmul.detail
    assert check(result, "devices").data["devices"][0]["uuid"].startswith("GPU-")
    assert "import_torch" in result.timings and "total" in result.timings


def test_framework_output_on_stdout_does_not_corrupt_the_json() -> None:
    assert probe({"print_stdout": "Hello from torch {not json"}).passed


def test_no_kernel_image_names_the_builds_that_have_the_arch() -> None:
    result = probe({"arch": NO_SM90, "fail": {"kernel": KERNEL}})
    assert not result.passed
    arch = check(result, "arch")
    assert not arch.passed
    assert "sm_90" in arch.detail and "not in the arch list" in arch.detail
    assert arch.fix == "install a torch build that has sm_90: cu118, cu121, cu124"
    matmul = check(result, "matmul:cuda:0")
    assert not matmul.passed and "no kernel image" in matmul.detail
    assert "sm_90" in (matmul.fix or "") and "cu124" in (matmul.fix or "")


def test_a_gpu_newer_than_every_build_says_so() -> None:
    blackwell = [
        {"name": "NVIDIA GeForce RTX 5090", "cc": [12, 0], "memory": 34e9, "uuid": "GPU-5"}
    ]
    result = probe({"devices": blackwell})
    arch = check(result, "arch")
    assert not arch.passed and "sm_120" in arch.detail
    assert "newer cu build" in (arch.fix or "")


def test_cudnn_none_names_the_libcudnn_the_loader_found(tmp_path: Path) -> None:
    stray = tmp_path / "old-cudnn"
    stray.mkdir()
    (stray / "libcudnn.so.8").write_bytes(b"")
    result = probe({"cudnn": None}, LD_LIBRARY_PATH=str(stray))
    assert not result.passed
    cudnn = check(result, "cudnn")
    assert not cudnn.passed and "cuDNN did not load" in cudnn.detail
    assert str(stray / "libcudnn.so.8") in (cudnn.fix or "")
    assert "nvidia-cudnn-cu12" in (cudnn.fix or "")
    versions = check(result, "versions")
    assert not versions.passed and "cudnn is None" in versions.detail


def test_a_cpu_build_on_a_gpu_target_fails_and_says_why() -> None:
    result = probe({"version": "2.4.1+cpu", "cuda": None})
    assert not result.passed
    devices = check(result, "devices")
    assert not devices.passed and "CPU-only build" in devices.detail
    assert "cuXYZ" in (devices.fix or "") or "CUDA build" in (devices.fix or "")
    versions = check(result, "versions")
    assert "CPU-only build" in versions.detail and "cu124" in (versions.fix or "")


def test_version_mismatch_names_both_versions() -> None:
    result = probe({"version": "2.4.0+cu121", "cuda": "12.1", "nccl": [2, 18, 1]})
    versions = check(result, "versions")
    assert not versions.passed
    assert "torch is 2.4.0+cu121, the lock says 2.4.1+cu124" in versions.detail
    assert "torch.version.cuda is 12.1, the lock says 12.4" in versions.detail
    assert "nccl is 2.18.1, the lock says 2.20.5" in versions.detail


def test_companion_version_mismatch_fails_their_checks() -> None:
    result = probe({"torchvision": "0.18.0+cu121", "torchaudio": None})
    assert "torchvision is 0.18.0+cu121" in check(result, "torchvision").detail
    audio = check(result, "torchaudio")
    assert not audio.passed and "No module named 'torchaudio'" in audio.detail


def test_torchvision_nms_failing_on_the_gpu() -> None:
    message = "Could not run 'torchvision::nms' with arguments from the 'CUDA' backend"
    nms = check(probe({"fail": {"nms": message}}), "torchvision")
    assert not nms.passed and "torchvision::nms" in nms.detail


def test_driver_older_than_the_locked_cuda() -> None:
    driver = check(probe({"driver_cuda": 12020}), "driver")
    assert not driver.passed and "older than the locked CUDA 12.4" in driver.detail
    assert "upgrade the NVIDIA driver" in (driver.fix or "")


def test_no_driver_and_hidden_gpus_say_why() -> None:
    result = probe({"driver_cuda": 0, "available": False})
    assert "no NVIDIA driver" in check(result, "driver").detail
    assert "is_available() is False" in check(result, "devices").detail
    hidden = probe({}, CUDA_VISIBLE_DEVICES="")
    assert not hidden.passed
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in check(hidden, "devices").detail


def test_linkage_from_outside_the_prefix_names_path_and_entry(
    tmp_path: Path, build_so: Callable[[Path, str], Path]
) -> None:
    prefix = tmp_path / "prefix"
    cudart = build_so(prefix / "lib", "libcudart.so.12")
    stray_dir = tmp_path / "other-env" / "lib"
    stray = build_so(stray_dir, "libnccl.so.2")
    expect = dataclasses.replace(LOCKED, prefix=prefix)
    config = {"libs": [str(cudart), "libnccl.so.2"]}  # the second found through the loader
    result = probe(config, expect, LD_LIBRARY_PATH=f"{tmp_path / 'empty'}:{stray_dir}")
    linkage = check(result, "linkage")
    assert not linkage.passed and not result.passed
    assert str(stray) in linkage.detail
    assert f"LD_LIBRARY_PATH entry {stray_dir}" in linkage.detail
    assert linkage.fix and f"remove {stray_dir} from LD_LIBRARY_PATH" in linkage.fix
    kinds = {Path(lib["path"]).name: lib["kind"] for lib in linkage.data["libraries"]}
    assert kinds == {"libcudart.so.12": "inside", "libnccl.so.2": "outside"}

    ok = probe({"libs": [str(cudart)]}, expect)
    assert check(ok, "linkage").passed and ok.passed


def test_cpu_target_passes_a_cpu_build_and_refuses_mapped_cuda_libraries(
    tmp_path: Path, build_so: Callable[[Path, str], Path]
) -> None:
    cpu = Expectations(torch="2.4.1+cpu", cpu=True, check_budget=20)
    config = {"version": "2.4.1+cpu", "cuda": None, "torchvision": None, "torchaudio": None}
    result = probe(config, cpu)
    assert result.passed, [(c.name, c.detail) for c in result.checks]
    assert [c.name for c in result.checks] == ["torch-import", "versions", "matmul:cpu", "linkage"]
    assert result.mode == "cpu"

    lib = build_so(tmp_path / "cuda", "libcudart.so.12")
    mapped = probe(dict(config, libs=[str(lib)]), cpu)
    linkage = check(mapped, "linkage")
    assert not linkage.passed and str(lib) in linkage.detail

    cuda_build = probe({}, cpu)
    assert "is a CUDA 12.4 build; the target is CPU-only" in check(cuda_build, "versions").detail


def test_nccl_is_skipped_with_one_gpu() -> None:
    nccl = check(probe(), "nccl")
    assert nccl.passed and nccl.status == "skip" and "one GPU" in nccl.detail


TWO_GPUS = [
    {"name": "NVIDIA H100 80GB HBM3", "cc": [9, 0], "memory": 85e9, "uuid": "GPU-a"},
    {"name": "NVIDIA H100 80GB HBM3", "cc": [9, 0], "memory": 85e9, "uuid": "GPU-b"},
]


def test_nccl_all_reduce_across_spawned_processes() -> None:
    result = probe({"devices": TWO_GPUS})
    assert result.passed, [(c.name, c.detail) for c in result.failed_checks]
    assert {"matmul:cuda:0", "matmul:cuda:1"} <= {c.name for c in result.checks}
    nccl = check(result, "nccl")
    assert nccl.status == "pass" and nccl.data["values"] == {"0": 3.0, "1": 3.0}


def test_nccl_failure_fails() -> None:
    result = probe({"devices": TWO_GPUS}, GPUENV_FAKE_NCCL_FAIL="1")
    nccl = check(result, "nccl")
    assert not nccl.passed and "unhandled system error" in nccl.detail and not result.passed


def test_extra_statements() -> None:
    expect = dataclasses.replace(LOCKED, extra=("import json", "import flash_attn_missing"))
    result = probe({}, expect)
    assert check(result, "extra:0").passed
    extra = check(result, "extra:1")
    assert not extra.passed and "No module named 'flash_attn_missing'" in extra.detail
    assert "install the missing package" in (extra.fix or "")


@pytest.mark.parametrize("where", ["import", "cuda_init", "matmul", "conv"])
def test_a_segfault_is_a_failure_never_a_pass(where: str) -> None:
    result = probe({"crash": where, "crash_how": "segv"})
    assert not result.passed
    assert result.reason and "SIGSEGV" in result.reason
    assert result.report_checks()[-1].name == "probe"


def test_a_silent_exit_zero_is_a_failure() -> None:
    result = probe({"crash": "matmul", "crash_how": "exit0"})
    assert not result.passed and result.returncode == 0
    assert (
        result.reason == "the probe exited 0 without output while running the matmul:cuda:0 check"
    )


def test_a_hung_check_is_ended_by_the_probe_watchdog() -> None:
    expect = dataclasses.replace(LOCKED, check_budget=1.0)
    result = probe({"hang": "matmul"}, expect, timeout=60)
    assert not result.passed and result.returncode == 3
    hung = check(result, "matmul:cuda:0")
    assert not hung.passed and "did not finish within 1 s" in hung.detail
    assert result.reason and "time budget" in result.reason
    assert result.seconds < 30


def test_a_probe_that_outlives_the_timeout_is_killed_and_fails() -> None:
    expect = dataclasses.replace(LOCKED, check_budget=600, time_budget=600)
    result = probe({"hang": "conv"}, expect, timeout=4)
    assert not result.passed and result.checks == ()
    assert result.reason == (
        "the probe did not finish within 4 s and was killed (it was running the cudnn check)"
    )


def test_the_overall_budget_stops_further_checks() -> None:
    expect = dataclasses.replace(LOCKED, time_budget=1.0, check_budget=600)
    result = probe({"hang": "matmul"}, expect, timeout=60)
    assert not result.passed
    assert "probe's time budget of 1 s" in check(result, "matmul:cuda:0").detail


def test_isolated_mode_ignores_pythonpath() -> None:
    result = run_probe(Path(sys.executable), LOCKED, env=fake_env({}), timeout=30, isolated=True)
    assert not result.passed
    assert "No module named 'torch'" in check(result, "torch-import").detail


def test_a_missing_library_at_import_is_reported() -> None:
    result = probe({"libs": ["libcudart-gpuenv-missing.so.12"]})
    imported = check(result, "torch-import")
    assert not imported.passed and "libcudart-gpuenv-missing.so.12" in imported.detail


def test_a_different_arch_list_is_noted_but_coverage_decides() -> None:
    expect = dataclasses.replace(LOCKED, arch_list=("8.0", "9.0+PTX"))
    arch = check(probe({}, expect), "arch")
    assert arch.passed and "arch list differs from the lock's" in arch.detail
    assert "missing compute_90" in arch.detail
