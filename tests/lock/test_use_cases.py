"""The use cases ``gpuenv lock`` calls, without the CLI: ``lock.project.lock_spec_file``
(what to tell before the lock runs goes to ``warn``, the result comes back as a value)
and ``lock.inputs.check_spec_file`` (``--check``, its freshness note)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuenv.errors import CheckFailed, UsageError
from gpuenv.knowledge import knowledge_base
from gpuenv.knowledge._data import data_digest
from gpuenv.lock import _fresh
from gpuenv.lock.inputs import check_spec_file
from gpuenv.lock.options import LockSettings
from gpuenv.lock.project import LockAsk, LockRun, lock_spec_file
from tests.lock.fakes import FakeConda, FakePip

SPEC = """\
[project]
name = "two-cpus"

[stack]
python = "3.11"
torch = "2.4.*"

[targets.cpu]
gpu = "none"

[targets.cpu-old]
gpu = "none"
torch = "2.3.*"

[pip]
dependencies = ["tqdm>=1"]
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    spec = tmp_path / "project" / "gpuenv.toml"
    spec.parent.mkdir()
    spec.write_text(SPEC)
    return spec


def _lock(
    spec_file: Path, ask: LockAsk, settings: LockSettings | None = None
) -> tuple[LockRun, list[str], FakePip]:
    said: list[str] = []
    pip = FakePip()
    run = lock_spec_file(
        spec_file,
        knowledge_base,
        settings or LockSettings(),
        ask,
        kb_digest=data_digest(),
        warn=said.append,
        backends=lambda: (pip, FakeConda()),
    )
    return run, said, pip


def test_a_lock_returns_what_it_wrote_and_a_second_run_writes_nothing(spec_file: Path) -> None:
    run, said, _pip = _lock(spec_file, LockAsk())
    assert run.written and run.lock_path == spec_file.parent / "gpuenv.lock"
    assert [c.status for c in run.result.changes] == ["added", "added"] and said == []
    before = run.lock_path.read_bytes()
    again, said, _pip = _lock(spec_file, LockAsk())
    assert not again.written and run.lock_path.read_bytes() == before
    assert {c.status for c in again.result.changes} == {"unchanged"}


def test_a_lock_that_cannot_be_read_is_warned_about_and_written_anew(spec_file: Path) -> None:
    lock_path = spec_file.parent / "gpuenv.lock"
    lock_path.write_text("<<<<<<< HEAD\nversion = 2\n=======\n>>>>>>> theirs\n")
    run, said, _pip = _lock(spec_file, LockAsk(targets=("cpu",)))
    assert len(said) == 1 and said[0].endswith(
        "writing a new gpuenv.lock for every target (nothing in the old one could be kept)"
    )
    # starting over relocks every target, not only the one asked for
    assert {c.target for c in run.result.changes} == {"cpu", "cpu-old"} and run.written


def test_an_upgraded_package_the_lock_does_not_pin_is_warned_about(spec_file: Path) -> None:
    _lock(spec_file, LockAsk())
    run, said, _pip = _lock(spec_file, LockAsk(targets=("cpu",), upgrade_packages=("tqmd",)))
    assert said == [
        f"--upgrade-package tqmd: not locked in {run.lock_path} for cpu: nothing of it "
        "to move (check the spelling)"
    ]


def test_an_upgraded_package_with_no_lock_yet_is_warned_about_once_resolved(
    spec_file: Path,
) -> None:
    # No gpuenv.lock yet: a misspelt name was let through in silence (there was no lock
    # to look it up in). The resolution is where it is looked up then.
    ask = LockAsk(targets=("cpu",), upgrade_packages=("tqmd", "TQDM"))
    run, said, _pip = _lock(spec_file, ask)
    assert run.written
    assert said == [
        f"--upgrade-package tqmd: in neither {spec_file} nor what it resolved to for cpu "
        "(there was no lock: every pin is new anyway); check the spelling"
    ]


