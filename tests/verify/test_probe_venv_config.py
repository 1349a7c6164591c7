"""An interpreter whose ``pyvenv.cfg`` is a FIFO blocks before it runs a line, so the
probe would only end at its timeout (300 s by default): verify says why at once."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from gpuenv.verify import run_probe
from tests.verify.conftest import LOCKED, fake_env


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_venv_whose_config_is_no_file_fails_at_once_naming_it(tmp_path: Path, kind: str) -> None:
    (tmp_path / "bin").mkdir()
    python = tmp_path / "bin" / "python"
    python.symlink_to(sys.executable)
    cfg = tmp_path / "pyvenv.cfg"
    if kind == "fifo":
        os.mkfifo(cfg)
    else:
        cfg.symlink_to("/dev/zero")
    started = time.monotonic()
    result = run_probe(python, LOCKED, env=fake_env({}), timeout=60)
    assert time.monotonic() - started < 5
    assert not result.passed
    assert result.reason is not None and str(cfg) in result.reason
    assert "not a regular file" in result.reason
