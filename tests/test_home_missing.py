"""A user with no home directory: HOME unset and no passwd entry (a container run with
``--user 4242`` of an image that does not know that user), or HOME=/ as Docker sets it
then. The suite always has a HOME and a writable XDG cache (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuenv._home import home_dir
from gpuenv.store import default_root
from tests.conftest import REPO

SPEC = '[project]\nname = "x"\n\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n\n[targets.cpu]\ngpu = "none"\n'
NOBODY = 4242  # a uid no passwd file names


def test_without_home_or_passwd_entry_home_is_the_root_as_docker_makes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # no passwd entry
    assert home_dir({}) == "/"
    assert home_dir({"HOME": ""}) == "/"
    assert home_dir({"HOME": "/home/u"}) == "/home/u"
    assert default_root({}) == Path("/.local/share/gpuenv")


def _as_nobody(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as a user without a passwd entry")
    keep = ("PATH", "LANG", "LC_ALL")
    clean = {k: v for k, v in os.environ.items() if k in keep}
    clean.update(PYTHONPATH=str(REPO / "src"), **env)
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run(
        [*argv, sys.executable, "-m", "gpuenv", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def open_project() -> Iterator[Path]:
    """A project folder the unknown user can reach and write (pytest's temporary folders
    are root's alone), removed afterwards."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gpuenv-no-home-"))
    try:
        directory = base / "project"
        directory.mkdir()
        (directory / "gpuenv.toml").write_text(SPEC)
        base.chmod(0o755)
        directory.chmod(0o777)
        (directory / "gpuenv.toml").chmod(0o666)
        yield directory
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("command", [["plan"], ["list"], ["detect"], ["kernel", "list"]])
def test_commands_run_without_any_home(open_project: Path, command: list[str]) -> None:
    # Each was exit 70: "RuntimeError: Could not determine home directory".
    result = _as_nobody(command, open_project)
    assert result.returncode == 0, result.stderr
    assert "internal error" not in result.stderr
    assert sorted(p.name for p in open_project.iterdir()) == ["gpuenv.toml"]


def test_an_unwritable_cache_is_named_not_blamed_on_tmp(open_project: Path) -> None:
    # HOME=/ (Docker's for an unknown user): the cache /.cache/gpuenv cannot be made.
    # lock said "cannot write uv's scratch files (/tmp): permission denied" with "point
    # TMPDIR at a file system with room".
    result = _as_nobody(["lock", "--json"], open_project, HOME="/")
    assert result.returncode == 5, result.stdout + result.stderr
    assert "/.cache" in result.stdout and "GPUENV_CACHE_DIR" in result.stdout, result.stdout
    assert "TMPDIR" not in result.stdout and "scratch" not in result.stdout
