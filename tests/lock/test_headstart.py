"""The lock's head start (lock.headstart): a plain `gpuenv lock` of bytes locked before
begins the uv runs that lock made before its modules load, and takes one only where
the lock then asks for the very same run. Real uv against the local index."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuenv import _proc
from gpuenv.lock import headstart
from tests.conftest import CliResult
from tests.e2e.conftest import spec_text
from tests.fixtures.pkgindex.plugin import PkgIndex

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def project(tmp_path: Path, pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project locked in this directory, with the uv scratch folders in a folder of
    its own (to see what is left there)."""
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "gpuenv.toml").write_text(spec_text(pkgindex))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(directory)
    yield directory
    headstart.release()


@pytest.fixture
def online_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The online `uv pip compile` runs the lock itself ran (not taken from a head start)."""
    runs: list[list[str]] = []
    real = _proc.run

    def counting(argv, **kwargs):  # type: ignore[no-untyped-def]
        args = [os.fspath(a) for a in argv]
        if "compile" in args and "--offline" not in args:
            runs.append(args)
        return real(argv, **kwargs)

    monkeypatch.setattr(_proc, "run", counting)
    return runs


def _recipes() -> list[Path]:
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "gpuenv" / "lock-headstart"
    return sorted(cache.glob("*.json")) if cache.is_dir() else []


def _locked_once(
    cli: Callable[..., CliResult], project: Path, online_runs: list[list[str]]
) -> tuple[int, bytes, Path, dict[str, Any]]:
    """One lock, its lock removed again: (the online runs it made, the lock's bytes, its
    recipe, the recipe's data) for a test to edit the recipe before the next lock."""
    assert cli("lock").code == 0
    first = (project / "gpuenv.lock").read_bytes()
    (project / "gpuenv.lock").unlink()
    (recipe,) = _recipes()
    return len(online_runs), first, recipe, json.loads(recipe.read_text())


def _scratch_left(project: Path) -> list[str]:
    return sorted(p.name for p in (project.parent / "scratch").iterdir())


def test_a_second_lock_of_the_same_bytes_takes_the_run_begun_at_start(
    cli: Callable[..., CliResult], project: Path, online_runs: list[list[str]]
) -> None:
    assert cli("lock").code == 0
    first = (project / "gpuenv.lock").read_bytes()
    ran = len(online_runs)  # the e2e spec resolves two requests (its two targets)
    assert 1 <= ran <= headstart.MAX_RUNS and len(_recipes()) == 1
    (project / "gpuenv.lock").unlink()  # the same bytes as the first lock saw: no lock
    result = cli("lock", "--json")
    assert result.code == 0, result.err
    assert len(online_runs) == ran, "the second lock ran no resolution of its own"
    assert (project / "gpuenv.lock").read_bytes() == first
    assert _scratch_left(project) == []
    # a relock (the lock now there) is other bytes: its own recipe, then taken too
    assert cli("lock").code == 0 and cli("lock").code == 0
    assert len(online_runs) == 2 * ran and len(_recipes()) == 2
    assert (project / "gpuenv.lock").read_bytes() == first


def test_a_run_that_differs_is_killed_and_never_taken(
    cli: Callable[..., CliResult], project: Path, online_runs: list[list[str]]
) -> None:
    ran, first, recipe, data = _locked_once(cli, project, online_runs)
    files = data["runs"][0]["files"]
    project_file = next(k for k in files if k.endswith("pyproject.toml"))
    files[project_file] = files[project_file].replace("dependencies = [", 'dependencies = ["six",')
    recipe.write_text(json.dumps(data))
    assert cli("lock").code == 0
    assert len(online_runs) == ran + 1, "the lock ran its own resolution of that one"
    assert (project / "gpuenv.lock").read_bytes() == first, "nothing of the other run"
    assert _scratch_left(project) == []


def test_a_head_start_that_failed_is_not_taken(
    cli: Callable[..., CliResult], project: Path, online_runs: list[list[str]]
) -> None:
    ran, first, recipe, data = _locked_once(cli, project, online_runs)
    # taken as the very run the lock asks for, which fails this time (as a run whose
    # index went away meanwhile would)
    for run in data["runs"]:
        run["env"]["UV_INDEX_STRATEGY"] = "no-such-strategy"
    recipe.write_text(json.dumps(data))
    real_same = headstart._Started.same

    def same_but_env(self: headstart._Started, run: headstart._Run, env: object) -> bool:
        return real_same(self, run, self.env)

    headstart._Started.same = same_but_env  # type: ignore[method-assign]
    try:
        assert cli("lock").code == 0
    finally:
        headstart._Started.same = real_same  # type: ignore[method-assign]
    assert len(online_runs) == 2 * ran
    assert (project / "gpuenv.lock").read_bytes() == first


@pytest.mark.parametrize("mode", [0o666, 0o620])
def test_a_recipe_others_may_write_is_never_run(
    cli: Callable[..., CliResult], project: Path, online_runs: list[list[str]], mode: int
) -> None:
    assert cli("lock").code == 0
    (project / "gpuenv.lock").unlink()
    (recipe,) = _recipes()
    recipe.chmod(mode)
    headstart.begin(recipe)
    try:
        assert headstart._state.held == []
    finally:
        headstart.release()
    recipe.chmod(0o600)
    headstart.begin(recipe)
    try:
        assert len(headstart._state.held) >= 1  # the same recipe, this user's own
    finally:
        headstart.release()


def test_lock_check_starts_nothing(
    cli: Callable[..., CliResult],
    project: Path,
    online_runs: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cli("lock").code == 0
    started: list[object] = []
    real_start = _proc.start

    def spy(argv, **kwargs):  # type: ignore[no-untyped-def]
        started.append(argv)
        return real_start(argv, **kwargs)

    monkeypatch.setattr(_proc, "start", spy)
    assert cli("lock", "--check").code == 0
    assert started == []


def test_an_error_after_the_start_kills_the_runs_and_removes_their_folders(
    cli: Callable[..., CliResult], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("lock").code == 0
    (project / "gpuenv.lock").unlink()
    children: list[int] = []
    real_start = _proc.start

    def spy(argv, **kwargs):  # type: ignore[no-untyped-def]
        child = real_start(argv, **kwargs)
        children.append(child.pid)
        return child

    monkeypatch.setattr(_proc, "start", spy)
    from gpuenv.lock import project as lock_project

    def fails(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lock_project, "lock_spec_file", fails)
    assert cli("lock").code != 0
    assert children
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
    assert _scratch_left(project) == []


# -- what a recipe may hold -------------------------------------------------------------


def test_credentials_are_never_written_down(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "pyproject.toml").write_text('dependencies = ["x"]\n')
    argv = ["/usr/bin/uv", "pip", "compile", f"{folder}/a/pyproject.toml", "-o", f"{folder}/a/o"]
    environ = {"PATH": "/bin"}
    plain = headstart.describe(argv, {"PATH": "/bin", "NO_COLOR": "1"}, folder, 60, environ)
    assert plain is not None
    assert plain.inherit == ("PATH",) and plain.set_env == {"NO_COLOR": "1"}
    assert plain.files == {"a/pyproject.toml": 'dependencies = ["x"]\n'}
    assert plain.argv[3] == "{folder}/a/pyproject.toml" and plain.output == "a/o"
    secret_env = {"PATH": "/bin", "UV_INDEX_MINE_PASSWORD": "hunter2"}
    assert headstart.describe(argv, secret_env, folder, 60, environ) is None
    # a password the user's own environment holds is inherited by name, never written
    inherited = headstart.describe(argv, secret_env, folder, 60, secret_env)
    assert inherited is not None and "hunter2" not in json.dumps(inherited.to_json())
    url = [*argv, "--default-index", "https://user:hunter2@example.org/simple"]
    assert headstart.describe(url, environ, folder, 60, environ) is None
    (folder / "a" / "pyproject.toml").write_text(
        'dependencies = ["x @ https://user:hunter2@example.org/x.whl"]\n'
    )
    assert headstart.describe(argv, environ, folder, 60, environ) is None
    # an argument holding the placeholder's text could be read back as another one
    odd = [*argv[:3], "--constraint", "{folder}/c.txt", *argv[3:]]
    (folder / "a" / "pyproject.toml").write_text('dependencies = ["x"]\n')
    assert headstart.describe(odd, environ, folder, 60, environ) is None


@pytest.mark.parametrize(
    "run",
    [
        {"output": "/etc/passwd"},
        {"output": "../x"},
        {"files": {"a/../../x": "t"}},
        {"files": {"/abs": "t"}},
        {"argv": "uv"},
        {"timeout": "60"},
        {"timeout": float("nan")},
        {"timeout": float("inf")},
        {"timeout": 0},
        {"env": {"LD_PRELOAD": "/tmp/x.so"}},
        {"env": {"PATH": "/tmp/evil"}},
    ],
)
def test_a_recipe_that_reaches_outside_its_folder_is_refused(run: dict[str, object]) -> None:
    good: dict[str, object] = {
        "argv": ["/usr/bin/uv", "-o", "{folder}/o"],
        "files": {"a/p": "t"},
        "inherit": [],
        "env": {},
        "timeout": 60,
        "output": "o",
    }
    assert headstart._Run.from_json(good) is not None
    assert headstart._Run.from_json({**good, **run}) is None


# -- a real process, interrupted ----------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_an_interrupted_lock_leaves_no_uv_running_and_no_folder(project: Path, seed: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env["PYTHONPATH"] = str(SRC)
    argv = [sys.executable, "-m", "gpuenv", "lock"]
    subprocess.run(argv, cwd=project, env=env, check=True, capture_output=True, timeout=120)
    (project / "gpuenv.lock").unlink()
    process = subprocess.Popen(argv, cwd=project, env=env, stderr=subprocess.PIPE)
    time.sleep([0.02, 0.05, 0.08, 0.1, 0.12, 0.16, 0.2, 0.35][seed])
    process.send_signal(signal.SIGTERM if seed % 2 else signal.SIGINT)
    _, err = process.communicate(timeout=60)
    # Else interrupted before gpuenv's first line, in Python's own start-up (site, runpy):
    # Python's exit then (1, or -2 before its handler), and nothing of gpuenv ran.
    before_gpuenv = b"/gpuenv/" not in err and b"gpuenv:" not in err
    assert process.returncode in (0, 130, 143) or before_gpuenv, err
    deadline = time.monotonic() + 5
    while _uv_children_of(project) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _uv_children_of(project) == []
    left = project.parent / "scratch"
    assert _scratch_left(project) == [], [str(p.relative_to(left)) for p in left.rglob("*")]


def _uv_children_of(project: Path) -> list[int]:
    """uv processes working in this test's scratch folder."""
    scratch = str(project.parent / "scratch")
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "compile" in cmdline and scratch in cmdline:
            found.append(int(entry.name))
    return found


def test_a_spec_whose_index_carries_credentials_leaves_no_recipe(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    pkgindex_auth: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "gpuenv.toml").write_text(spec_text(pkgindex_auth))
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(directory)
    result = cli("lock")
    assert result.code == 0, result.err
    assert _recipes() == []
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "gpuenv"
    password = pkgindex_auth.default_index.split("@")[0].rsplit(":", 1)[1]
    for path in cache.rglob("*.json"):
        assert password not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("kind", ["symlink", "fifo", "huge"])
def test_a_recipe_that_is_not_a_plain_small_file_is_never_run(
    cli: Callable[..., CliResult], project: Path, kind: str
) -> None:
    assert cli("lock").code == 0
    (recipe,) = _recipes()
    if kind == "symlink":
        target = recipe.with_name("elsewhere")
        recipe.rename(target)
        recipe.symlink_to(target)
    elif kind == "fifo":
        recipe.unlink()
        os.mkfifo(recipe, 0o600)
    else:
        data = json.loads(recipe.read_text())
        data["padding"] = "x" * (2 << 20)
        recipe.write_text(json.dumps(data))
    headstart.begin(recipe)
    try:
        assert headstart._state.held == []
    finally:
        headstart.release()


def test_the_recipe_is_rewritten_only_when_it_changed(
    cli: Callable[..., CliResult], project: Path
) -> None:
    assert cli("lock").code == 0
    (project / "gpuenv.lock").unlink()
    (recipe,) = _recipes()
    os.utime(recipe, (1, 1))
    assert cli("lock").code == 0
    assert recipe.stat().st_mtime == 1, "the same runs: the file left as it was"


def test_a_cache_it_cannot_write_still_locks(
    cli: Callable[..., CliResult], project: Path, online_runs: list[list[str]]
) -> None:
    assert cli("lock").code == 0
    first = (project / "gpuenv.lock").read_bytes()
    (project / "gpuenv.lock").unlink()
    (recipe,) = _recipes()
    shutil.rmtree(recipe.parent)
    recipe.parent.write_text("a file where the recipes' folder goes\n")
    assert cli("lock").code == 0
    assert (project / "gpuenv.lock").read_bytes() == first
    assert recipe.parent.is_file(), "left as it was"


def test_a_lock_named_by_its_file_and_targets_is_begun_before_the_parser(
    cli: Callable[..., CliResult],
    project: Path,
    online_runs: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`gpuenv -f PATH lock -t NAME` from another directory: cli._fastlock reads the spec
    and the targets as argparse does, begins that lock's head start, and it is taken."""
    from gpuenv.cli import _fastlock

    begun: list[tuple[str | None, tuple[str, ...] | None]] = []
    real = _fastlock.begin

    def recording(plain: _fastlock.PlainLock) -> None:
        begun.append((plain.file, plain.targets))
        real(plain)

    monkeypatch.setattr(_fastlock, "begin", recording)
    monkeypatch.chdir(project.parent)
    spec = str(project / "gpuenv.toml")
    assert cli("-f", spec, "lock", "-t", "cpu").code == 0
    ran, first = len(online_runs), (project / "gpuenv.lock").read_bytes()
    assert ran >= 1 and len(_recipes()) == 1
    (project / "gpuenv.lock").unlink()
    assert cli("-q", "-f", spec, "lock", "-t", "cpu", "--json").code == 0
    assert len(online_runs) == ran, "the second lock ran no resolution of its own"
    assert (project / "gpuenv.lock").read_bytes() == first
    assert begun == [(spec, ("cpu",))] * 2
    assert _scratch_left(project) == []
