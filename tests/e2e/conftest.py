"""End-to-end fixtures: projects locked by real uv (and rattler) against the local
index and channel, installed by real uv into a store under the test's temp dir."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import PkgIndex

SPEC = """[project]
name = "e2e"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = "*"
torchaudio = "*"

[targets.h100]
gpu = "H100"
driver = "550.54.15"

[targets.cpu]
gpu = "none"

[pip]
index-url = "{default}"
torch-index = "{torch}"
dependencies = [{deps}]
"""


def spec_text(
    index: PkgIndex, deps: str = '"transformers>=4.44"', *, torch_base: str | None = None
) -> str:
    return SPEC.format(default=index.default_index, torch=torch_base or index.torch_base, deps=deps)


@dataclass
class Project:
    dir: Path
    home: Path  # GPUENV_HOME: the store
    env: dict[str, str]

    @property
    def spec(self) -> Path:
        return self.dir / "gpuenv.toml"

    @property
    def lock(self) -> Path:
        return self.dir / "gpuenv.lock"

    def gpuenv(
        self, *args: str, check: bool = False, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """``gpuenv ARGS`` in a real subprocess (exec, signals and exit codes are real)."""
        result = subprocess.run(
            [sys.executable, "-m", "gpuenv", *args],
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"gpuenv {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
            )
        return result

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "gpuenv", *args],
            cwd=self.dir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def make_project(tmp_path: Path, pkgindex: PkgIndex) -> Callable[..., Project]:
    counter = iter(range(100))

    def make(text: str | None = None, *, home: Path | None = None) -> Project:
        directory = tmp_path / f"project{next(counter)}"
        directory.mkdir()
        (directory / "gpuenv.toml").write_text(text or spec_text(pkgindex))
        store = home or tmp_path / "store"
        user_home = tmp_path / "home"
        user_home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "GPUENV_"))}
        env.update(
            GPUENV_HOME=str(store),
            HOME=str(user_home),
            XDG_CACHE_HOME=str(user_home / ".cache"),
            XDG_DATA_HOME=str(user_home / ".local" / "share"),
            XDG_CONFIG_HOME=str(user_home / ".config"),
            PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"),
        )
        return Project(directory, store, env)

    return make


def lock_with_conda(
    directory: Path, pkgindex: PkgIndex, local_channel: LocalChannel
) -> tuple[str, str]:
    """The e2e spec with a conda half (the local channel's cuda-version), locked for real
    in ``directory``: (spec text, lock text), for tests that edit a real lock."""
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { "cuda-version" = "12.4" }\npython = false\n'
    )
    (directory / "gpuenv.toml").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "GPUENV_"))}
    env.update(
        GPUENV_HOME=str(directory / "store"),
        XDG_CACHE_HOME=str(directory / "cache"),
        PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"),
    )
    subprocess.run(
        [sys.executable, "-m", "gpuenv", "lock"],
        cwd=directory,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return text, (directory / "gpuenv.lock").read_text()
