"""Shared test helpers. Feature-specific fixtures live beside their tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuenv.cli import main

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``gpuenv ARGS`` in-process; returns exit code and captured output."""

    def run(*args: str) -> CliResult:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str, name: str = "gpuenv.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests never read or write the real user's caches and data."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.delenv("GPUENV_FACTS", raising=False)
    monkeypatch.delenv("GPUENV_CACHE_DIR", raising=False)
    monkeypatch.delenv("GPUENV_NO_CACHE", raising=False)
    # The terminal's width reaches no tool: uv runs at a fixed one (tests/lock/test_uv_output.py).
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", "off")  # import asks no index unless a test says
    # nor the PyTorch index whether it can be reached (a test with an index set would ask
    # the real one): any build, unless a test says
    monkeypatch.setenv("GPUENV_IMPORT_TORCH_BUILDS", "any")


pytest_plugins = ["tests.fixtures.pkgindex.plugin", "tests.fixtures.condachannel.plugin"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run only when asked for: ``-m slow`` (or any ``-m``
    expression), or ``GPUENV_TEST_SLOW=1``. The default run stays quick."""
    import os

    if config.getoption("-m") or os.environ.get("GPUENV_TEST_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or GPUENV_TEST_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
