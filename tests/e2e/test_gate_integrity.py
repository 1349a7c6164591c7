"""The gate end to end, with real installs: run, shell and activate refuse a prefix
that is not the current lock's; hostile files on the run path give typed refusals,
never a hang or a traceback; conda archives are hash-checked on file:// and HTTP;
a moved project keeps its environments."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gpuenv.lock.format import read_lock, write_lock
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.build import CondaSpec, build_archive
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.index import serve
from tests.fixtures.pkgindex.plugin import PkgIndex

CHANGED = "gpuenv.lock changed since this environment was installed: run gpuenv install"


def pointer(project: Project, target: str = "cpu") -> Path:
    return Path(os.readlink(project.dir / ".gpuenv" / target))


def test_run_shell_and_activate_refuse_a_prefix_of_an_older_lock(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    assert project.gpuenv("run", "--unverified", "--", "true").returncode == 0
    project.spec.write_text(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    project.gpuenv("lock", check=True)
    for args in (
        ("run", "--unverified", "--", "true"),
        ("run", "--", "true"),
        ("activate", "--unverified"),
        ("shell", "--unverified", "--shell", "bash"),
    ):
        refused = project.gpuenv(*args)
        assert refused.returncode == 4, (args, refused.stderr)
        assert CHANGED in refused.stderr and "Traceback" not in refused.stderr
        assert refused.stdout == ""
    project.gpuenv("install", "--target", "cpu", check=True)
    assert project.gpuenv("run", "--unverified", "--", "true").returncode == 0


def test_a_lock_rewritten_without_changing_the_target_still_runs(
    make_project: Callable[..., Project],
) -> None:
    """Another target relocked (here: only the spec hash moves): the bytes differ, the
    target's content hash does not; run parses the lock once and remembers it."""
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    write_lock(project.lock, replace(lock, spec_hash="sha256:" + "7" * 64))
    state = project.dir / ".gpuenv" / ".lock-state.json"
    before = json.loads(state.read_text())["lock"]
    assert project.gpuenv("run", "--unverified", "--", "true").returncode == 0
    after = json.loads(state.read_text())
    assert after["lock"] != before and after["targets"]["cpu"] == lock.targets["cpu"].content_hash


def test_after_a_rollback_run_warns_and_install_returns_to_the_lock(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    first = pointer(project)
    project.spec.write_text(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    project.gpuenv("install", "--target", "cpu", check=True)
    project.gpuenv("rollback", "--target", "cpu", check=True)
    assert pointer(project) == first
    ran = project.gpuenv("run", "--unverified", "--", "true")
    assert ran.returncode == 0 and "rolled back to an earlier generation" in ran.stderr
    project.gpuenv("install", "--target", "cpu", check=True)
    assert pointer(project) != first
    ran = project.gpuenv("run", "--unverified", "--", "true")
    assert ran.returncode == 0 and "rolled back" not in ran.stderr


def test_a_missing_or_damaged_lock_stops_run(make_project: Callable[..., Project]) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    text = project.lock.read_text()
    project.lock.write_text(text.replace('version = "4.45.0"', 'version = "9.9.9"', 1))
    damaged = project.gpuenv("run", "--unverified", "--", "true")
    assert damaged.returncode == 2 and "content-hash" in damaged.stderr, damaged.stderr
    project.lock.unlink()
    missing = project.gpuenv("run", "--unverified", "--", "true")
    assert missing.returncode == 4 and "gpuenv.lock is missing" in missing.stderr


# --- hostile files on the run path ----------------------------------------------------------------


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory, pkgindex: PkgIndex
) -> Iterator[tuple[Path, dict[str, str]]]:
    """One installed project, shared: each case damages one file and restores it."""
    from tests.e2e.conftest import Project as P

    root = tmp_path_factory.mktemp("hostile")
    (root / "project").mkdir()
    (root / "project" / "gpuenv.toml").write_text(spec_text(pkgindex))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "GPUENV_"))}
    env.update(
        GPUENV_HOME=str(root / "store"),
        HOME=str(root),
        XDG_CACHE_HOME=str(root / "cache"),
        PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"),
    )
    P(root / "project", root / "store", env).gpuenv("install", "--target", "cpu", check=True)
    yield root / "project", env


