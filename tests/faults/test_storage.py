"""The world's write failures are typed errors (exit 5, kind "storage") naming the
path, at every write site; the project pointer moves last; a failed install leaves no
unfinished prefix; a read-only store can be attached and verified.

The write-site sweep runs the real ``gpuenv install`` in-process with a stand-in uv
(many quick installs) and fails the Nth write-like system call under the test's
directory, for every N until an install gets through: every write site in turn.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv._fs import atomic_write_text, os_error_in, storage_error
from gpuenv.errors import StorageError
from gpuenv.lock.format import read_lock, write_lock
from gpuenv.store import STAGING
from tests.faults.conftest import Cli, Locked, WriteFaults

READ_ONLY = (errno.EROFS, errno.EACCES)
MESSAGES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EIO: "an I/O error",
}


def _prefixes(home: Path) -> list[Path]:
    root = home / "prefixes"
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []


def _check_consistent(project: Locked, home: Path) -> None:
    """No unfinished prefix is left, and the pointer (if any) reaches an installed one."""
    for prefix in _prefixes(home):
        assert (prefix / "etc/gpuenv/installed.json").is_file(), f"unfinished {prefix}"
    pointer = project.dir / ".gpuenv" / "cpu"
    if pointer.is_symlink():
        assert (Path(os.readlink(pointer)) / "etc/gpuenv/installed.json").is_file()


def _sweep(
    code: int,
    project: Locked,
    faults: WriteFaults,
    run_cli: Callable[..., Cli],
    *,
    step: int = 1,
) -> tuple[int, int]:
    """Fail write N (N = 1, 1 + step, ...) of ``install --frozen`` until one succeeds.
    Returns (failed runs, write sites seen in the successful run)."""
    home = Path(os.environ["GPUENV_HOME"])
    failed = 0
    for n in range(1, 500, step):
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(project.dir / ".gpuenv", ignore_errors=True)
        faults.seen.clear()
        faults.fail_at = n
        result = run_cli("install", "--frozen", "--target", "cpu", "--json")
        faults.fail_at = None
        assert "Traceback" not in result.err
        if len(faults.seen) < n:  # the fault never fired: this install got through
            assert result.code == 0, result.err + result.out
            _check_consistent(project, home)
            return failed, len(faults.seen)
        where = faults.seen[n - 1]
        if result.code == 0:  # a courtesy write failed: nothing was lost
            # a cache; or, where the store refuses writes, its file lock (taken in the
            # state directory instead) and its gc roots (gc cannot run here either)
            fallback = ("/store/locks", "/store/roots") if code in READ_ONLY else ()
            # (the project's lock state is a cache too: run parses the lock without it)
            courtesy = ("/cache/", "/.gpuenv/..lock-state.json.", "/.gpuenv/.lock-state.json")
            cache_dir = where.endswith("/cache")  # the cache folder itself, made on first use
            # install.headstart's environment, begun beside the prefixes: where its folder
            # cannot be made nothing is begun, and where it cannot be moved to the prefix
            # it is removed; the install makes the environment itself, as without it
            made = where.startswith("mkdir ") and where.endswith(("/store", "/prefixes"))
            head_start = made or f"/prefixes/{STAGING}" in where
            assert (
                cache_dir
                or head_start
                or any(c in where for c in courtesy)
                or any(f in where for f in fallback)
            ), where
            _check_consistent(project, home)
            continue
        failed += 1
        assert result.code == 5, f"write {n} ({where}): exit {result.code}\n{result.out}"
        error = json.loads(result.out)["error"]
        assert error["kind"] == "storage", (where, error)
        assert MESSAGES[code] in error["message"], (where, error)
        assert error["path"] and error["hint"], error
        assert "no Python" not in error["message"]
        _check_consistent(project, home)
    raise AssertionError("the install never got through")


def test_enospc_at_every_write_site_of_an_install(
    project: Locked, fake_uv: Path, write_faults: WriteFaults, run_cli: Callable[..., Cli]
) -> None:
    failed, sites = _sweep(errno.ENOSPC, project, write_faults, run_cli)
    assert sites >= 20, "the sweep saw the install's writes"
    # Each courtesy write is checked to be a cache above; this bounds how many there are:
    # the lock state, the knowledge-base cache and one verified-stamp per stored artifact
    # (written by up to 8 fetches at once, so their number in the sweep varies run to run).
    assert failed >= sites - 30, "only courtesy caches may fail without failing the install"


@pytest.mark.parametrize("code", [errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO])
def test_other_storage_errors_at_write_sites(
    code: int,
    project: Locked,
    fake_uv: Path,
    write_faults: WriteFaults,
    run_cli: Callable[..., Cli],
) -> None:
    write_faults.code = code
    failed, _ = _sweep(code, project, write_faults, run_cli, step=7)
    assert failed >= 3


def test_the_pointer_moves_last(tmp_path: Path, write_faults: WriteFaults) -> None:
    """A failure at any write of ``point_project`` (the .gitignore, the gc roots, the
    previous-generation link, the link itself) leaves the project on its old
    generation, and once it succeeds the new one is current and the old is previous."""
    from gpuenv.store import Store, point_project, pointer_path

    store = Store(tmp_path / "store")
    old, new = store.prefixes / "cpu-old", store.prefixes / "cpu-new"
    old.mkdir(parents=True)
    new.mkdir()
    for n in range(1, 100):
        project = tmp_path / f"project{n}"
        project.mkdir()
        write_faults.fail_at = None
        point_project(store, project, "cpu", old)
        write_faults.seen.clear()
        write_faults.fail_at = n
        try:
            point_project(store, project, "cpu", new)
        except StorageError:
            assert os.readlink(pointer_path(project, "cpu")) == str(old), write_faults.seen[-1]
            continue
        assert len(write_faults.seen) < n, "only a write that did not fail lets it through"
        assert os.readlink(pointer_path(project, "cpu")) == str(new)
        assert os.readlink(pointer_path(project, "cpu", previous=True)) == str(old)
        break
    else:
        raise AssertionError("point_project never succeeded")
    assert n > 4, "the sweep went through several writes"


def test_a_full_disk_during_uv_is_a_storage_error_not_no_python(
    project: Locked, fake_uv: Path, run_cli: Callable[..., Cli], tmp_path: Path
) -> None:
    script = fake_uv.read_text().replace(
        "    venv)\n",
        "    venv)\n        echo 'error: failed to create directory: No space left on device"
        " (os error 28)' >&2; exit 2\n",
    )
    fake_uv.write_text(script)
    result = run_cli("install", "--frozen", "--target", "cpu", "--json")
    assert result.code == 5
    error = json.loads(result.out)["error"]
    assert error["kind"] == "storage"
    assert "no space left" in error["message"] and "no Python" not in error["message"]
    assert _prefixes(tmp_path / "store") == []


def test_os_error_in_tool_output() -> None:
    assert os_error_in("x (os error 2)") is None  # not a storage errno: the tool's words stand
    found = os_error_in("Caused by: Read-only file system (os error 30)")
    assert found is not None and found.errno == errno.EROFS
    error = storage_error(OSError(errno.EDQUOT, "x"), "/s/p", "a thing")
    assert isinstance(error, StorageError) and isinstance(error, OSError)
    assert error.exit_code == 5 and error.to_json()["error"]["errno"] == "EDQUOT"
    assert str(error) == error.message


def test_atomic_write_failure_is_typed_and_leaves_no_temporary(
    tmp_path: Path, write_faults: WriteFaults
) -> None:
    target = tmp_path / "dir" / "file.json"
    for n in (1, 2, 3, 4):  # mkdir, the temporary, chmod, the rename
        shutil.rmtree(target.parent, ignore_errors=True)
        write_faults.fail_at = n
        write_faults.seen.clear()
        with pytest.raises(StorageError) as info:
            atomic_write_text(target, "x", what="a test file")
        assert "a test file" in info.value.message and str(target) in info.value.message
        assert not target.exists()
        assert [p for p in tmp_path.rglob("*.tmp")] == []


def test_lock_write_on_a_full_disk(
    tmp_path: Path, write_faults: WriteFaults, project: Locked
) -> None:
    lock = read_lock(project.lock)
    assert lock is not None
    copy = tmp_path / "elsewhere" / "gpuenv.lock"
    write_faults.seen.clear()
    write_faults.fail_at = 2  # the temporary file (after the directory)
    with pytest.raises(StorageError) as info:
        write_lock(copy, lock)
    assert info.value.message.startswith("cannot write the lock")


def test_courtesy_caches_never_fail_a_command(
    project: Locked, write_faults: WriteFaults, run_cli: Callable[..., Cli], tmp_path: Path
) -> None:
    write_faults.root = tmp_path / "cache"
    for n in range(1, 8):
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        write_faults.seen.clear()
        write_faults.fail_at = n
        result = run_cli("plan", "--json")
        assert result.code == 0, result.err


def test_verification_record_on_a_full_disk(
    project: Locked,
    fake_uv: Path,
    write_faults: WriteFaults,
    run_cli: Callable[..., Cli],
    tmp_path: Path,
) -> None:
    assert run_cli("install", "--frozen", "--target", "cpu").code == 0
    prefix = Path(os.readlink(project.dir / ".gpuenv" / "cpu"))
    write_faults.root = prefix / "etc" / "gpuenv" / "verify"
    write_faults.seen.clear()
    write_faults.fail_at = 1
    result = run_cli("verify", "--target", "cpu", "--json", "--timeout", "60")
    assert result.code == 5, result.err + result.out
    error = json.loads(result.out)["error"]
    assert error["kind"] == "storage" and "verification record" in error["message"]


def test_an_atomic_write_replaces_only_a_regular_file(tmp_path: Path) -> None:
    """The rename replaced whatever the path named: `gpuenv import -o /dev/full --force`
    as root left a regular file where the device had been. A FIFO stands in for it."""
    fifo = tmp_path / "gpuenv.toml"
    os.mkfifo(fifo)
    with pytest.raises(StorageError, match="not a regular file"):
        atomic_write_text(fifo, "x = 1\n")
    assert fifo.is_fifo() and list(tmp_path.iterdir()) == [fifo]
    link = tmp_path / "link.toml"
    link.symlink_to(tmp_path / "real.toml")
    atomic_write_text(link, "x = 1\n")  # a dangling link: written as before
    regular = tmp_path / "real.toml"
    regular.write_text("old")
    atomic_write_text(regular, "new")
    assert regular.read_text() == "new"


def test_import_refuses_to_replace_a_device_or_fifo(
    run_cli: Callable[..., Cli], tmp_path: Path
) -> None:
    fifo = tmp_path / "gpuenv.toml"
    os.mkfifo(fifo)
    env = Path(__file__).parents[1] / "fixtures" / "importers" / "sd2022" / "environment.yaml"
    result = run_cli("import", str(env), "--gpu", "none", "-o", str(fifo), "--force")
    assert result.code == 2, result.err
    assert "not a regular file" in result.err and fifo.is_fifo()


def test_two_durable_writes_reach_the_disk_in_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpuenv add`` renames the spec just before the lock. Each durable write now
    fsyncs its folder after its rename: after a power loss the lock is never the newer
    of the two on disk. A folder that refuses fsync (some network file systems) is no
    error; a write that is not durable (inside a prefix) syncs nothing."""
    events: list[str] = []
    real_fsync, real_replace = os.fsync, Path.replace

    def fsync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        events.append(f"fsync {'folder' if os.path.isdir(target) else 'file'}")
        real_fsync(fd)

    def replace(self: Path, target: Path) -> Path:
        events.append(f"rename {Path(target).name}")
        return real_replace(self, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Path, "replace", replace)
    spec, lock = tmp_path / "gpuenv.toml", tmp_path / "gpuenv.lock"
    atomic_write_text(lock, "new lock", before_rename=lambda: atomic_write_text(spec, "new spec"))
    assert events == [
        "fsync file",  # the lock's bytes
        "fsync file",  # the spec's bytes
        "rename gpuenv.toml",
        "fsync folder",  # the spec's rename, before the lock's
        "rename gpuenv.lock",
        "fsync folder",
    ]
    assert (spec.read_text(), lock.read_text()) == ("new spec", "new lock")
    events.clear()
    atomic_write_text(tmp_path / "record.json", "{}", durable=False)
    assert events == ["rename record.json"]

    def refused(fd: int) -> None:
        if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.EINVAL, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", refused)
    atomic_write_text(lock, "again")
    assert lock.read_text() == "again"
