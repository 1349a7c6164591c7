"""The sha256 of a lock file's bytes comes from where the bytes were: ``write_lock_file``
(written or found already there) and ``load_lock`` (read). ``gpuenv run``'s shortcut is
keyed by it (``install.record_lock_state``), so it must be the digest of the file as it
is, not of the lock rendered again."""

from __future__ import annotations

import hashlib
from pathlib import Path

from gpuenv import _marker
from gpuenv.install import record_lock_state
from gpuenv.lock.format import load_lock, lock_digest, write_lock_file
from gpuenv.lock.model import Lock
from tests.locked import cpu_target


def _lock() -> Lock:
    return Lock("sha256:" + "2" * 64, {"cpu": cpu_target()})


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_writing_gives_the_digest_of_the_bytes_written_or_already_there(tmp_path: Path) -> None:
    path = tmp_path / "gpuenv.lock"
    first = write_lock_file(path, _lock())
    assert first.written and first.digest == _sha(path) == lock_digest(_lock())
    again = write_lock_file(path, _lock())
    assert not again.written and again.digest == first.digest


def test_reading_gives_the_digest_of_the_file_even_when_it_is_not_what_gpuenv_writes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gpuenv.lock"
    write_lock_file(path, _lock())
    with path.open("a", encoding="utf-8") as lock_file:
        lock_file.write("# reviewed for the paper's artifact\n")  # valid, not gpuenv's bytes
    reading = load_lock(path)
    assert reading is not None and reading.lock == _lock()
    assert reading.digest == _sha(path) != lock_digest(_lock())


def test_the_run_shortcut_is_keyed_by_the_file_as_read(tmp_path: Path) -> None:
    """Before, the state was keyed by the lock rendered again: for a file with other
    bytes (a comment), no file ever matched and every `gpuenv run` parsed the lock."""
    project = tmp_path / "project"
    (project / ".gpuenv").mkdir(parents=True)  # a project something is installed in
    path = project / "gpuenv.lock"
    write_lock_file(path, _lock())
    path.write_text(path.read_text(encoding="utf-8") + "# note\n", encoding="utf-8")
    reading = load_lock(path)
    assert reading is not None
    record_lock_state(project, reading.lock, ("cpu",), digest=reading.digest)
    state = _marker.read_lock_state(str(project))
    assert _marker.known_hash(state, _sha(path), "cpu") == _lock().targets["cpu"].content_hash
