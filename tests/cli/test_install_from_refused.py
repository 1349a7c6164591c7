"""A refused ``install --from`` leaves the project as it was (issue 24, finding 9): the
archive's spec and lock were written into the directory first and stayed there when
the install was then refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.pack import PackRequest, prepare, write
from gpuenv.store import Store
from tests.conftest import CliResult
from tests.pack.test_archive import make_lock


def test_a_refused_install_from_writes_nothing_into_the_project(
    tmp_path: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = make_lock(tmp_path / "origin")
    spec = tmp_path / "packed.toml"
    spec.write_text('[project]\nname = "attack"\n')  # no [stack]: the spec reader refuses it
    archive = tmp_path / "a.tar"
    write(prepare(PackRequest(lock, ("cpu",), "attack", spec, Store(tmp_path / "s"))), archive)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "air-store"))
    result = cli("install", "--from", str(archive))
    assert result.code == 2, result.err
    assert sorted(p.name for p in project.iterdir()) == [], "no spec or lock left behind"
