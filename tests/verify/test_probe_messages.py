"""The probe says what happened: a stub libcuda that loaded, a cuDNN that loaded and
failed torch's version check, CUDA libraries from another environment (real probe, real
interpreter, the fake torch, real shared objects built with gcc)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpuenv.verify import run_probe
from tests.verify.conftest import LOCKED, check, fake_env, make_site

GCC = shutil.which("gcc") or shutil.which("cc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc builds the shared objects")

STUB_C = "int cuDriverGetVersion(int *v) { *v = 0; return 34; }\n"  # CUDA_ERROR_STUB_LIBRARY


def build(
    directory: Path, name: str, soname: str, source: str = "int x(void){return 0;}\n"
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / f"{name}.c"
    src.write_text(source)
    out = directory / name
    subprocess.run(
        [GCC or "gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    src.unlink()
    return out


@needs_gcc
def test_a_stub_libcuda_that_loaded_is_named(tmp_path: Path) -> None:
    stubs = tmp_path / "cuda" / "lib64" / "stubs"
    stub = build(stubs, "libcuda.so.1", "libcuda.so.1", STUB_C)
    env = fake_env({"driver_cuda": 0, "available": False}, LD_LIBRARY_PATH=str(stubs))
    result = run_probe(Path(sys.executable), LOCKED, env=env, timeout=60, isolated=False)
    driver = check(result, "driver")
    assert not driver.passed
    assert "did not load" not in driver.detail
    assert f"a stub libcuda.so.1 loaded instead of the driver's: {stub}" in driver.detail
    assert "CUDA_ERROR_STUB_LIBRARY" in driver.detail
    assert f"LD_LIBRARY_PATH entry {stubs}" in driver.detail
    assert driver.fix is not None and driver.fix.startswith(f"remove {stubs} from LD_LIBRARY_PATH")
    assert driver.data["libcuda"]["rc"] == 34
    devices = check(result, "devices")
    assert "stub libcuda.so.1" in devices.detail


def test_no_libcuda_at_all_says_it_did_not_load(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = fake_env({"driver_cuda": 0, "available": False}, LD_LIBRARY_PATH=str(empty))
    result = run_probe(Path(sys.executable), LOCKED, env=env, timeout=60, isolated=False)
    driver = check(result, "driver")
    if driver.data["libcuda"]["path"]:  # a machine with a real driver answers otherwise
        pytest.skip("this machine has a libcuda.so.1")
    assert "libcuda.so.1 did not load" in driver.detail


@needs_gcc
def test_cudnn_that_loaded_and_failed_torchs_version_check(tmp_path: Path) -> None:
    old = tmp_path / "cudnn8"
    lib = build(old, "libcudnn.so.8", "libcudnn.so.8")
    config = {"cudnn_mismatch": {"compiled": [9, 1, 0], "runtime": [8, 9, 7]}, "libs": [str(lib)]}
    env = fake_env(config, LD_LIBRARY_PATH=str(old))
    result = run_probe(Path(sys.executable), LOCKED, env=env, timeout=60, isolated=False)
    versions = check(result, "versions")
    assert "is None" not in versions.detail
    assert f"cuDNN 8.9.7 loaded from {lib} but failed torch's version check" in versions.detail
    cudnn = check(result, "cudnn")
    assert not cudnn.passed and "failed torch's version check" in cudnn.detail
    assert "compiled against cuDNN 9.1.0" in (cudnn.fix or "")
    assert f"remove {old} from LD_LIBRARY_PATH" in (cudnn.fix or "")


@needs_gcc
def test_libraries_from_another_environment_are_not_all_from_this_one(tmp_path: Path) -> None:
    site = make_site(tmp_path / "other", {})
    lib = build(site / "nvidia" / "cudnn" / "lib", "libcudnn.so.9", "libcudnn.so.9")
    env = fake_env({"libs": [str(lib)]})
    env["PYTHONPATH"] = str(site)
    result = run_probe(Path(sys.executable), LOCKED, env=env, timeout=60, isolated=False)
    linkage = check(result, "linkage")
    assert linkage.passed
    assert f"all from {sys.prefix}" not in linkage.detail
    assert f"1 CUDA library: 1 from {site} (PYTHONPATH entry 1)" == linkage.detail


def test_summarise_roots(probe_module: ModuleType, tmp_path: Path) -> None:
    summarise = probe_module.summarise_roots
    env_root = str(tmp_path / "env")
    paths = [f"{env_root}/lib/libcudart.so.12", f"{env_root}/lib/libcublas.so.12"]
    assert summarise(paths, [env_root], {}, env_root) == f"2 CUDA libraries, all from {env_root}"
    other = str(tmp_path / "other")
    mixed = summarise([paths[0], f"{other}/libnccl.so.2"], [env_root, other], {}, env_root)
    assert mixed == (
        f"2 CUDA libraries: 1 from {env_root}; 1 from {other} (outside this interpreter's "
        f"prefix {env_root})"
    )


def test_why_no_gpu_with_what_libcuda_did(probe_module: ModuleType) -> None:
    why = probe_module.why_no_gpu
    stub = {"path": "/usr/local/cuda/lib64/stubs/libcuda.so.1", "rc": 34, "error": None}
    assert "a stub libcuda.so.1 loaded" in why("12.4", None, {}, None, stub)[0]
    other = {"path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "rc": 35, "error": None}
    cause = why("12.4", None, {}, None, other)[0]
    assert "CUDA_ERROR_INSUFFICIENT_DRIVER" in cause and "did not load" not in cause
    missing = {"path": None, "rc": None, "error": "libcuda.so.1: cannot open shared object file"}
    assert "did not load: libcuda.so.1: cannot open" in why("12.4", None, {}, None, missing)[0]
