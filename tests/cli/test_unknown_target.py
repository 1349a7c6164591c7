"""A target the spec does not name is a usage error (exit 2) in every command that takes
``--target``: run, shell, activate and verify said "not installed" (exit 4) with a hint to
install it, which then failed with "no target named"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

SPEC = '[project]\nname = "u"\n[stack]\npython = "3.12"\n[targets.cpu]\ngpu = "none"\n'


@pytest.mark.parametrize(
    "command",
    [
        ("run", "--target", "cpux", "--", "true"),
        ("shell", "--target", "cpux"),
        ("activate", "--target", "cpux"),
        ("verify", "--target", "cpux"),
    ],
)
def test_a_target_the_spec_does_not_name_is_exit_2_naming_the_known_ones(
    cli: Callable[..., CliResult],
    write_spec: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: tuple[str, ...],
) -> None:
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    spec = write_spec(SPEC, "other.toml")  # -f with a name of its own
    (tmp_path / "gpuenv.toml").write_text(SPEC.replace("cpu]", "cpux]"))
    result = cli("-f", str(spec), *command)
    assert result.code == 2, result.err
    assert "no target named 'cpux'" in result.err and "targets in this spec: cpu" in result.err


def test_a_named_target_not_yet_installed_is_still_exit_4(
    cli: Callable[..., CliResult],
    write_spec: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    spec = write_spec(SPEC)
    result = cli("-f", str(spec), "run", "--target", "cpu", "--", "true")
    assert result.code == 4, result.err
    assert "target cpu is not installed" in result.err
