"""``gpuenv add``/``remove`` are all or nothing. A relock that locked some targets and
not others wrote them into gpuenv.lock while gpuenv.toml was put back: the lock held a
requirement the spec no longer had, stale for every target, and ``run`` refused the
environment installed before (a first-week user, one target's torch index unreachable).
An install that fails after the relock puts the lock back with the spec."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.errors import InstallError
from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip, torch_index_down
from tests.lock.test_share import CLUSTER


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[FakePip, FakeConda]:
    from gpuenv.lock import backends

    pip, conda = FakePip(), FakeConda()
    monkeypatch.setattr(backends, "resolvers", lambda: (pip, conda))
    return pip, conda


@pytest.fixture
def locked(cli: Callable[..., CliResult], tmp_path: Path) -> tuple[Path, bytes, bytes]:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    assert cli("-f", str(spec), "lock").code == 0
    return spec, spec.read_bytes(), (tmp_path / "gpuenv.lock").read_bytes()


def _install_raises(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """The cpu login target counts as installed here, and installing it raises ``error``."""
    from gpuenv import install, runtime

    monkeypatch.setattr(runtime, "installed_targets", lambda project: ("login",))

    def raising(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(install, "install_locked", raising)


@pytest.mark.parametrize("command", [["add", "tokenizers"], ["remove", "transformers"]])
def test_a_relock_that_fails_for_one_target_writes_no_target(
    command: list[str],
    cli: Callable[..., CliResult],
    locked: tuple[Path, bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec, spec_before, lock_before = locked
    real = FakePip.resolve
    torch_index_down(monkeypatch)
    result = cli("-f", str(spec), *command, "--no-install", "--json")
    assert result.code == 5, result.err
    error = result.json()["error"]
    assert error["written"] is False and error["locked"] == ["login"]
    assert "locked but not written" in error["message"]
    assert "gpuenv.toml and gpuenv.lock left as they were" in error["message"]
    assert "meanwhile" not in (error.get("hint") or ""), "no install of a lock not written"
    assert spec.read_bytes() == spec_before
    assert (spec.parent / "gpuenv.lock").read_bytes() == lock_before
    monkeypatch.setattr(FakePip, "resolve", real)
    assert cli("-f", str(spec), "lock", "--check").code == 0, "the lock is the spec's still"


def test_an_install_that_fails_after_the_relock_puts_the_lock_back_too(
    cli: Callable[..., CliResult],
    locked: tuple[Path, bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec, spec_before, lock_before = locked
    _install_raises(monkeypatch, InstallError("uv pip install failed (exit 2)"))
    result = cli("-f", str(spec), "add", "tokenizers")
    assert result.code == 5, result.err
    assert "gpuenv.toml and gpuenv.lock put back as they were" in result.err
    assert spec.read_bytes() == spec_before
    assert (spec.parent / "gpuenv.lock").read_bytes() == lock_before


def test_a_first_add_that_fails_leaves_no_lock(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    _install_raises(monkeypatch, InstallError("uv pip install failed (exit 2)"))
    assert cli("-f", str(spec), "add", "tokenizers").code == 5
    assert spec.read_text() == CLUSTER
    assert not (tmp_path / "gpuenv.lock").exists()


def test_a_linked_private_lock_is_put_back_through_its_link_with_its_mode(
    cli: Callable[..., CliResult],
    locked: tuple[Path, bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec, _spec_before, lock_before = locked
    real = spec.parent / "kept" / "cluster.lock"
    real.parent.mkdir()
    (spec.parent / "gpuenv.lock").rename(real)
    real.chmod(0o600)
    (spec.parent / "gpuenv.lock").symlink_to(Path("kept") / "cluster.lock")
    _install_raises(monkeypatch, InstallError("uv pip install failed (exit 2)"))
    assert cli("-f", str(spec), "add", "tokenizers").code == 5
    link = spec.parent / "gpuenv.lock"
    assert link.is_symlink() and link.readlink() == Path("kept") / "cluster.lock"
    assert real.read_bytes() == lock_before and real.stat().st_mode & 0o777 == 0o600


def test_an_interrupted_add_says_what_it_put_back(
    cli: Callable[..., CliResult],
    locked: tuple[Path, bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec, spec_before, lock_before = locked
    _install_raises(monkeypatch, KeyboardInterrupt())
    result = cli("-f", str(spec), "add", "tokenizers")
    assert result.code == 130
    assert "gpuenv.toml and gpuenv.lock put back as they were" in result.err
    assert spec.read_bytes() == spec_before
    assert (spec.parent / "gpuenv.lock").read_bytes() == lock_before


@pytest.mark.parametrize("command", [["add", "tokenizers"], ["remove", "transformers"]])
def test_the_spec_is_written_after_the_resolution_just_before_the_locks_rename(
    command: list[str],
    cli: Callable[..., CliResult],
    locked: tuple[Path, bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGKILL during `gpuenv add` left gpuenv.toml edited and gpuenv.lock stale (13
    of 40 kills): the spec was written before the resolution, the lock after it. The
    edit is now resolved from the text in memory and written just before the lock's
    rename: a kill while resolving leaves both files as they were, and only one
    between the two renames leaves them apart."""
    spec, spec_before, lock_before = locked
    lock_path = spec.parent / "gpuenv.lock"
    events: list[str] = []
    resolve, rename = FakePip.resolve, Path.replace

    def resolving(self: FakePip, request: object) -> object:
        assert spec.read_bytes() == spec_before and lock_path.read_bytes() == lock_before
        events.append("resolve")
        return resolve(self, request)  # type: ignore[arg-type]

    def renaming(self: Path, target: str | Path) -> Path:
        if Path(target).name in ("gpuenv.toml", "gpuenv.lock"):
            events.append(Path(target).name)
        return rename(self, target)

    monkeypatch.setattr(FakePip, "resolve", resolving)
    monkeypatch.setattr(Path, "replace", renaming)
    assert cli("-f", str(spec), *command, "--no-install").code == 0
    assert "resolve" in events
    assert events[events.index("resolve") :][-2:] == ["gpuenv.toml", "gpuenv.lock"], events
    assert events.count("gpuenv.toml") == 1 and events.count("gpuenv.lock") == 1, events
    assert cli("-f", str(spec), "lock", "--check").code == 0


