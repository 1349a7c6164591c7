"""Every URL gpuenv takes from the user (spec keys, override variables, mirrors) is
checked the way the lock reader checks what it reads back: a path, or a URL that does
not parse (``http://127.].0.1/``, a port of 99999), is exit 2 naming where it came
from, never a ValueError deep in a resolver (exit 70)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

SPEC = """[project]
name = "urls"

[stack]
python = "3.11"
torch = "2.4.1"

[targets.cpu]
gpu = "none"
"""


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GPUENV_TORCH_INDEX", "/srv/torch"),
        ("GPUENV_TORCH_INDEX", "http://127.].0.1/whl"),
        ("GPUENV_INDEX_URL", "http://user:s3cret@127.].0.1/simple"),
        ("GPUENV_INDEX_URL", "http://h.invalid:99999/simple"),
        ("GPUENV_MIRRORS", "https://download.pytorch.org/whl=http://127.].0.1/x"),
    ],
)
@pytest.mark.parametrize("command", [("lock",), ("install", "--target", "cpu"), ("plan",)])
def test_a_bad_url_in_the_environment_is_exit_2_naming_the_variable(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    command: tuple[str, ...],
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    monkeypatch.setenv(variable, value)
    result = cli("-f", str(spec), *command)
    if command == ("plan",) and variable != "GPUENV_TORCH_INDEX":
        assert result.code == 0, result.err  # plan reads no index but the torch one
        return
    assert result.code == 2, result.err
    assert variable in result.err
    assert "s3cret" not in result.err + result.out
    assert not (tmp_path / "gpuenv.lock").exists()


def test_a_url_in_the_spec_that_does_not_parse_is_a_spec_error_with_its_line(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC + '\n[pip]\nindex-url = "http://127.].0.1/simple"\n')
    result = cli("-f", str(spec), "plan")
    assert result.code == 2
    assert "gpuenv.toml:12: pip.index-url:" in result.err
