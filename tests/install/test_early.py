"""install.early: wheels are unpacked into uv's cache while the fetch goes on, two runs at
once, outside the prefix; a failed early run is left to the full install; on any way out
every running uv is killed first."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from gpuenv import _proc
from gpuenv._fetch import Artifact
from gpuenv._uvbin import find_uv
from gpuenv.install.early import SCRATCH, EarlyWheels, early_wheels
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


def _unpacked(cache: Path) -> dict[str, Path]:
    """uv's unpacked wheels in ``cache``, by dist-info folder name."""
    return {p.name: p for p in cache.glob("archive-v0/*/*.dist-info")}


def test_wheels_stored_during_the_fetch_are_unpacked_into_uvs_cache_before_it_ends(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    prefix = tmp_path / "prefix"
    uv = _venv(prefix, env)
    wheels = _wheels(tmp_path / "store", "early-one", "early-two", "early-three")
    packages = [p for p, _ in wheels]
    with early_wheels(prefix, packages, uv, env) as early:
        for package, path in wheels:  # as the fetch's threads would, one by one
            early.stored(_artifact(package, path), path)
    assert sorted(early.unpacked) == ["early-one", "early-three", "early-two"]
    names = {f"{n}-1.0.dist-info" for n in ("early_one", "early_two", "early_three")}
    cache = tmp_path / "uv-cache"
    unpacked = _unpacked(cache)
    assert names <= set(unpacked)
    site = next((prefix / "lib").glob("python3*/site-packages"))
    assert not any((site / name).exists() for name in names)  # the prefix is not theirs
    assert not (prefix / SCRATCH).exists()  # their scratch folders are gone
    # what install_pip then runs over the whole requirements links them from the cache
    lines = [
        f"{p.name} @ {path.absolute().as_uri()} --hash=sha256:{p.sha256}" for p, path in wheels
    ]
    _proc.run(
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
            "--link-mode",
            "hardlink",
            "-r",
            "-",
        ],
        input_text="\n".join(lines) + "\n",
        timeout=120,
        env=env,
    )
    assert _unpacked(cache) == unpacked  # nothing unpacked again
    for name in names:
        installed = (site / name / "METADATA").stat()
        cached = (unpacked[name] / "METADATA").stat()
        assert (installed.st_ino, installed.st_dev) == (cached.st_ino, cached.st_dev)


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
    assert early.unpacked == ["kept"]


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
    assert early.unpacked == []


def test_a_wheel_stored_while_a_run_is_under_way_starts_a_second_and_abort_kills_both(
    tmp_path: Path,
) -> None:
    """uv locks an environment for a whole install: the runs go into scratch folders of
    their own, so torch stored during a run of small wheels is unpacked beside it."""
    uv, pids = _sleeping_uv(tmp_path)
    wheels = _wheels(tmp_path / "store", "small", "large", "later")
    prefix = tmp_path / "prefix"
    early = EarlyWheels(prefix, [p for p, _ in wheels], uv, dict(os.environ))
    try:
        early.stored(_artifact(*wheels[0]), wheels[0][1])
        _wait_for(pids)
        early.stored(_artifact(*wheels[1]), wheels[1][1])  # the first still runs
        first, second = _wait_for(pids, lines=2)
        early.stored(_artifact(*wheels[2]), wheels[2][1])  # both busy: it waits
        time.sleep(0.3)
        assert len(pids.read_text().split()) == 2
    finally:
        early.abort()
    for pid in (first, second):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
    assert early.unpacked == []


@pytest.mark.parametrize(("download", "runs"), [(1 << 20, 0), (64 << 20, 1), (None, 1)])
def test_a_small_download_gets_no_early_run_and_one_of_unknown_size_does(
    tmp_path: Path, download: int | None, runs: int
) -> None:
    """Below EARLY_MIN a uv start and the wheels linked twice cost more than unpacking
    beside the download saves; a size no server said is not taken for small."""
    uv, pids = _sleeping_uv(tmp_path, code=0)
    ((package, path),) = _wheels(tmp_path / "store", "sized")
    early = EarlyWheels(tmp_path / "prefix", [package], uv, dict(os.environ))
    early.expect(download)
    early.stored(_artifact(package, path), path)
    early.finish()
    assert (len(pids.read_text().split()) if pids.exists() else 0) == runs
    assert early.unpacked == (["sized"] if runs else [])


