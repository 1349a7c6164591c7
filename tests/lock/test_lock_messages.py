"""What lock says when it fails or races: a pip conflict names its target, and says when
the project's own dependencies were in the request (x-transformers with torch 2.4.*: "no
set of pip packages fits ...: Because torch-einops-utils>=0.1.12 depends on torch>=2.5"
named neither the target nor where torch-einops-utils came from); a lock another gpuenv
wrote meanwhile is not called unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.errors import NoCompatiblePlan
from gpuenv.lock import backends
from gpuenv.lock.model import PipRequest
from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip

SPEC = """[project]
name = "x-transformers"
[stack]
python = "3.11"
torch = "2.4.*"
torchvision = false
torchaudio = false
[targets.cpu]
gpu = "none"
"""


def test_a_pip_conflict_names_the_target_and_the_projects_files(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip, conda = FakePip(), FakeConda()
    monkeypatch.setattr(backends, "resolvers", lambda: (pip, conda))

    def conflict(self: FakePip, request: PipRequest):
        raise NoCompatiblePlan(
            "no set of pip packages fits Python 3.11 on x86_64-manylinux_2_28: Because "
            "torch-einops-utils>=0.1.12 depends on torch>=2.5 ..."
        )

    monkeypatch.setattr(FakePip, "resolve", conflict)
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    (tmp_path / "pyproject.toml").write_text(
        "[build-system]\nrequires = ['hatchling']\nbuild-backend = 'hatchling.build'\n"
        "[project]\nname = 'x-transformers'\nversion = '2.26.4'\n"
        "dependencies = ['torch-einops-utils>=0.1.12']\n"
    )
    result = cli("-f", str(tmp_path / "gpuenv.toml"), "lock")
    assert result.code == 3, result.err
    assert "error: target cpu: no set of pip packages fits" in result.err
    assert f"the project's own dependencies, from {tmp_path / 'pyproject.toml'}" in result.err


def test_a_lock_another_gpuenv_wrote_meanwhile_is_not_called_unchanged(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lock` beside an `install` that relocked first printed "cpu: updated ... tqdm:
    4.66.3 -> 4.66.4" and then "gpuenv.lock unchanged"."""
    from gpuenv.lock import format as lock_format

    pip, conda = FakePip(), FakeConda()
    monkeypatch.setattr(backends, "resolvers", lambda: (pip, conda))
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    assert cli("-f", str(spec), "lock").code == 0
    spec.write_text(SPEC + '[pip]\ndependencies = ["tokenizers"]\n')
    real = lock_format.write_lock_file

    def raced(path: Path, lock: object, **kwargs: object) -> lock_format.LockWrite:
        wrote = real(path, lock, **kwargs)  # type: ignore[arg-type]
        return lock_format.LockWrite(False, wrote.digest)  # as if the bytes were there

    monkeypatch.setattr(lock_format, "write_lock_file", raced)
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    assert (
        "cpu: updated" in result.out and "already held this lock, written meanwhile" in result.out
    )
