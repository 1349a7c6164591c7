"""Directories named by environment variables, as users set them: the suite's own are
absolute paths made by pytest (tests/conftest.py), so none of these was ever tried."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv._settings import default_state_dir, env_dir
from gpuenv.store import default_root
from tests.conftest import CliResult

SPEC = '[project]\nname = "x"\n\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n\n[targets.cpu]\ngpu = "none"\n'


def test_a_quoted_tilde_is_the_home_directory_not_a_folder_named_tilde(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "me"), "GPUENV_HOME": "~/store"}
    assert default_root(environ) == tmp_path / "me" / "store"
    assert env_dir({"HOME": "/home/u/", "GPUENV_CACHE_DIR": "~"}, "GPUENV_CACHE_DIR") == "/home/u"
    assert env_dir({"HOME": "/h", "X": "~other/x"}, "X") == str(Path.cwd() / "~other" / "x")


def test_a_relative_gpuenv_dir_is_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relative GPUENV_HOME made prefixes with relative paths: install failed with
    # "prefix: 'rel-store/prefixes/cpu-...' is not an absolute path".
    monkeypatch.chdir(tmp_path)
    assert default_root({"GPUENV_HOME": "rel-store"}) == tmp_path / "rel-store"
    assert default_state_dir({"GPUENV_STATE_DIR": "./state/"}) == str(tmp_path / "state")


def test_a_relative_xdg_dir_is_ignored_as_the_xdg_specification_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = str(tmp_path / "me")
    assert default_root({"HOME": home, "XDG_DATA_HOME": "data"}) == Path(
        home, ".local", "share", "gpuenv"
    )
    assert (
        default_state_dir({"HOME": home, "XDG_STATE_HOME": "st"}) == home + "/.local/state/gpuenv"
    )
    assert env_dir({"XDG_CACHE_HOME": "  "}, "XDG_CACHE_HOME") is None


def test_plan_with_a_relative_xdg_cache_writes_no_folder_here(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    result = cli("plan")
    assert result.code == 0, result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpuenv.toml", "me"]


@pytest.mark.parametrize("variable", ["GPUENV_CACHE_DIR", "XDG_CACHE_HOME"])
def test_a_file_where_the_cache_goes_is_named_with_its_variable(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    # lock said "cannot write uv's scratch files (/tmp): a part of the path is a file"
    # with "point TMPDIR at a file system with room".
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0::/root:/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, str(a_file))
    result = cli("plan", "--json")
    assert result.code == 2, result.out
    error = result.json()["error"]
    assert f"{a_file} is a file" in error["message"], error
    assert variable in error["hint"] and "TMPDIR" not in error["hint"], error
    assert a_file.read_text() == "root:x:0:0::/root:/bin/sh\n"
