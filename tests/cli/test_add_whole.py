"""``gpuenv add``/``remove`` are all or nothing. A relock that locked some targets and
not others wrote them into gpuenv.lock while gpuenv.toml was put back: the lock held a
requirement the spec no longer had, stale for every target, and ``run`` refused the
environment installed before (a first-week user, one target's torch index unreachable).
An install that fails after the relock puts the lock back with the spec."""

from __future__ import annotations

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
    assert "gpuenv.toml put back as it was" in error["message"]
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
