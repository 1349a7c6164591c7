"""A stderr that cannot take gpuenv's lines (``2>/dev/full``, a closed descriptor)
loses the lines, not the command: ``verify 2>/dev/full`` recorded its own progress
line's ENOSPC as the probe's failure (a false failed verification that then refused
``run``), and ``lock 2>/dev/full`` stopped at its first progress line with exit 1."""

from __future__ import annotations

import errno
import io
import subprocess
import sys
from pathlib import Path

import pytest

from gpuenv.cli import _output
from gpuenv.cli._progress import LINES, Display


class Full(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_progress_and_warnings_to_a_full_stderr_raise_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stderr", Full())
    with Display(LINES) as progress:
        progress("cpu: resolving pip packages")
        progress("cpu: installing 13 pip packages")
    _output.err("gpuenv: warning: something")


def test_a_closed_stderr_is_no_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", None)
    with Display(LINES) as progress:
        progress("cpu: resolving pip packages")
    _output.err("gpuenv: warning: something")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_plan_with_stderr_full_prints_its_plan(tmp_path: Path) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        '[project]\nname = "p"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n'
        '[targets.cpu]\ngpu = "none"\n'
    )
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "gpuenv", "-f", str(spec), "plan"],
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0 and "cpu" in done.stdout


def test_a_reader_that_left_ends_the_command_quietly_with_sigpipes_code(tmp_path: Path) -> None:
    """``gpuenv plan | head -c0`` said "error: cannot write gpuenv's output (standard
    output): Broken pipe" and exit 5: every ``| head`` of a long listing did."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        '[project]\nname = "p"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n'
        '[targets.cpu]\ngpu = "none"\n'
    )
    for extra in ([], ["--json"]):
        child = subprocess.Popen(
            [sys.executable, "-m", "gpuenv", "-f", str(spec), "plan", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # long before the plan is written (the start takes 100 ms)
        err = child.stderr.read()
        assert child.wait(timeout=120) == 141, err
        assert err == b""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("line", [["--version"], ["plan", "--help"]])
def test_what_argparse_prints_to_a_full_stdout_fails_as_any_output(line: list[str]) -> None:
    """argparse swallowed the failed write: `gpuenv --version > /dev/full` said nothing
    and exited 0, where `plan > /dev/full` is exit 5 with a message."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "gpuenv", *line],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 5, done.stderr
    assert "cannot write gpuenv's output (standard output)" in done.stderr