def test_a_requirement_given_as_an_upgraded_package_is_refused_before_resolving(
    spec_file: Path,
) -> None:
    with pytest.raises(UsageError, match=r"--upgrade-package 'tqdm>=4': not a package name"):
        _lock(spec_file, LockAsk(upgrade_packages=("tqdm>=4",)))
    assert not (spec_file.parent / "gpuenv.lock").exists()


def test_an_unknown_target_is_refused_before_the_lock_is_read(spec_file: Path) -> None:
    (spec_file.parent / "gpuenv.lock").write_text("not a lock")
    with pytest.raises(UsageError, match="no target named 'gpu'"):
        _lock(spec_file, LockAsk(targets=("gpu",)))
    with pytest.raises(UsageError, match="no target named 'gpu'"):
        check_spec_file(
            spec_file,
            knowledge_base,
            LockSettings(),
            targets=("gpu",),
            kb_digest=data_digest(),
            fresh=None,
        )


def test_check_of_a_fresh_lock_leaves_the_note_the_next_check_answers_from(
    spec_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    settings = LockSettings(cache_dir=cache)
    _lock(spec_file, LockAsk(), settings)
    fresh = _fresh.check_name(cache, str(spec_file), data_digest(), None)
    assert fresh is not None and _fresh.known_fresh(*fresh), "the lock left it (lock._noted)"
    shutil.rmtree(cache / "lock-check")  # as before a lock left one
    assert not _fresh.known_fresh(*fresh)
    lock_path = check_spec_file(
        spec_file, knowledge_base, settings, targets=None, kb_digest=data_digest(), fresh=fresh
    )
    assert lock_path == spec_file.parent / "gpuenv.lock" and _fresh.known_fresh(*fresh)


def test_a_lock_file_changed_after_the_lock_wrote_it_gets_no_note(
    spec_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The note is left for the bytes this lock wrote (their digest), not for whatever
    another writer put there before the note was made."""
    from gpuenv.lock import _noted

    real = _noted.note_written

    def after_another_writer(*args: object, **kwargs: object) -> int:
        lock = spec_file.parent / "gpuenv.lock"
        lock.write_text(lock.read_text() + "# edited\n")
        left: int = real(*args, **kwargs)  # type: ignore[arg-type]
        return left

    monkeypatch.setattr(_noted, "note_written", after_another_writer)
    cache = tmp_path / "cache"
    _lock(spec_file, LockAsk(), LockSettings(cache_dir=cache))
    fresh = _fresh.check_name(cache, str(spec_file), data_digest(), None)
    assert fresh is not None and not _fresh.known_fresh(*fresh)


def test_check_of_a_stale_lock_fails_and_leaves_no_note(spec_file: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    settings = LockSettings(cache_dir=cache)
    _lock(spec_file, LockAsk(), settings)
    spec_file.write_text(SPEC.replace("tqdm>=1", "tqdm>=1.1"))
    fresh = _fresh.check_name(cache, str(spec_file), data_digest(), None)
    assert fresh is not None
    with pytest.raises(CheckFailed, match="is out of date"):
        check_spec_file(
            spec_file, knowledge_base, settings, targets=None, kb_digest=data_digest(), fresh=fresh
        )
    assert not _fresh.known_fresh(*fresh)


def test_a_partial_lock_names_every_target_that_locked_for_install() -> None:
    """'meanwhile: gpuenv install --target h100' named the first of the targets that
    locked only; install takes --target once per target."""
    from gpuenv.errors import NetworkError
    from gpuenv.lock.model import Lock
    from gpuenv.lock.project import LockResult, TargetChange, partial_lock_error

    failure = NetworkError("the torch index https://t.invalid/whl/cpu cannot be used", cause="dns")
    result = LockResult(
        Lock("sha256:x", {}),
        (TargetChange("h100", "added"), TargetChange("a100", "unchanged")),
        failures={"laptop": failure},
    )
    error = partial_lock_error(result, lock_path=Path("gpuenv.lock"), written=True)
    assert "meanwhile: gpuenv install --target h100 --target a100" in (error.hint or "")
    assert error.extra["locked"] == ["h100", "a100"]