def _damage(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "deep":
        path.write_text("[" * 10_000 + "]" * 10_000)
    elif kind == "wrong-shape":
        path.write_text(json.dumps({"format": 1, "active": 3, "ops": [{"op": "set"}]}))
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.truncate(80 << 20)


CASES = [
    # (file, damage, exit code, what stderr says)
    ("marker", "fifo", 4, "not a regular file"),
    ("marker", "dev-zero", 4, "a character device"),
    ("marker", "deep", 4, "nested more than"),
    ("marker", "wrong-shape", 4, "not a completion marker"),
    ("delta", "fifo", 4, "environment delta is unusable"),
    ("delta", "dev-zero", 4, "environment delta is unusable"),
    ("delta", "deep", 4, "nested more than"),
    ("delta", "wrong-shape", 4, "malformed environment delta"),
    ("lock", "fifo", 2, "not a regular file"),
    ("lock", "dev-zero", 2, "a character device"),
    ("lock", "huge", 2, "more than any gpuenv.lock"),
    ("state", "fifo", 0, ""),  # a shortcut only: the lock is parsed instead
    ("state", "deep", 0, ""),
    ("record", "fifo", 4, "has never been verified here"),
    ("record", "dev-zero", 4, "has never been verified here"),
]


@pytest.mark.parametrize(("which", "kind", "code", "says"), CASES)
def test_a_hostile_file_on_the_run_path_is_a_typed_refusal(
    installed: tuple[Path, dict[str, str]], which: str, kind: str, code: int, says: str
) -> None:
    project, env = installed
    prefix = Path(os.readlink(project / ".gpuenv" / "cpu"))
    from gpuenv.verify import _recordcheck
    from gpuenv.verify.gate import machine_fingerprint

    record = Path(_recordcheck.record_file(prefix, machine_fingerprint()))
    record.parent.mkdir(parents=True, exist_ok=True)
    paths = {
        "marker": prefix / "etc" / "gpuenv" / "installed.json",
        "delta": prefix / "etc" / "gpuenv" / "env-delta.json",
        "lock": project / "gpuenv.lock",
        "state": project / ".gpuenv" / ".lock-state.json",
        "record": record,
    }
    path = paths[which]
    saved = path.read_bytes() if path.is_file() else None
    _damage(path, kind)
    try:
        args = ("run", "--", "true") if which == "record" else ("run", "--unverified", "--", "true")
        result = subprocess.run(
            [sys.executable, "-m", "gpuenv", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        path.unlink(missing_ok=True)
        if saved is not None:
            path.write_bytes(saved)
    assert result.returncode == code, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr


# --- conda archives on every transport ----------------------------------------------------------


def _conda_project(
    make_project: Callable[..., Project], pkgindex: PkgIndex, channel: str
) -> Project:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{channel}"]\n'
        'dependencies = { "cuda-version" = "12.4" }\npython = false\n'
    )
    project = make_project(text)
    project.gpuenv("lock", check=True)
    return project


def _swap_archive(channel_dir: Path, local_channel: LocalChannel) -> str:
    """Replace cuda-version's archive by another package under the same file name."""
    key = next(k for k in local_channel.specs if k.startswith("noarch/cuda-version-12.4"))
    spec = local_channel.spec(key)
    evil = replace(spec, depends=(*spec.depends, "evil"))
    assert isinstance(evil, CondaSpec)
    (channel_dir / key).write_bytes(build_archive(evil))
    return key


def _assert_nothing_installed(project: Project) -> None:
    assert not (project.dir / ".gpuenv" / "cpu").exists()
    prefixes = list((project.home / "prefixes").glob("*")) if project.home.exists() else []
    assert prefixes == []


def test_a_swapped_archive_on_a_file_channel_is_refused(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    local_channel: LocalChannel,
    tmp_path: Path,
) -> None:
    channel = tmp_path / "channel"
    shutil.copytree(local_channel.path, channel)
    project = _conda_project(make_project, pkgindex, channel.as_uri())
    _swap_archive(channel, local_channel)
    result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.returncode == 5, result.stderr
    assert "conda package cuda-version 12.4 (h0_3)" in result.stderr
    assert "does not match the sha256 in gpuenv.lock" in result.stderr
    _assert_nothing_installed(project)


def test_a_flipped_md5_is_refused_too(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    local_channel: LocalChannel,
    tmp_path: Path,
) -> None:
    channel = tmp_path / "channel"
    shutil.copytree(local_channel.path, channel)
    project = _conda_project(make_project, pkgindex, channel.as_uri())
    lock = read_lock(project.lock)
    assert lock is not None
    cpu = lock.targets["cpu"]
    flipped = tuple(replace(c, md5="0" * 32) for c in cpu.conda)
    write_lock(
        project.lock, replace(lock, targets={**lock.targets, "cpu": replace(cpu, conda=flipped)})
    )
    result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.returncode == 5 and "does not match the md5" in result.stderr, result.stderr
    _assert_nothing_installed(project)


def test_a_swapped_archive_over_http_is_refused(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    local_channel: LocalChannel,
    tmp_path: Path,
) -> None:
    channel = tmp_path / "channel"
    shutil.copytree(local_channel.path, channel)
    with serve(channel) as url:
        project = _conda_project(make_project, pkgindex, url)
        _swap_archive(channel, local_channel)
        result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.returncode == 5, result.stderr
    assert "does not match the sha256 in gpuenv.lock" in result.stderr
    assert "cuda-version-12.4-h0_3" in result.stderr
    _assert_nothing_installed(project)


# --- a moved project ---------------------------------------------------------------------------


def test_gc_after_moving_a_project_keeps_its_prefix_and_says_so(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    prefix = pointer(project)
    moved = Project(tmp_path / "moved-here", project.home, project.env)
    project.dir.rename(moved.dir)
    gc = moved.gpuenv("gc", check=True)
    assert (
        prefix.exists()
        and f"kept {prefix} until" in gc.stdout
        and "its project is gone" in gc.stdout
    )
    assert json.loads(moved.gpuenv("gc", "--json", check=True).stdout)["graced"][0][
        "prefix"
    ] == str(prefix)
    assert moved.gpuenv("run", "--unverified", "--", "true").returncode == 0
    gc = json.loads(moved.gpuenv("gc", "--grace", "0", "--json", check=True).stdout)
    assert gc["removed"] == [] and prefix.exists(), "the moved project's pointer keeps it"
