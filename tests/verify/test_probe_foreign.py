"""The probe's macOS (MPS) and Windows (CUDA through nvcuda.dll) code paths, exercised
with stand-ins: gpuenv's tests run on Linux, so neither runs here on its real system
(issue #26)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuenv.verify import Expectations
from tests.verify.conftest import check, load_probe_module, probe

MAC = Expectations(torch="2.4.1", cpu=True, mps=True, check_budget=20)
MAC_TORCH = {"version": "2.4.1", "cuda": None, "torchvision": None, "torchaudio": None}


def test_a_mac_build_runs_a_product_on_the_apple_gpu() -> None:
    result = probe(dict(MAC_TORCH, mps=True), MAC)
    assert result.passed, [(c.name, c.detail) for c in result.checks]
    names = [c.name for c in result.checks]
    assert names == ["torch-import", "versions", "matmul:cpu", "mps", "linkage"]
    mps = check(result, "mps")
    assert "on the Apple GPU" in mps.detail and mps.data["device"] == "mps"
    assert "mps" in MAC.required_checks()


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"mps": False}, "no Apple GPU is usable"),
        ({"mps": False, "mps_built": False}, "built without MPS"),
    ],
)
def test_no_mps_fails_the_mac_target(config: dict[str, object], why: str) -> None:
    result = probe(dict(MAC_TORCH, **config), MAC)
    assert not result.passed
    mps = check(result, "mps")
    assert not mps.passed and why in mps.detail
    assert "Apple silicon" in (mps.fix or "")


def test_wrong_results_on_the_apple_gpu_fail() -> None:
    result = probe(dict(MAC_TORCH, mps=True, mps_error=0.5), MAC)
    assert not check(result, "mps").passed


def test_a_linux_cpu_target_has_no_mps_check() -> None:
    cpu = Expectations(torch="2.4.1", cpu=True, check_budget=20)
    result = probe(dict(MAC_TORCH, mps=True), cpu)
    assert "mps" not in [c.name for c in result.checks]


def test_on_windows_the_driver_is_asked_through_nvcuda(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "name", "nt")
    windows = load_probe_module()
    monkeypatch.undo()
    assert windows.DRIVER_LIBRARY == "nvcuda.dll"
    assert load_probe_module().DRIVER_LIBRARY == "libcuda.so.1"

    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build the stand-in driver library")
    source = tmp_path / "nvcuda.c"
    source.write_text("int cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n")
    library = tmp_path / "nvcuda.dll"  # a Linux shared object under the Windows name
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    monkeypatch.setattr(windows, "DRIVER_LIBRARY", str(library))
    monkeypatch.setattr(windows, "_mapped", lambda: [])
    probe_ = windows.Probe({"cuda": "13.0"}, io.StringIO())
    probe_.torch = SimpleNamespace(_C=SimpleNamespace(), version=SimpleNamespace(cuda="13.0"))
    assert probe_.driver_cuda() == ("13.0", "cuDriverGetVersion")

    monkeypatch.setattr(windows.sys, "platform", "win32")
    passed, detail, _fix, _data = probe_.check_linkage()
    assert passed and "not checked on win32" in detail
