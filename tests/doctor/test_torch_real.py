"""The doctor against a real torch venv (marked `torch`): $GPUENV_TEST_TORCH_PYTHON, else
this interpreter when it can import torch. A stray CUDA 12 wheel (its dist-info, RECORD
with real hashes and a real libcudnn.so.9 built with gcc) is planted in a directory on
PYTHONPATH; nothing is written into the torch venv itself.

The doctor must ask the real interpreter (PYTHONPATH honoured), judge its real torch
(version.py, RECORD of thousands of files), read torch's own preload list from its
__init__.py, name the stray wheel with the variable responsible and a fix that takes it
off the path (not a pip uninstall, which would remove it from wherever it lives), and
run the real probe with --deep.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuenv.doctor._catalog import torch_preload
from tests.doctor.conftest import GCC, ElfFactory, FakeEnv

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def _torch_python() -> Path | None:
    explicit = os.environ.get("GPUENV_TEST_TORCH_PYTHON", "").strip()
    if explicit:
        return Path(explicit)
    if importlib.util.find_spec("torch") is not None:
        return Path(sys.executable)
    return None


@pytest.fixture(scope="module")
def torch_python() -> Path:
    python = _torch_python()
    if python is None:
        pytest.skip("no interpreter with torch (set GPUENV_TEST_TORCH_PYTHON)")
    if GCC is None:
        pytest.skip("gcc builds the planted library")
    return python


def _plant(tmp_path: Path) -> Path:
    """A directory holding nvidia-cudnn-cu12 9.10.2.21 as pip would have installed it."""
    overlay = FakeEnv(tmp_path / "overlay", ElfFactory(_mkdir(tmp_path / "elf")))
    overlay.site.mkdir(parents=True)
    overlay.lib(overlay.site / "nvidia" / "cudnn" / "lib", "libcudnn.so.9", "libcudnn.so.9")
    overlay.dist("nvidia-cudnn-cu12", "9.10.2.21", files=["nvidia/cudnn/lib/libcudnn.so.9"])
    return overlay.site


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _doctor(python: Path, environ: dict[str, str], *args: str) -> tuple[int, dict, float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpuenv", "doctor", "--python", str(python), "--json", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    seconds = time.perf_counter() - started
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout), seconds


def test_real_torch_with_a_stray_cu12_wheel_on_pythonpath(
    torch_python: Path, tmp_path: Path
) -> None:
    site = _plant(tmp_path)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GPUENV_FAKE", "PYTHON"))}
    environ.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"))
    environ.pop("LD_LIBRARY_PATH", None)
    code, data, seconds = _doctor(torch_python, environ)
    env = data["environment"]
    assert env["sys_path_from"] == "the interpreter"
    assert env["sys_path"][0] == {
        "path": str(site),
        "origin": "PYTHONPATH",
        "detail": f"PYTHONPATH entry 1 ({str(site)!r})",
    }
    torch = env["torch"]
    assert torch["version"].startswith("2.") and not torch["version_file"].startswith(str(site))
    preload = torch_preload(Path(torch["version_file"]).parent / "__init__.py")
    assert preload.source.endswith("(_preload_cuda_deps)") and len(preload.order) >= 10
    by_code = {f["code"]: f for f in data["findings"]}
    # A CPU torch never loads the planted wheel: it is a stray. A CUDA torch's preload
    # searches sys.path for libcudnn and finds the planted one first (seen with torch
    # 2.11 cu130 on an H200): then the library finding names it, and the stray one is
    # not repeated. Either way the fix takes the entry off PYTHONPATH.
    codes = ("stray-cuda-wheel", "cuda-library-mismatch", "duplicate-cuda-library")
    named = [f for f in data["findings"] if f["code"] in codes and str(site) in f["message"]]
    assert named, [(f["code"], f["message"]) for f in data["findings"]]
    stray = named[0]
    if stray["code"] == "stray-cuda-wheel":
        assert stray["evidence"]["distributions"][0]["name"] == "nvidia-cudnn-cu12"
    assert f"remove {site} from PYTHONPATH" in stray["fix"], stray["fix"]
    assert "uninstall" not in stray["fix"]
    # torch's own files match its RECORD: nothing of torch is reported
    assert "record-mismatch" not in by_code and "file-ownership-clash" not in by_code
    assert seconds < 30, f"doctor took {seconds:.1f} s on a real torch"
    if torch["cuda"] is None:
        assert stray["code"] == "stray-cuda-wheel"
        assert stray["severity"] == "info"  # a CPU torch never loads it
    assert code in (0, 1)


def test_real_torch_deep_runs_the_probe_as_the_user_runs_it(
    torch_python: Path, tmp_path: Path
) -> None:
    site = _plant(tmp_path)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GPUENV_FAKE", "PYTHON"))}
    environ.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"))
    _code, data, _seconds = _doctor(torch_python, environ, "--deep")
    deep = data["environment"]["deep"]
    assert deep["ran"] is True
    if deep["mode"] == "cpu":
        assert deep["passed"] is True, data["findings"]
        assert {"versions", "matmul:cpu", "linkage"} <= set(deep["checks"])
