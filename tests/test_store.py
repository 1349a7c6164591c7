"""The store: markers, in-place discard, file locks, project pointers, rollback, gc."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from gpuenv.errors import NotInstalled
from gpuenv.store import (
    STAGING,
    STAGING_STALE_SECONDS,
    RolledBack,
    Store,
    current_prefix,
    default_root,
    point_project,
    pointer_path,
    read_marker,
    rollback,
)

HASH_A = "sha256:" + "a" * 64
HASH_B = "sha256:" + "b" * 64


def make_prefix(store: Store, target: str, lock_hash: str, *, installed: bool = True) -> Path:
    prefix = store.prefix_for(target, lock_hash)
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text("#!/bin/sh\n")
    (prefix / "lib").mkdir()
    (prefix / "lib" / "big").write_bytes(b"x" * 100_000)
    if installed:
        store.mark_installed(prefix, lock_hash=lock_hash, target=target, python="3.11")
    return prefix


def test_default_root_follows_gpuenv_home_then_xdg() -> None:
    assert default_root({"GPUENV_HOME": "/g", "XDG_DATA_HOME": "/x"}) == Path("/g")
    assert default_root({"XDG_DATA_HOME": "/x", "HOME": "/h"}) == Path("/x/gpuenv")
    assert default_root({"HOME": "/h"}) == Path("/h/.local/share/gpuenv")


def test_a_prefix_is_installed_only_with_a_matching_marker(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    prefix = make_prefix(store, "h100", HASH_A, installed=False)
    assert not store.is_installed(prefix, HASH_A)
    store.mark_installed(prefix, lock_hash=HASH_A, target="h100", python="3.11.9")
    assert store.is_installed(prefix, HASH_A)
    assert not store.is_installed(prefix, HASH_B)
    marker = read_marker(prefix)
    assert marker is not None and marker.python == "3.11.9"
    (prefix / "etc/gpuenv/installed.json").write_text("{truncated")
    assert not store.is_installed(prefix, HASH_A), "a damaged marker is not a marker"


def test_prefix_names_carry_target_and_lock_hash(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert store.prefix_for("h100", HASH_A).name == "h100-" + "a" * 16
    assert store.prefix_for("h100", HASH_A) != store.prefix_for("h100", HASH_B)


def test_discard_moves_away_atomically_then_deletes(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    prefix = make_prefix(store, "cpu", HASH_A, installed=False)
    store.discard(prefix)
    assert not prefix.exists()
    assert list((store.root / "trash").iterdir()) == []


def test_the_file_lock_serialises_builders(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    prefix = store.prefix_for("cpu", HASH_A)
    order: list[str] = []

    def worker(name: str) -> None:
        with store.locked(prefix):
            order.append(f"{name}-in")
            time.sleep(0.05)
            order.append(f"{name}-out")

    threads = [threading.Thread(target=worker, args=(str(i),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(order) == 8
    for i in range(0, 8, 2):
        assert order[i].endswith("-in") and order[i + 1].endswith("-out")
        assert order[i].split("-")[0] == order[i + 1].split("-")[0]


def test_pointers_keep_the_previous_generation_and_roll_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "project"
    project.mkdir()
    first = make_prefix(store, "h100", HASH_A)
    second = make_prefix(store, "h100", HASH_B)
    assert point_project(store, project, "h100", first) is None
    assert point_project(store, project, "h100", second) == first
    assert current_prefix(project, "h100") == second
    assert os.readlink(pointer_path(project, "h100", previous=True)) == str(first)
    assert (project / ".gpuenv" / ".gitignore").read_text().strip().endswith("*")
    assert rollback(store, project, "h100") == RolledBack(second, first, left_installed=True)
    assert current_prefix(project, "h100") == first
    undone = rollback(store, project, "h100")
    assert undone == RolledBack(first, second, left_installed=True), "a second one undoes it"


def test_rollback_without_a_previous_generation_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "project"
    point_project(store, project, "cpu", make_prefix(store, "cpu", HASH_A))
    with pytest.raises(NotInstalled, match="no previous generation") as refused:
        rollback(store, project, "cpu")
    assert refused.value.exit_code == 4, "not ready (documented), not an install failure"


def test_rollback_from_a_deleted_generation_goes_back_and_says_it_is_gone(
    tmp_path: Path,
) -> None:
    # The current prefix deleted by hand: rollback is the way back to the previous one
    # (it is intact); the one left is reported gone, and a second rollback, which has
    # nothing to return to, says why and changes nothing.
    store = Store(tmp_path / "store")
    project = tmp_path / "project"
    first = make_prefix(store, "cpu", HASH_A)
    second = make_prefix(store, "cpu", HASH_B)
    point_project(store, project, "cpu", first)
    point_project(store, project, "cpu", second)
    shutil.rmtree(second)
    assert rollback(store, project, "cpu") == RolledBack(second, first, left_installed=False)
    assert current_prefix(project, "cpu") == first
    with pytest.raises(NotInstalled, match="no longer there") as refused:
        rollback(store, project, "cpu")
    assert refused.value.exit_code == 4 and str(second) in str(refused.value)
    assert refused.value.hint is not None and "gpuenv install --target cpu" in refused.value.hint
    assert current_prefix(project, "cpu") == first
    assert os.readlink(pointer_path(project, "cpu", previous=True)) == str(second)


def test_gc_keeps_what_live_pointers_reach_and_frees_the_rest(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "project"
    old = make_prefix(store, "h100", HASH_A)
    new = make_prefix(store, "h100", HASH_B)
    orphan = make_prefix(store, "cpu", HASH_A)
    point_project(store, project, "h100", old)
    point_project(store, project, "h100", new)  # old stays as .previous
    result = store.gc()
    assert result.removed == (orphan,)
    assert result.freed_bytes >= 100_000
    assert old.exists() and new.exists()
    listing = {info.path: info for info in store.list()}
    assert listing[new].referenced_by == (pointer_path(project, "h100").absolute(),)
    # Deleting the project's pointers makes everything collectable.
    for pointer in (project / ".gpuenv").glob("h100*"):
        pointer.unlink()
    assert set(store.gc().removed) == {old, new}
    assert list((store.root / "roots").iterdir()) == [], "dead roots are forgotten"


def test_gc_dry_run_removes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    orphan = make_prefix(store, "cpu", HASH_A)
    result = store.gc(dry_run=True)
    assert result.removed == (orphan,) and orphan.exists()


def test_gc_counts_the_trash_an_interrupted_gc_left_and_a_dry_run_keeps_it(
    tmp_path: Path,
) -> None:
    """A gc SIGKILLed while deleting leaves folders in the store's trash. A dry run
    emptied it and said it would free 0 bytes; a real gc emptied it before it counted,
    so it said 0.0 MiB while the disk gained 14 MiB."""
    store = Store(tmp_path / "store")
    left = store.root / "trash" / "cpu-0123456789abcdef"
    (left / "lib").mkdir(parents=True)
    (left / "lib" / "big").write_bytes(b"x" * 300_000)
    dry = store.gc(dry_run=True)
    assert left.exists(), "a dry run deletes nothing"
    assert dry.interrupted == 1 and dry.freed_bytes >= 300_000
    real = store.gc()
    assert not left.exists()
    assert real.interrupted == 1 and real.freed_bytes == dry.freed_bytes


def test_gc_in_a_read_only_store_says_so_not_that_an_install_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from gpuenv import store as store_module
    from gpuenv.errors import StorageError

    store = Store(tmp_path / "store")
    real_acquire = store_module._acquire

    def refused(path: Path, timeout: float, *, shared: bool = False):  # type: ignore[no-untyped-def]
        if path.name == "artifacts-in-use.lock":
            raise StorageError("read-only", path=str(path), errno_name=errno.errorcode[errno.EROFS])
        return real_acquire(path, timeout, shared=shared)

    monkeypatch.setattr(store_module, "_acquire", refused)
    result = store.gc()
    assert result.caches_read_only and not result.caches_busy
    dry = store.gc(dry_run=True)
    assert not dry.caches_read_only and not dry.caches_busy, "a dry run still says all"


def test_an_environment_being_made_beside_the_prefixes_is_no_prefix(tmp_path: Path) -> None:
    """install.headstart makes an environment in ``prefixes/.uv-venv-*`` before it knows
    the prefix: list shows no such folder and gc leaves a fresh one to its install, but
    takes one a day old (the leftover of a SIGKILLed install), and frees its bytes."""
    store = Store(tmp_path / "store")
    kept = make_prefix(store, "cpu", HASH_A)
    point_project(store, tmp_path / "project", "cpu", kept)
    fresh = store.prefixes / f"{STAGING}fresh"
    stale = store.prefixes / f"{STAGING}stale"
    for folder in (fresh, stale):
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "big").write_bytes(b"x" * 50_000)
    day_old = time.time() - STAGING_STALE_SECONDS - 60
    os.utime(stale, (day_old, day_old))
    assert [info.path for info in store.list()] == [kept]
    dry = store.gc(dry_run=True)
    assert dry.removed == () and stale.exists() and dry.freed_bytes >= 50_000
    result = store.gc()
    assert result.removed == () and result.freed_bytes >= 50_000
    assert fresh.exists() and not stale.exists() and kept.exists()


def test_gc_skips_a_prefix_being_installed(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    building = make_prefix(store, "cpu", HASH_A, installed=False)
    with store.locked(building):
        result = store.gc()
    assert building.exists() and result.removed == ()
