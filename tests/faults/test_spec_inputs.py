"""Inputs that used to crash (exit 70) are typed errors: a Python nobody has data for,
nesting thousands of levels deep, control characters in what gets printed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

SPEC = """[project]
name = "demo"
[stack]
python = "{python}"
torch = "2.4.*"
[targets.cpu]
gpu = "none"
"""


@pytest.mark.parametrize("python", ["3.99", "3.7", ">=3.99"])
def test_a_python_no_torch_supports_is_unsatisfiable_not_a_crash(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path], python: str
) -> None:
    path = write_spec(SPEC.format(python=python))
    result = cli("-f", str(path), "plan", "--json")
    assert result.code == 3, result.err + result.out
    error = result.json()["error"]
    assert error["kind"] == "unsatisfiable"
    assert any("stack.python" in a["changes"] for a in error["alternatives"])


@pytest.mark.parametrize("levels", [101, 1_000, 10_000])
@pytest.mark.parametrize("bracket", ["[]", "{}"])
def test_deep_nesting_is_a_located_spec_error(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path], levels: int, bracket: str
) -> None:
    opening, closing = bracket
    inner = "a = " if opening == "{" else ""
    value = (opening + inner) * levels + ("1" if opening == "{" else "") + closing * levels
    path = write_spec(SPEC.format(python="3.11") + f"[pip]\nx = {value}\n")
    result = cli("-f", str(path), "plan")
    assert result.code == 2, result.err
    assert f"{path}:9: values are nested more than 100 levels deep" in result.err
    assert "Traceback" not in result.err


def test_a_hundred_levels_still_parse(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    value = "[" * 99 + "]" * 99
    path = write_spec(SPEC.format(python="3.11") + f"[pip]\nx = {value}\n")
    result = cli("-f", str(path), "plan")
    assert result.code == 2  # an unknown key, reported as such
    assert "pip.x: unknown key" in result.err


def test_control_characters_in_a_spec_value_never_reach_the_terminal(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    text = SPEC.format(python="3.11").replace('name = "demo"', 'name = "x\\u001b]0;pwned\\u0007"')
    path = write_spec(text)
    result = cli("-f", str(path), "plan")
    assert result.code == 2
    assert "\x1b" not in result.err and "\x07" not in result.err
    assert "project.name" in result.err