def test_a_spec_that_cannot_be_written_leaves_the_lock_as_it_was(
    cli: Callable[..., CliResult],
    locked: tuple[Path, bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The spec is written inside the lock's write, before its rename: a spec write that
    fails (a full disk) takes the new lock with it."""
    import errno

    from gpuenv import _fs

    spec, spec_before, lock_before = locked
    write = _fs.atomic_write_text

    def full(path: Path, text: str, **kwargs: object) -> None:
        if path.name == "gpuenv.toml":
            raise _fs.storage_error(OSError(errno.ENOSPC, "No space"), path, "gpuenv.toml")
        write(path, text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_fs, "atomic_write_text", full)
    result = cli("-f", str(spec), "add", "--no-install", "tokenizers")
    assert result.code == 5, result.err
    assert "no space left" in result.err and "Traceback" not in result.err
    assert "gpuenv.toml and gpuenv.lock left as they were" in result.err
    assert spec.read_bytes() == spec_before
    assert (spec.parent / "gpuenv.lock").read_bytes() == lock_before
    assert not [p.name for p in spec.parent.iterdir() if p.name.endswith(".tmp")]


def test_an_interrupt_between_the_two_renames_puts_the_spec_back(
    cli: Callable[..., CliResult],
    locked: tuple[Path, bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C after the spec's rename, before the lock's: the spec is put back."""
    spec, spec_before, lock_before = locked
    rename = Path.replace

    def interrupted(self: Path, target: str | Path) -> Path:
        if Path(target).name == "gpuenv.lock":
            raise KeyboardInterrupt
        return rename(self, target)

    monkeypatch.setattr(Path, "replace", interrupted)
    result = cli("-f", str(spec), "add", "--no-install", "tokenizers")
    assert result.code == 130
    assert "gpuenv.toml put back as it was" in result.err
    assert spec.read_bytes() == spec_before
    assert (spec.parent / "gpuenv.lock").read_bytes() == lock_before
    assert not [p.name for p in spec.parent.iterdir() if p.name.endswith(".tmp")]


def test_add_to_a_dated_spec_says_the_day_the_release_is_taken_as_of(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """A spec gpuenv import dated ([pip] exclude-newer) takes the release current that
    day, not today's newest: add says so, and --json gives the day."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        CLUSTER.replace(
            'dependencies = ["transformers>=1"]\n',
            'dependencies = ["transformers>=1"]\nexclude-newer = "2021-03-02"\n',
        )
    )
    assert cli("-f", str(spec), "lock").code == 0
    result = cli("-f", str(spec), "add", "tokenizers", "--no-install")
    assert result.code == 0, result.err
    assert (
        f"  as of 2021-03-02 ([pip] exclude-newer in {spec}): releases uploaded later "
        "are not taken; remove the key for today's\n" in result.out
    )
    pip, _ = fakes
    assert {r.exclude_newer for r in pip.requests} == {"2021-03-03T00:00:00Z"}
    result = cli("-f", str(spec), "add", "safetensors", "--no-install", "--json")
    assert json.loads(result.out)["exclude_newer"] == "2021-03-02"
