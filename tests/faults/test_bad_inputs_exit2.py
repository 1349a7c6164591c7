"""Bad input is exit 2 with a message naming it, never exit 70 (issue 24, finding 8):
5000-digit versions (past int()'s limit), a channel ``http://[::1``, a config file nested
past the TOML parser's recursion, ``gpuenv shell`` with no shell on PATH."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.faults.test_shell_safety import make_installed

SPEC = """[project]
name = "x"

[stack]
python = "3.11"
torch = "{torch}"

[targets.cpu]
gpu = "none"
{extra}"""


@pytest.mark.parametrize(
    ("torch", "extra", "said"),
    [
        ("1" * 5000, "", "5000 characters: not a version"),
        ("==2." + "9" * 5000, "", "characters: not a version"),
        ("2.4.1", '\n[conda]\nchannels = ["http://[::1"]\n', "is not a channel name"),
        ("2.4.1", '\n[conda]\nchannels = ["conda-forge", "https://h:99999/c"]\n', "channel"),
    ],
    ids=["digits", "range-digits", "ipv6", "port"],
)
def test_a_spec_value_no_tool_could_read_is_exit_2(
    cli: Callable[..., CliResult], tmp_path: Path, torch: str, extra: str, said: str
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC.format(torch=torch, extra=extra))
    for command in ("plan", "lock"):
        result = cli("-f", str(spec), command)
        assert result.code == 2, (command, result.err[-400:])
        assert said in result.err and "Traceback" not in result.err


def test_a_mirrors_config_nested_too_deeply_or_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    from gpuenv._network import _from_file
    from gpuenv.errors import UsageError

    config = tmp_path / "config.toml"
    config.write_text("a = " + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(UsageError, match="nested too deeply"):
        _from_file(config)
    config.write_bytes(b'mirrors = { "https://a.invalid/" = "https://b.invalid/\xe9" }')
    with pytest.raises(UsageError, match="not UTF-8"):
        _from_file(config)


@pytest.mark.parametrize("shell_var", [None, "/bin/bash", "/nowhere/zsh"])
def test_gpuenv_shell_with_no_shell_on_path_is_exit_2(
    tmp_path: Path, shell_var: str | None
) -> None:
    installed = make_installed(tmp_path)
    env = {
        "PATH": str(tmp_path / "empty"),
        "HOME": str(tmp_path),
        "GPUENV_HOME": str(installed.store),
        "XDG_CACHE_HOME": str(tmp_path / ".cache"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
        **({"SHELL": shell_var} if shell_var else {}),
    }
    result = subprocess.run(
        [sys.executable, "-m", "gpuenv", "shell", "--unverified"],
        cwd=installed.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "cannot start" in result.stderr and "--shell" in result.stderr
    assert "internal error" not in result.stderr
