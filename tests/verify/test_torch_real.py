"""The probe against a real torch (marked `torch`): a CPU wheel must verify as a CPU
build; a CUDA wheel verifies on a GPU, or fails saying why when there is none.

The interpreter is $GPUENV_TEST_TORCH_PYTHON, else this one when it can import torch;
nothing is installed here, and the test is skipped when neither has torch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def _torch_python() -> Path | None:
    explicit = os.environ.get("GPUENV_TEST_TORCH_PYTHON", "").strip()
    if explicit:
        return Path(explicit)
    if importlib.util.find_spec("torch") is not None:
        return Path(sys.executable)
    return None


def test_verify_real_torch() -> None:
    python = _torch_python()
    if python is None:
        pytest.skip("no interpreter with torch (set GPUENV_TEST_TORCH_PYTHON)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUENV_FAKE")}
    proc = subprocess.run(
        [sys.executable, "-m", "gpuenv", "verify", "--python", str(python), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    data = json.loads(proc.stdout)
    names = [c["name"] for c in data["checks"]]
    if data["mode"] == "cpu":
        assert proc.returncode == 0, proc.stdout
        assert {"versions", "matmul:cpu", "linkage"} <= set(names)
        return
    devices = next((c for c in data["checks"] if c["name"] == "devices"), None)
    if devices is not None and not devices["passed"]:
        assert proc.returncode == 1
        assert "is_available() is False" in devices["detail"]
        return
    assert proc.returncode == 0, proc.stdout
    assert any(n.startswith("matmul:cuda:") for n in names)
