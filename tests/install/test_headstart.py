"""install.headstart: the environment's ``uv venv`` begun before the prefix is known,
moved to the prefix when the install asks for that very environment, removed otherwise
(the whole install with it: tests/e2e/test_install.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuenv import _marker, _proc
from gpuenv._uvbin import find_uv
from gpuenv.errors import InstallError, UnreadableLockError
from gpuenv.install import headstart
from gpuenv.install.pip import start_venv
from gpuenv.store import STAGING, Store

PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
HASH = "sha256:" + "c" * 64


def lock_text(*targets: tuple[str, str], conda: bool = False) -> str:
    """A lock holding each (name, python) target, with the fields a head start reads."""
    out = ["lock-version = 2\n"]
    for name, python in targets:
        out.append(f'[targets.{name}]\ncontent-hash = "{HASH}"\nplatform = "linux-64"\n')
        out.append(f'[targets.{name}.stack]\npython = "{python}"\ncu-tag = "cpu"\n')
        if conda:
            out.append(f'[[targets.{name}.conda]]\nname = "python"\n')
    return "\n".join(out)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture(autouse=True)
def _nothing_held() -> Iterator[None]:
    yield
    headstart.release()


def staging_folders(store: Store) -> list[Path]:
    return sorted(store.prefixes.glob(f"{STAGING}*")) if store.prefixes.exists() else []


def test_a_plain_lock_starts_uv_venv_in_a_staging_folder_and_release_removes_it(
    store: Store, project: Path
) -> None:
    (project / "gpuenv.lock").write_text(lock_text(("cpu", PYTHON)))
    headstart.begin(store, project, ())
    assert len(headstart._held) == 1
    held = headstart._held[0]
    assert held.staging.parent == store.prefixes and held.staging.name.startswith(STAGING)
    assert held.argv[1] == "venv" and held.argv[-1] == str(held.staging)
    headstart.release()
    assert not headstart._held
    assert staging_folders(store) == []


@pytest.mark.parametrize(
    ("text", "targets"),
    [
        (None, ()),  # no lock
        ("not = [toml", ()),
        (lock_text(("cpu", PYTHON), ("gpu", "3.10")), ()),  # two Pythons: which one?
        (lock_text(("cpu", PYTHON), conda=True), ()),  # rattler makes conda prefixes
        (lock_text(("cpu", PYTHON)), ("other",)),  # a target the lock does not have
        ('lock-version = 2\n[targets.cpu]\nstack = "3.11"\n', ()),
        ("lock-version = 2\n", ()),
        # found by fuzzing: an unhashable Python value raised TypeError (exit 70)
        ("lock-version = 2\n[targets.cpu.stack]\npython = { v = 1 }\n", ()),
        ("lock-version = 2\n[targets.cpu.stack]\npython = [3, 11]\n", ()),
        ('lock-version = 2\n[targets.cpu.stack]\npython = "--help"\n', ()),
    ],
)
def test_nothing_starts_where_the_lock_does_not_say_plainly_which_environment(
    store: Store, project: Path, text: str | None, targets: tuple[str, ...]
) -> None:
    if text is not None:
        (project / "gpuenv.lock").write_text(text)
    headstart.begin(store, project, targets)
    assert not headstart._held
    assert staging_folders(store) == []


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_lock_that_is_no_regular_file_starts_nothing_and_never_hangs(
    store: Store, project: Path, kind: str
) -> None:
    """A FIFO in place of the lock blocked the head start's open() for good (the whole
    test run hung on tests/faults' hostile inputs): it reads through ``_fsread``."""
    lock = project / "gpuenv.lock"
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "directory":
        lock.mkdir()
    else:
        lock.symlink_to("/dev/zero")
    headstart.begin(store, project, ())
    assert not headstart._held


def test_the_targets_asked_for_decide_the_python(store: Store, project: Path) -> None:
    (project / "gpuenv.lock").write_text(lock_text(("cpu", PYTHON), ("gpu", "3.10")))
    headstart.begin(store, project, ("cpu",))
    assert len(headstart._held) == 1


def test_nothing_starts_when_a_target_is_installed_as_locked(store: Store, project: Path) -> None:
    """A no-op install (the common second run) pays for no uv it then kills."""
    (project / "gpuenv.lock").write_text(lock_text(("cpu", PYTHON)))
    prefix = store.prefix_for("cpu", HASH)
    prefix.mkdir(parents=True)
    store.mark_installed(prefix, lock_hash=HASH, target="cpu", python=PYTHON)
    (project / ".gpuenv").mkdir()
    os.symlink(prefix, _marker.pointer(project, "cpu"))
    headstart.begin(store, project, ())
    assert not headstart._held