def test_no_early_run_where_uvs_cache_cannot_be_hard_linked_into_the_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv would copy instead: every wheel copied into a scratch folder, then again into
    the prefix. The probe leaves nothing behind, in the cache or the prefix."""
    uv, pids = _sleeping_uv(tmp_path, code=0)
    ((package, path),) = _wheels(tmp_path / "store", "copied")
    cache = tmp_path / "uv-cache"
    env = {**os.environ, "UV_CACHE_DIR": str(cache)}
    for works in (True, False):
        if not works:

            def no_link(*_args: object, **_kwargs: object) -> None:
                raise OSError(18, "Invalid cross-device link")

            monkeypatch.setattr(os, "link", no_link)
        pids.unlink(missing_ok=True)
        early = EarlyWheels(tmp_path / f"prefix-{works}", [package], uv, env)
        early.expect(None)
        early.stored(_artifact(package, path), path)
        early.finish()
        assert pids.exists() is works
        assert list(cache.iterdir()) == []
        assert not (tmp_path / f"prefix-{works}" / SCRATCH).exists()


def test_a_failed_early_run_ends_the_early_runs_and_is_not_raised(tmp_path: Path) -> None:
    uv, pids = _sleeping_uv(tmp_path, code=1)
    wheels = _wheels(tmp_path / "store", "first", "second")
    early = EarlyWheels(tmp_path / "prefix", [p for p, _ in wheels], uv, dict(os.environ))
    early.stored(_artifact(*wheels[0]), wheels[0][1])
    _wait_for(pids)
    deadline = time.monotonic() + 20
    while not early._stopped and time.monotonic() < deadline:
        time.sleep(0.02)
    early.stored(_artifact(*wheels[1]), wheels[1][1])  # after the failure: not run
    early.finish()
    assert len(pids.read_text().split()) == 1
    assert early.unpacked == []


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


def test_large_artifacts_download_two_at_a_time_the_largest_first_beside_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight large downloads side by side share the bandwidth, so the largest arrived
    last, and its unpacking was the install's last work: two at once, largest first,
    while the small ones go on in the other workers."""
    import threading

    from gpuenv.install import artifacts as fetching

    monkeypatch.setattr(fetching, "LARGE", 100)
    monkeypatch.setattr("gpuenv.builds.jobs.cores", lambda: 2)
    sizes = {"a": 500, "b": 400, "c": 300, "d": 200, "x": 10, "y": 20}
    lock_order = [Artifact((f"https://files.test/{n}",), n, f"{i:064x}", "pip") for i, n in
                  enumerate(sizes)]  # fmt: skip
    by_sha = {a.sha256: sizes[a.filename] for a in lock_order}
    guard = threading.Lock()
    large_started: list[str] = []
    running: list[str] = []
    most = [0]
    small_done = threading.Event()
    small_left = [2]

    def one(artifact: Artifact, _advance: object) -> Path:
        name = artifact.filename
        if sizes[name] < 100:
            with guard:
                small_left[0] -= 1
                if not small_left[0]:
                    small_done.set()
            return Path("/store") / name
        with guard:
            large_started.append(name)
            running.append(name)
            most[0] = max(most[0], len(running))
        small_done.wait(10)  # the small ones do not wait behind the large
        time.sleep(0.05)
        with guard:
            running.remove(name)
        return Path("/store") / name

    started = time.monotonic()
    paths = fetching._download(lock_order, by_sha, one)
    assert small_done.is_set() and time.monotonic() - started < 5
    # (the two of a pair start together: which appends first is the threads' race)
    assert set(large_started[:2]) == {"a", "b"} and set(large_started[2:]) == {"c", "d"}
    assert most[0] == 2
    assert [p.name for p in paths] == list(sizes)  # the lock's order


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
    assert died == [] and early.unpacked == [] and not pids.exists()


def test_the_archives_an_early_run_unpacked_are_let_go_from_the_page_cache(
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
    assert sorted(early.unpacked) == ["kept-one", "kept-two"]
    assert sorted(advised) == sorted(
        (str(path.resolve()), os.POSIX_FADV_DONTNEED) for _, path in wheels
    )
