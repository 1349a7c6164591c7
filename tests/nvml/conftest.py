"""The stand-in NVML, built once per session, and a runner for ``gpuenv detect``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.nvml import standin
from tests.nvml.standin import DetectRun, RunDetect


@pytest.fixture(scope="session")
def standin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the compiled stand-in ``libnvidia-ml.so.1``."""
    if standin.compiler() is None:
        pytest.skip("no C compiler (gcc or cc) on PATH: cannot build the stand-in NVML")
    try:
        return standin.build(tmp_path_factory.mktemp("standin-nvml"))
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"building the stand-in NVML failed:\n{exc.stderr}")


def _clean_env(library_path: str, extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUENV_OVERRIDE_", "GPUENV_FAKE_NVML"))
    }
    env["LD_LIBRARY_PATH"] = library_path
    env.update(extra)
    return env


@pytest.fixture
def standin_env(standin_dir: Path) -> Callable[[standin.FakeNvml], dict[str, str]]:
    """The environment for a subprocess that should load the stand-in as NVML."""
    return lambda fake: _clean_env(str(standin_dir), {standin.SPEC_VAR: fake.spec()})


@pytest.fixture
def run_detect(standin_dir: Path, tmp_path: Path) -> RunDetect:
    """``run_detect(FakeNvml(...) | None, *args, env={...}, library=True)`` runs
    ``python -m gpuenv detect`` in a subprocess with the stand-in first on the loader's
    path (``library=False``: an empty folder instead, as if NVML were not installed)."""

    def run(
        fake: standin.FakeNvml | None,
        *args: str,
        env: Mapping[str, str] | None = None,
        library: bool = True,
    ) -> DetectRun:
        extra = dict(env or {})
        if fake is not None:
            extra[standin.SPEC_VAR] = fake.spec()
        empty = tmp_path / "no-nvml"
        empty.mkdir(exist_ok=True)
        completed = subprocess.run(
            [sys.executable, "-m", "gpuenv", "detect", *args],
            env=_clean_env(str(standin_dir if library else empty), extra),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return DetectRun(completed.returncode, completed.stdout, completed.stderr)

    return run
