"""The store cannot be raced or tricked: gc against installs, moved projects, rollback
onto what is not a complete prefix. The real ``install_target`` runs with its build
step replaced by a double of the same signature (no uv: these are about the store)."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from unittest.mock import create_autospec

import pytest

from gpuenv import _marker
from gpuenv.errors import NotInstalled
from gpuenv.install import InstallRequest, install_target, pipeline
from gpuenv.lock.model import LockedTarget
from gpuenv.store import Store, current_prefix, point_project, pointer_path, rollback
from tests.locked import cpu_target


def target(n: int, name: str = "cpu") -> LockedTarget:
    """A CPU target; ``n`` makes its content (so its prefix) distinct."""
    return cpu_target(name, n)


def _fake_build(
    prefix: Path, store: Store, request: InstallRequest, progress: object
) -> tuple[str, tuple[object, ...]]:
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text("#!/bin/sh\n")
    delta = {"format": 1, "active": str(prefix), "ops": []}
    (prefix / "etc" / "gpuenv").mkdir(parents=True)
    (prefix / "etc" / "gpuenv" / "env-delta.json").write_text(json.dumps(delta))
    time.sleep(random.uniform(0, 0.002))
    return "3.11.9", ()  # the Python, and no compiled extensions


@pytest.fixture
def fake_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        pipeline, "_build", create_autospec(pipeline._build, side_effect=_fake_build)
    )


def request(project: Path, n: int, name: str = "cpu") -> InstallRequest:
    return InstallRequest(target=target(n, name), project=project, env_name="t")


def intact(project: Path, name: str = "cpu") -> bool:
    prefix = current_prefix(project, name)
    return prefix is not None and _marker.read_marker(prefix) is not None


def race_once(store: Store, project: Path, n: int) -> bool:
    """An install and a gc started together; True when the project ends up pointing at
    a complete prefix that gc, run again, still keeps."""
    start = threading.Barrier(2)
    results: list[object] = []

    def do_install() -> None:
        start.wait()
        results.append(install_target(store, request(project, n)))

    def do_gc() -> None:
        start.wait()
        time.sleep(random.uniform(0, 0.003))
        store.gc()

    threads = [threading.Thread(target=do_install), threading.Thread(target=do_gc)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return bool(results) and intact(project) and store.gc().removed == ()


@pytest.mark.usefixtures("fake_build")
def test_200_gc_install_races_never_leave_a_project_pointing_at_nothing(tmp_path: Path) -> None:
    failures = []
    for n in range(200):
        project = tmp_path / f"p{n}"
        project.mkdir()
        # One race per store, so gc's work stays small and the test quick.
        if not race_once(Store(tmp_path / f"store{n}"), project, n):
            failures.append(n)
    assert failures == [], f"{len(failures)} of 200 races lost the prefix"


def _install_in_child(store_root: str, project: str, n: int) -> None:  # pragma: no cover
    pipeline._build = _fake_build  # type: ignore[assignment]
    install_target(Store(Path(store_root)), request(Path(project), n))
    os._exit(0)


@pytest.mark.slow
@pytest.mark.usefixtures("fake_build")
def test_gc_install_races_between_processes(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    lost = 0
    for n in range(500):
        project = tmp_path / f"p{n}"
        project.mkdir()
        pid = os.fork()
        if pid == 0:
            _install_in_child(str(store.root), str(project), n)
        time.sleep(random.uniform(0, 0.004))
        store.gc()
        os.waitpid(pid, 0)
        lost += not intact(project)
    assert lost == 0


@pytest.mark.usefixtures("fake_build")
def test_gc_keeps_the_prefixes_of_a_moved_project_for_a_grace_period(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    old = tmp_path / "old-home"
    old.mkdir()
    first = install_target(store, request(old, 1)).prefix
    second = install_target(store, request(old, 2)).prefix  # first is now .previous
    moved = tmp_path / "new-home"
    old.rename(moved)
    result = store.gc()
    assert result.removed == () and first.exists() and second.exists()
    assert {g.prefix for g in result.graced} == {first, second}
    assert all(g.until > time.time() + 13 * 86400 for g in result.graced)
    assert {g.pointer for g in result.graced} == {
        pointer_path(old, "cpu").absolute(),
        pointer_path(old, "cpu", previous=True).absolute(),
    }
    # Using the moved project's pointers (as `gpuenv run` does) registers them again.
    _marker.refresh_roots(str(moved), "cpu")
    assert store.gc(grace_days=0).removed == (), "referenced from the new place"
    assert store.gc(grace_days=0).graced == ()


@pytest.mark.usefixtures("fake_build")
def test_a_vanished_project_goes_once_its_grace_is_over(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    project.mkdir()
    prefix = install_target(store, request(project, 1)).prefix
    for child in sorted(project.rglob("*"), reverse=True):
        child.unlink() if child.is_symlink() or child.is_file() else child.rmdir()
    project.rmdir()
    assert store.gc().graced[0].prefix == prefix
    gone = next((store.root / "roots").glob("*.gone"))
    os.utime(gone, (time.time() - 15 * 86400,) * 2)
    assert store.gc().removed == (prefix,)
    assert list((store.root / "roots").iterdir()) == []


@pytest.mark.usefixtures("fake_build")
def test_the_date_list_gives_a_vanished_project_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """list and gc --dry-run gave "kept until" a date that moved on with each look (the
    grace period started only at the first real gc): the first look starts it now."""
    store = Store(tmp_path / "store")
    old = tmp_path / "old-home"
    old.mkdir()
    prefix = install_target(store, request(old, 1)).prefix
    old.rename(tmp_path / "new-home")
    first = {i.path: i for i in store.list()}[prefix].kept_until
    assert first is not None
    later = time.time() + 5 * 86400
    monkeypatch.setattr(time, "time", lambda: later)
    assert {i.path: i for i in store.list()}[prefix].kept_until == first
    assert store.gc(dry_run=True).graced[0].until == first
    result = store.gc()
    assert result.removed == () and result.graced[0].until == first


@pytest.mark.usefixtures("fake_build")
def test_a_project_back_in_place_gets_a_full_grace_period_when_it_goes_again(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    project.mkdir()
    prefix = install_target(store, request(project, 1)).prefix
    project.rename(tmp_path / "away")
    assert store.gc().graced[0].prefix == prefix
    gone = next((store.root / "roots").glob("*.gone"))
    os.utime(gone, (time.time() - 13 * 86400,) * 2)  # gone for 13 of its 14 days
    (tmp_path / "away").rename(project)  # back
    assert store.gc().removed == () and not gone.exists()
    project.rename(tmp_path / "away")  # and gone again, a month later say
    result = store.gc()
    assert result.removed == () and result.graced[0].until > time.time() + 13 * 86400


@pytest.mark.usefixtures("fake_build")
def test_a_pointer_removed_from_a_live_project_is_garbage_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    project.mkdir()
    prefix = install_target(store, request(project, 1)).prefix
    pointer_path(project, "cpu").unlink()
    result = store.gc()
    assert result.removed == (prefix,) and result.graced == ()


@pytest.mark.usefixtures("fake_build")
@pytest.mark.parametrize("damage", ["no-marker", "fifo-marker", "other-target", "outside-store"])
def test_rollback_onto_an_incomplete_generation_is_refused_and_changes_nothing(
    tmp_path: Path, damage: str
) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    project.mkdir()
    first = install_target(store, request(project, 1)).prefix
    second = install_target(store, request(project, 2)).prefix
    marker = first / _marker.MARKER
    if damage == "no-marker":
        marker.unlink()
    elif damage == "fifo-marker":
        marker.unlink()
        os.mkfifo(marker)
    elif damage == "other-target":
        data = json.loads(marker.read_text())
        marker.write_text(json.dumps({**data, "target": "h100"}))
    else:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        previous = pointer_path(project, "cpu", previous=True)
        previous.unlink()
        previous.symlink_to(elsewhere)
    with pytest.raises(NotInstalled, match="nothing was changed") as refused:
        rollback(store, project, "cpu")
    assert refused.value.exit_code == 4
    assert current_prefix(project, "cpu") == second


@pytest.mark.usefixtures("fake_build")
def test_rollback_pins_the_generation_and_install_unpins_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    project.mkdir()
    first = install_target(store, request(project, 1))
    install_target(store, request(project, 2))
    rollback(store, project, "cpu")
    state = _marker.read_lock_state(str(project))
    assert _marker.rolled_back(state, "cpu") == target(1).content_hash
    del first


@pytest.mark.usefixtures("fake_build")
def test_point_project_holds_the_roots_lock(tmp_path: Path) -> None:
    """While gc holds the roots lock, an install's pointer move waits for it."""
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    project.mkdir()
    moved: list[float] = []
    with store.roots_locked():
        thread = threading.Thread(
            target=lambda: moved.append(install_target(store, request(project, 1)).seconds)
        )
        thread.start()
        time.sleep(0.3)
        assert moved == [] and current_prefix(project, "cpu") is None
    thread.join(timeout=10)
    assert moved and intact(project)


