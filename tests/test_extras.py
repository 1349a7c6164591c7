"""conda-lock is the ``conda-lock`` extra: a plain install has none of its closure, and the
two commands that need it say how to add it (exit 2) instead of failing on an import."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from gpuenv._extras import missing_extra
from gpuenv.errors import UsageError
from tests.conftest import CliResult

IMPORTS = Path(__file__).resolve().parent / "fixtures" / "importers"


def _without_conda_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if conda-lock were not installed: every import of it raises ModuleNotFoundError."""
    for name in [m for m in sys.modules if m == "conda_lock" or m.startswith("conda_lock.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "conda_lock", None)


def test_conda_lock_is_an_extra_and_no_runtime_dependency() -> None:
    requirements = [Requirement(r) for r in importlib.metadata.requires("gpuenv") or []]
    runtime = {r.name for r in requirements if r.marker is None or "extra" not in str(r.marker)}
    assert "conda-lock" not in runtime
    extra = {
        r.name for r in requirements if r.marker and r.marker.evaluate({"extra": "conda-lock"})
    }
    assert "conda-lock" in extra
    linters = {"ruff", "mypy", "import-linter"}
    test = {r.name for r in requirements if r.marker and r.marker.evaluate({"extra": "test"})}
    assert not linters & (runtime | test)


def test_only_a_missing_extra_becomes_a_usage_error() -> None:
    missing = ModuleNotFoundError("No module named 'conda_lock'", name="conda_lock")
    error = missing_extra(missing, "conda-lock", "gpuenv export conda-lock")
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert error.hint is not None and "pip install 'gpuenv[conda-lock]'" in error.hint
    deeper = ModuleNotFoundError("No module named 'conda_lock.x'", name="conda_lock.x")
    assert isinstance(missing_extra(deeper, "conda-lock", "x"), UsageError)
    broken = ModuleNotFoundError("No module named 'ruamel'", name="ruamel")  # its own dependency
    assert missing_extra(broken, "conda-lock", "x") is broken
    other = ImportError("cannot import name 'Lockfile'", name="conda_lock.lockfile")
    assert missing_extra(other, "conda-lock", "x") is other


def test_importing_a_conda_lock_file_without_the_extra_says_how_to_add_it(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_conda_lock(monkeypatch)
    out = tmp_path / "gpuenv.toml"
    result = cli(
        "import",
        str(IMPORTS / "conda-lock" / "conda-lock.yml"),
        "--gpu",
        "none",
        "--no-check-resolves",
        "-o",
        str(out),
    )
    assert result.code == 2, result.err
    assert "reading a conda-lock.yml needs conda-lock" in result.err
    assert "pip install 'gpuenv[conda-lock]'" in result.err
    assert "Traceback" not in result.err and not out.exists()
