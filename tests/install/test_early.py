"""install.early: wheels go into the prefix while the fetch goes on; a failed early run
is left to the full install; on any way out the running uv is killed first."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from gpuenv import _proc
from gpuenv._fetch import Artifact
from gpuenv._uvbin import find_uv
from gpuenv.install.early import EarlyWheels, early_wheels
from gpuenv.lock.model import PipPackage
from tests.fixtures.pkgindex.wheels import WheelSpec, build_wheel


def _wheels(folder: Path, *names: str) -> list[tuple[PipPackage, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        spec = WheelSpec(name, "1.0")
        path = folder / spec.filename
        path.write_bytes(build_wheel(spec))
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        out.append((PipPackage(name, "1.0", f"https://files.test/{spec.filename}", sha), path))
    return out


def _artifact(package: PipPackage, path: Path) -> Artifact:
    return Artifact((package.url,), path.name, package.sha256, "pip")


def _venv(prefix: Path, env: dict[str, str]) -> Path:
    uv = Path(find_uv())
    _proc.run([uv, "venv", "--no-config", "--quiet", str(prefix)], timeout=120, env=env)
    return uv


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"}


def test_wheels_stored_during_the_fetch_are_installed_before_it_ends(tmp_path: Path) -> None:
    env = _env(tmp_path)
    prefix = tmp_path / "prefix"
    uv = _venv(prefix, env)
    wheels = _wheels(tmp_path / "store", "early-one", "early-two", "early-three")
    packages = [p for p, _ in wheels]
    with early_wheels(prefix, packages, uv, env) as early:
        for package, path in wheels:  # as the fetch's threads would, one by one
            early.stored(_artifact(package, path), path)
    assert sorted(early.installed) == ["early-one", "early-three", "early-two"]
    site = next((prefix / "lib").glob("python3*/site-packages"))
    for name in ("early_one", "early_two", "early_three"):
        assert (site / f"{name}-1.0.dist-info" / "RECORD").is_file()
    # what install_pip then runs over the whole requirements finds them in place
    lines = [
        f"{p.name} @ {path.absolute().as_uri()} --hash=sha256:{p.sha256}" for p, path in wheels
    ]
    result = _proc.run(
        [
            uv,
            "pip",
            "install",
            "--no-config",
            "--python",
            prefix / "bin" / "python",
            "--no-deps",
            "--require-hashes",
            "--offline",
            "-r",
            "-",
        ],
        input_text="\n".join(lines) + "\n",
        timeout=120,
        env=env,
    )
    assert "Installed" not in result.stderr, result.stderr


def test_an_sdist_or_a_file_of_another_target_is_left_to_the_full_install(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    prefix = tmp_path / "prefix"
    uv = _venv(prefix, env)
    (package, path), (other, other_path) = _wheels(tmp_path / "store", "kept", "elsewhere")
    sdist = PipPackage("built", "1.0", "https://files.test/built-1.0.tar.gz", "0" * 64)
    with early_wheels(prefix, [package, sdist], uv, env) as early:
        early.stored(_artifact(other, other_path), other_path)  # not this target's
        early.stored(Artifact((sdist.url,), "built-1.0.tar.gz", sdist.sha256, "pip"), path)
        early.stored(_artifact(package, path), path)
    assert early.installed == ["kept"]


def _sleeping_uv(tmp_path: Path, *, code: int | None = None) -> tuple[Path, Path]:
    """A stand-in uv that writes its pid, then sleeps (or exits ``code``)."""
    pids = tmp_path / "pids"
    script = tmp_path / "fake-uv"
    tail = f"exit {code}" if code is not None else "sleep 60"
    script.write_text(f'#!/bin/sh\necho $$ >> "{pids}"\ncat > /dev/null\n{tail}\n')
    script.chmod(0o755)
    return script, pids


def _wait_for(path: Path, lines: int = 1) -> list[int]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if path.exists() and len(found := path.read_text().split()) >= lines:
            return [int(p) for p in found]
        time.sleep(0.02)
    raise AssertionError(f"{path}: fewer than {lines} runs")


def test_a_failed_fetch_kills_the_running_early_uv_before_the_prefix_is_discarded(
    tmp_path: Path,
) -> None:
    uv, pids = _sleeping_uv(tmp_path)
    ((package, path),) = _wheels(tmp_path / "store", "slow")
    started = time.monotonic()
    prefix = tmp_path / "prefix"
    with (
        pytest.raises(RuntimeError, match="download failed"),
        early_wheels(prefix, [package], uv, dict(os.environ)) as early,
    ):
        early.stored(_artifact(package, path), path)
        (pid,) = _wait_for(pids)
        raise RuntimeError("download failed")
    assert time.monotonic() - started < 15  # not the 60 s the early uv would have taken
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
    assert early.installed == []


def test_a_failed_early_run_ends_the_early_runs_and_is_not_raised(tmp_path: Path) -> None:
    uv, pids = _sleeping_uv(tmp_path, code=1)
    wheels = _wheels(tmp_path / "store", "first", "second")
    early = EarlyWheels(tmp_path / "prefix", [p for p, _ in wheels], uv, dict(os.environ))
    early.stored(_artifact(*wheels[0]), wheels[0][1])
    _wait_for(pids)
    deadline = time.monotonic() + 20
    while early._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    early.stored(_artifact(*wheels[1]), wheels[1][1])  # after the failure: not run
    early.finish()
    assert len(pids.read_text().split()) == 1
    assert early.installed == []


def test_the_early_run_is_not_counted_as_downloaded_bytes(tmp_path: Path) -> None:
    """It reads the store's files: the download meter (``_proc.running``) leaves it out."""
    uv, pids = _sleeping_uv(tmp_path)
    ((package, path),) = _wheels(tmp_path / "store", "quiet")
    early = EarlyWheels(tmp_path / "prefix", [package], uv, dict(os.environ))
    try:
        early.stored(_artifact(package, path), path)
        (pid,) = _wait_for(pids)
        assert pid not in _proc.running()
    finally:
        early.abort()