def test_an_install_asking_for_that_environment_gets_it_at_its_prefix(
    store: Store, project: Path
) -> None:
    (project / "gpuenv.lock").write_text(lock_text(("cpu", PYTHON)))
    headstart.begin(store, project, ())
    held = headstart._held[0]
    env = {**held.env, "UV_INDEX_GPUENV_EXTRA_1_PASSWORD": "credential"}  # uv venv reads none
    prefix = store.prefix_for("cpu", HASH)
    venv = start_venv(prefix, PYTHON, Path(held.argv[0]), env)
    assert not headstart._held, "claimed"
    venv.wait()
    assert not held.staging.exists()
    assert (prefix / "pyvenv.cfg").is_file()
    activate = (prefix / "bin" / "activate").read_text()
    assert f"'{prefix}'" in activate and held.staging.name not in activate
    ran = _proc.run([prefix / "bin" / "python", "-c", "import sys; print(sys.prefix)"], timeout=60)
    assert ran.stdout.strip() == str(prefix)


def test_an_install_asking_for_other_settings_makes_its_own(store: Store, project: Path) -> None:
    (project / "gpuenv.lock").write_text(lock_text(("cpu", PYTHON)))
    headstart.begin(store, project, ())
    held = headstart._held[0]
    env = {**held.env, "UV_LINK_MODE": "copy"}
    prefix = store.prefix_for("cpu", HASH)
    start_venv(prefix, PYTHON, Path(held.argv[0]), env).wait()
    assert headstart._held == [held], "not taken: release removes it"
    assert (prefix / "pyvenv.cfg").is_file()
    headstart.release()
    assert staging_folders(store) == []


def test_a_failed_head_start_is_made_again_at_the_prefix_and_fails_as_its_own(
    store: Store, tmp_path: Path
) -> None:
    """The head start's uv failed (here: a stand-in that exits 1): the install runs
    ``uv venv`` at the prefix itself, so a real failure is said about the prefix."""
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    store.prefixes.mkdir(parents=True)
    staging = store.prefixes / f"{STAGING}failed"
    staging.mkdir()
    prefix = store.prefix_for("cpu", HASH)
    uv = Path(find_uv())
    failed = _proc.start(["false"], timeout=10, what="uv venv")
    argv = headstart.venv_command(staging, "3.99", uv)
    headstart._held.append(headstart.HeadStart(failed, staging, argv, env))
    venv = start_venv(prefix, "3.99", uv, env)
    assert not headstart._held, "claimed"
    with pytest.raises(InstallError, match=f"no Python 3.99 for target prefix {prefix.name}"):
        venv.wait()
    assert not staging.exists()


def test_the_environment_folder_name_is_replaced_only_in_the_files_that_hold_it(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "cpu-0123456789abcdef"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "activate").write_text("VIRTUAL_ENV='/s/prefixes/.uv-venv-1a2b'\n")
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    os.symlink("/usr/bin/python3", prefix / "bin" / "python")
    headstart._rename_inside(prefix, ".uv-venv-1a2b", prefix.name)
    assert (prefix / "bin" / "activate").read_text() == f"VIRTUAL_ENV='/s/prefixes/{prefix.name}'\n"
    assert (prefix / "pyvenv.cfg").read_text() == "home = /usr/bin\n"
    assert os.readlink(prefix / "bin" / "python") == "/usr/bin/python3"


def test_every_copy_of_the_lock_file_name_is_the_lock_format_s() -> None:
    """The hot paths name the lock file without importing gpuenv.lock.format."""
    from gpuenv.lock import _fresh
    from gpuenv.lock.format import LOCK_FILENAME
    from gpuenv.verify import gate

    assert headstart.LOCK_FILENAME == _fresh.LOCK_FILENAME == gate.LOCK_FILENAME == LOCK_FILENAME


def test_the_lock_the_head_start_parsed_is_not_parsed_again(store: Store, project: Path) -> None:
    """lock.format's reader takes the document the head start parsed, for the same text
    only, once."""
    from gpuenv import _toml
    from gpuenv.lock.format import parse_lock_text

    text = lock_text(("cpu", PYTHON))
    (project / "gpuenv.lock").write_text(text)
    headstart.begin(store, project, ())
    handed = _toml._handed[0][1]
    assert _toml.taken(text + "\n") is None, "another text: parsed as always"
    assert _toml.taken(text) is handed
    assert _toml.taken(text) is None, "once"
    _toml.hand_over(text, handed)
    with pytest.raises(UnreadableLockError):  # a lock of a head start's fields only
        parse_lock_text(text)
    assert not _toml._handed, "the reader took it"
