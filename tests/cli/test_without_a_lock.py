"""Commands that work from the lock alone (export, pack) say to lock first when there is
no gpuenv.lock, through the one helper they share (cli._common.load_locked)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

SPEC = """
[project]
name = "demo"

[stack]
python = "3.11"
torch = "2.4.*"

[targets.cpu]
gpu = "none"
"""


@pytest.mark.parametrize("command", [("export", "requirements"), ("pack",)])
def test_a_command_reading_the_lock_says_to_lock_first(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path], command: tuple[str, ...]
) -> None:
    spec = write_spec(SPEC)
    result = cli("-f", str(spec), *command)
    assert result.code == 2, result.err
    assert f"no gpuenv.lock beside {spec}" in result.err
    assert "run 'gpuenv lock' first" in result.err
    assert not (spec.parent / "gpuenv.lock").exists()