def test_roots_of_every_generation_remember_their_prefix(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    a, b = store.prefixes / "cpu-a", store.prefixes / "cpu-b"
    for prefix in (a, b):
        prefix.mkdir(parents=True)
    point_project(store, project, "cpu", a)
    point_project(store, project, "cpu", b)
    remembered = {
        os.readlink(link) for link in (store.root / "roots").glob(f"*{_marker.ROOT_PREFIX_SUFFIX}")
    }
    assert remembered == {str(a), str(b)}


Builder = Callable[[Path, Store, InstallRequest, object], str]


def test_the_build_double_keeps_the_real_signature() -> None:
    import inspect

    double = create_autospec(pipeline._build, side_effect=_fake_build)
    assert inspect.signature(double) == inspect.signature(pipeline._build)
    with pytest.raises(TypeError):
        double(Path("/x"))  # a call the real function would refuse
    assert replace(target(1), input_hash=target(2).input_hash) == target(2)


@pytest.mark.usefixtures("fake_build")
def test_a_marked_prefix_whose_delta_was_damaged_is_rebuilt(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    project = tmp_path / "p"
    project.mkdir()
    first = install_target(store, request(project, 1))
    assert install_target(store, request(project, 1)).built is False
    (first.prefix / "etc" / "gpuenv" / "env-delta.json").write_text("[" * 5000)
    again = install_target(store, request(project, 1))
    assert again.built is True and again.prefix == first.prefix


@pytest.mark.usefixtures("fake_build")
def test_list_says_what_gc_does_with_a_prefix_no_project_points_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """list said "gc removes it" of prefixes gc keeps for 14 days (a moved project's)."""
    from gpuenv.cli import main

    store = Store(tmp_path / "store")
    monkeypatch.setenv("GPUENV_HOME", str(store.root))
    old = tmp_path / "old-home"
    old.mkdir()
    moved_prefix = install_target(store, request(old, 1)).prefix
    old.rename(tmp_path / "new-home")
    live = tmp_path / "live"
    live.mkdir()
    dropped = install_target(store, request(live, 2)).prefix
    pointer_path(live, "cpu").unlink()  # a live project removed its pointer: garbage
    infos = {i.path: i for i in store.list()}
    assert infos[moved_prefix].kept_until is not None
    assert infos[moved_prefix].kept_until > time.time() + 13 * 86400
    assert infos[dropped].kept_until is None and infos[dropped].referenced_by == ()
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "none: its project moved or was deleted; gc keeps it until " in out
    assert "none: the next 'gpuenv gc' removes it" in out
    removed = store.gc().removed
    assert dropped in removed and moved_prefix not in removed, "list said what gc did"
