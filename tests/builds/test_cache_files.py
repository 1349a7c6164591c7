"""The build cache's own files are read bounded and checked (issue 24, finding 7): an
``entry.json`` or a wheel that is a FIFO hung install, one linked to ``/dev/zero`` filled
24 GB of memory, and a cached wheel of another package was installed. Each is now a
discarded entry (built again), found at once."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.builds.cache import ENTRY_FILE, BuildCache
from gpuenv.builds.model import BuildEntry, BuildInputs, BuildSource
from gpuenv.store import Store
from tests.fixtures.pkgindex.plugin import PkgIndex

IDENTITY = "sha256:" + "ab" * 32
ENTRY = BuildEntry(
    "fixture-pure",
    "0.3.0",
    BuildSource("sdist", "https://i.invalid/fixture_pure-0.3.0.tar.gz", "c" * 64),
    BuildInputs("3.11", "linux-64", against_torch=False, no_build_isolation=False),
    IDENTITY,
)
WHEEL = "fixture_pure-0.3.0-py3-none-any.whl"


def _entry(cache: BuildCache, wheel: str = WHEEL, body: bytes = b"PK wheel") -> Path:
    directory = cache.entry_dir(IDENTITY)
    directory.mkdir(parents=True)
    (directory / wheel).write_bytes(body)
    record = {"identity": IDENTITY, "wheel": wheel, "sha256": hashlib.sha256(body).hexdigest()}
    (directory / ENTRY_FILE).write_text(json.dumps(record))
    return directory


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _nested(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def _huge(path: Path) -> None:
    path.write_bytes(b" " * (2 << 20))


def _lookup(cache: BuildCache) -> object:
    found: list[object] = []
    worker = threading.Thread(target=lambda: found.append(cache.lookup(ENTRY)), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "the lookup hung"
    return found[0]


DAMAGE: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "entry-fifo": (ENTRY_FILE, _fifo, "FIFO"),
    "entry-dev-zero": (ENTRY_FILE, _dev_zero, "character device"),
    "entry-nested": (ENTRY_FILE, _nested, "nested"),
    "entry-huge": (ENTRY_FILE, _huge, "bytes"),
    "wheel-fifo": (WHEEL, _fifo, "FIFO"),
    "wheel-dev-zero": (WHEEL, _dev_zero, "character device"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_cache_file_that_is_not_a_plain_file_is_discarded_at_once(
    case: str, tmp_path: Path
) -> None:
    cache = BuildCache(Store(tmp_path / "store"))
    directory = _entry(cache)
    name, damage, said = DAMAGE[case]
    damage(directory / name)
    assert _lookup(cache) is None
    assert any(said in note for note in cache.notes), cache.notes
    assert not directory.exists(), "moved to the trash, to be built again"


def test_a_cached_wheel_of_another_package_is_not_installed(tmp_path: Path) -> None:
    cache = BuildCache(Store(tmp_path / "store"))
    _entry(cache, wheel="evil-9.9-py3-none-any.whl")
    assert _lookup(cache) is None
    assert any("is not a wheel of fixture-pure 0.3.0" in n for n in cache.notes)


def test_a_sound_entry_is_found(tmp_path: Path) -> None:
    cache = BuildCache(Store(tmp_path / "store"))
    _entry(cache)
    found = _lookup(cache)
    assert found is not None and cache.notes == []


def test_the_build_log_is_not_written_through_a_planted_link(
    tmp_path: Path, pkgindex: PkgIndex
) -> None:
    from gpuenv.builds.runner import BuildContext, wheel_for
    from tests.builds.conftest import uv_bin
    from tests.builds.test_cache import PURE, _environ, _setup

    prefix, entry, cache = _setup(tmp_path, pkgindex)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    log = cache.log_path(entry.identity)  # type: ignore[attr-defined]
    log.parent.mkdir(parents=True)
    log.symlink_to(victim)
    ctx = BuildContext(
        prefix=prefix, uv=uv_bin(), cuda_home=None, environ=_environ(tmp_path / "journal")
    )
    with wheel_for(cache, entry, ctx) as (wheel, _outcome):  # type: ignore[arg-type]
        assert wheel.sha256
    assert victim.read_text() == "keep me\n"
    assert not log.is_symlink() and PURE.name in log.read_text()