def test_the_largest_artifacts_are_fetched_first_and_returned_in_the_locks_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuenv.install import artifacts as fetching

    monkeypatch.setattr(fetching, "FETCH_WORKERS", 1)  # one at a time: the order shows
    names = ["a-small", "b-large", "c-unknown", "d-middle"]
    lock_order = [Artifact((f"https://files.test/{n}",), n, f"{i:064x}", "pip") for i, n in
                  enumerate(names)]  # fmt: skip
    sizes = {lock_order[0].sha256: 10, lock_order[1].sha256: 5000, lock_order[3].sha256: 700}
    started: list[str] = []

    def one(artifact: Artifact, _advance: object) -> Path:
        started.append(artifact.filename)
        return Path("/store") / artifact.filename

    paths = fetching._download(lock_order, sizes, one)
    assert started == ["b-large", "d-middle", "a-small", "c-unknown"]
    assert [p.name for p in paths] == names


def test_an_entry_uv_must_not_read_ends_the_early_runs_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``requirement_line`` refuses it (the full install refuses it too, and says so):
    the early thread stops quietly instead of dying with a traceback on stderr."""
    import threading

    died: list[object] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    uv, pids = _sleeping_uv(tmp_path, code=0)
    ((package, path),) = _wheels(tmp_path / "store", "fine")
    odd = PipPackage("two words", "1.0", package.url, package.sha256)
    early = EarlyWheels(tmp_path / "prefix", [odd], uv, dict(os.environ))
    early.stored(_artifact(odd, path), path)
    early.finish()
    assert died == [] and early.installed == [] and not pids.exists()


def test_the_archives_an_early_run_installed_are_let_go_from_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv reads each stored wheel once; its pages are then the kernel's to reuse (for the
    files uv unpacks next), not gpuenv's to keep: released after the run, not before."""
    advised: list[tuple[str, int]] = []
    real_fadvise = os.posix_fadvise

    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append((os.readlink(f"/proc/self/fd/{fd}"), advice))
        real_fadvise(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", fadvise)
    env = _env(tmp_path)
    prefix = tmp_path / "prefix"
    uv = _venv(prefix, env)
    wheels = _wheels(tmp_path / "store", "kept-one", "kept-two")
    with early_wheels(prefix, [p for p, _ in wheels], uv, env) as early:
        for package, path in wheels:
            early.stored(_artifact(package, path), path)
    assert sorted(early.installed) == ["kept-one", "kept-two"]
    assert sorted(advised) == sorted(
        (str(path.resolve()), os.POSIX_FADV_DONTNEED) for _, path in wheels
    )
