"""A stored archive's writeback begins only once uv has been told of it: the call can
block while the disk's queue is full (0.5 s for a 900 MB wheel, measured), and the
wheel that arrives last would otherwise wait that out before uv could start on it."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpuenv import _fs
from gpuenv.install import InstallRequest
from gpuenv.install import artifacts as install_artifacts
from gpuenv.lock.model import PipPackage
from gpuenv.store import Store
from tests.locked import cpu_target


def test_uv_is_told_of_each_archive_before_its_writeback_begins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = []
    for name in ("one", "two", "three"):
        data = name.encode() * 1000
        path = tmp_path / "index" / f"{name}-1.0-py3-none-any.whl"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        wheels.append(PipPackage(name, "1.0", path.as_uri(), sha, size=len(data)))
    target = replace(cpu_target(), pip=tuple(wheels))
    store = Store(tmp_path / "store")
    request = InstallRequest(target=target, project=tmp_path, env_name="t")
    events: list[tuple[str, str]] = []
    monkeypatch.setattr(
        install_artifacts, "start_writeback", lambda path: events.append(("writeback", path.name))
    )
    install_artifacts.fetch_artifacts(
        store,
        request,
        lambda _line: None,
        on_stored=lambda _artifact, path: events.append(("stored", path.name)),
    )
    assert len(events) == 6
    for wheel in wheels:
        name = wheel.url.rsplit("/", 1)[1]
        assert events.index(("stored", name)) < events.index(("writeback", name))


def test_writeback_starts_on_the_stored_file_and_drops_no_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.whl"
    path.write_bytes(b"x" * 100_000)
    calls: list[tuple[int, int, int, int]] = []

    def sync_file_range(fd: int, offset: int, length: int, flags: int) -> int:
        calls.append((_fs.os.fstat(fd).st_size, offset, length, flags))
        return 0

    advised: list[int] = []
    monkeypatch.setattr(_fs.os, "posix_fadvise", lambda *args: advised.append(args[3]))
    monkeypatch.setattr(_fs, "_SYNC_FILE_RANGE", [sync_file_range])
    _fs.start_writeback(path)
    assert calls == [(100_000, 0, 0, 2)]  # SYNC_FILE_RANGE_WRITE alone: no waiting
    assert advised == []
    _fs.start_writeback(tmp_path / "gone.whl")  # nothing to open: nothing happens
    fifo = tmp_path / "fifo.whl"
    _fs.os.mkfifo(fifo)
    _fs.start_writeback(fifo)  # opened without waiting for a writer
    link = tmp_path / "link.whl"
    link.symlink_to(path)
    _fs.start_writeback(link)  # a link is not followed
    assert len(calls) == 2  # the FIFO opened at once; the link was never opened


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's own call")
def test_the_real_call_is_found_and_harmless(tmp_path: Path) -> None:
    assert _fs._sync_file_range() is not None
    path = tmp_path / "a.whl"
    path.write_bytes(b"x" * 100_000)
    _fs.start_writeback(path)
    assert path.read_bytes() == b"x" * 100_000
