"""Extended tar headers are refused from the raw bytes, before ``tarfile`` parses them
(issue 24, finding 7): a 51 KB archive with a pax-sparse member wrote 200 MiB before it
was refused, one huge pax header kept ``install --from`` busy for minutes
(CVE-2024-6232), and ``"format-version": true`` was taken for version 1."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path

import pytest

from gpuenv.errors import ArchiveError
from gpuenv.lock.model import Lock
from gpuenv.pack import PackRequest, prepare, unpack, write
from gpuenv.pack._prescan import prescan
from gpuenv.store import Store
from tests.pack.test_archive import _manifest_edit, _members, _rewrite, make_lock


@pytest.fixture
def packed(tmp_path: Path) -> tuple[Path, Lock]:
    lock = make_lock(tmp_path / "origin")
    spec = tmp_path / "gpuenv.toml"
    spec.write_text('[project]\nname = "attack"\n')
    plan = prepare(PackRequest(lock, ("cpu",), "attack", spec, Store(tmp_path / "pack-store")))
    archive = tmp_path / "good.tar"
    write(plan, archive)
    return archive, lock


def _with_pax(
    members: list[tuple[tarfile.TarInfo, bytes]], headers: dict[str, str]
) -> list[tuple[tarfile.TarInfo, bytes]]:
    info, data = members[-1]
    info.pax_headers = headers
    return [*members[:-1], (info, data)]


SPARSE = {
    "GNU.sparse.major": "1",
    "GNU.sparse.minor": "0",
    "GNU.sparse.name": "gpuenv-pack/artifacts/big",
    "GNU.sparse.realsize": str(200 << 20),
}


def _refused(archive: Path, tmp_path: Path, said: str) -> None:
    started = time.monotonic()
    with pytest.raises(ArchiveError, match=said) as refused:
        unpack(archive, Store(tmp_path / "air-store"))
    assert time.monotonic() - started < 10
    assert "Traceback" not in refused.value.message
    store_files = [p for p in (tmp_path / "air-store").rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in store_files) < 1 << 20, "nothing large was written"


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        (SPARSE, "pax key 'GNU.sparse"),
        ({"comment": "x" * 400_000}, "a pax header at offset .* over 4 KiB"),
        ({"linkpath": "/etc/passwd"}, "pax key 'linkpath'"),
    ],
    ids=["sparse", "huge", "linkpath"],
)
def test_extended_pax_headers_are_refused_before_tarfile_reads_them(
    packed: tuple[Path, Lock], tmp_path: Path, headers: dict[str, str], said: str
) -> None:
    archive, _lock = packed
    hostile = _rewrite(tmp_path / "hostile.tar", _with_pax(_members(archive), headers))
    _refused(hostile, tmp_path, said)


def test_gnu_and_global_headers_are_refused(packed: tuple[Path, Lock], tmp_path: Path) -> None:
    archive, _lock = packed
    members = _members(archive)
    gnu = tmp_path / "gnu.tar"
    with tarfile.open(gnu, "w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
        long = tarfile.TarInfo("gpuenv-pack/artifacts/" + "n" * 150)
        long.size = 1
        tar.addfile(long, io.BytesIO(b"x"))
    _refused(gnu, tmp_path, "a GNU long name")
    glob = tmp_path / "global.tar"
    with tarfile.open(glob, "w", format=tarfile.PAX_FORMAT, pax_headers={"a": "b"}) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
    _refused(glob, tmp_path, "a global pax header")


def test_a_boolean_format_version_is_not_version_1(
    packed: tuple[Path, Lock], tmp_path: Path
) -> None:
    archive, _lock = packed
    edit = _manifest_edit(lambda raw: raw.update({"format-version": True}))
    hostile = _rewrite(tmp_path / "bool.tar", edit(_members(archive)))
    _refused(hostile, tmp_path, "format version True")


def test_the_archives_gpuenv_writes_pass_the_scan(packed: tuple[Path, Lock]) -> None:
    archive, _lock = packed
    assert prescan(archive) is None
    with tarfile.open(archive) as tar:  # it does write pax headers (long paths)
        assert any(m.pax_headers for m in tar.getmembers())


def test_a_manifest_nested_too_deeply_is_refused(packed: tuple[Path, Lock], tmp_path: Path) -> None:
    from gpuenv.pack.manifest import MANIFEST
    from tests.pack.test_archive import _regular

    archive, _lock = packed
    members = _members(archive)
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    hostile = _rewrite(tmp_path / "deep.tar", [_regular(MANIFEST, deep), *members[1:]])
    _refused(hostile, tmp_path, "nested too deeply")
