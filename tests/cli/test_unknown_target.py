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


ACTIVATING = [("run", "--", "true"), ("shell",), ("activate",), ("rollback",)]


@pytest.mark.parametrize("command", ACTIVATING)
@pytest.mark.parametrize("named", ["missing.toml", "folder", "fifo", "/dev/null", "binary.toml"])
def test_a_file_named_with_f_must_be_a_spec(
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: tuple[str, ...],
    named: str,
) -> None:
    """run, shell, activate and rollback took whatever was installed beside a missing,
    a folder's or a device's path (and said "no gpuenv.toml here: /dev/null does not
    exist"): exit 2 naming the file, as plan says it."""
    import os

    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    _installed_beside(tmp_path, "cpu")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "binary.toml").write_bytes(b"\x00\x01\xff")
    result = cli("-f", named, *command)
    assert result.code == 2, (result.code, result.err)
    assert named in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("command", ACTIVATING)
def test_only_the_targets_the_named_spec_declares_are_taken(
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: tuple[str, ...],
) -> None:
    """``-f other.toml`` with no --target activated the cpu target of the gpuenv.toml
    beside it, a target other.toml does not have."""
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    (tmp_path / "other.toml").write_text(SPEC.replace("cpu]", "other]"))
    _installed_beside(tmp_path, "cpu")
    result = cli("-f", "other.toml", *command)
    assert result.code == 4, (result.code, result.err)
    assert "nothing is installed for other.toml" in result.err


def _installed_beside(project: Path, target: str) -> None:
    """A project pointer for ``target``: what ``installed_targets`` sees."""
    prefix = project / "store" / "prefixes" / f"{target}-0"
    prefix.mkdir(parents=True)
    (project / ".gpuenv").mkdir(exist_ok=True)
    (project / ".gpuenv" / target).symlink_to(prefix)


@pytest.mark.parametrize("command", [("run", "--", "true"), ("shell",), ("activate",)])
def test_a_pointer_beside_the_default_spec_of_a_target_it_does_not_declare_is_refused(
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: tuple[str, ...],
) -> None:
    """`run -t other` ran a target ./gpuenv.toml does not declare (installed beside it by
    another spec, or a target since renamed); with -f the same was refused."""
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    _installed_beside(tmp_path, "other")
    result = cli(command[0], "--target", "other", *command[1:])
    assert result.code == 2, (result.code, result.err)
    assert "no target named 'other'" in result.err and "targets in this spec: cpu" in result.err
