"""Deterministic tar writing and a reader that trusts nothing.

Writing: an uncompressed POSIX (pax) tar whose members are regular files only, in the
order given, each with fixed owner (0/0, no names), mode 0644 and mtime; no directory
entries, no compression (so no compression timestamp). The exact size of the result is
computed from the headers before anything is written.

Reading: members are taken one at a time (``tarfile`` streaming), each checked before
its data is touched: a regular file (not a link, device, FIFO, directory or sparse
file), a name without ``..`` or a leading ``/``, never seen before in this archive.
Callers then match each name against the manifest; nothing here extracts to a path
taken from the archive.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, Protocol

from gpuenv._fs import special_kind
from gpuenv.errors import ArchiveError, InstallError
from gpuenv.pack._prescan import prescan

FORMAT: Literal[2] = tarfile.PAX_FORMAT
ENCODING = "utf-8"
MTIME = 946684800  # 2000-01-01T00:00:00Z: a fixed time for every member
MODE = 0o644
BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE
CHUNK = 1 << 20

Advance = Callable[[int], None]


@dataclass(frozen=True)
class Entry:
    """One member to write: its bytes in memory, or a file (checked while copied)."""

    name: str
    size: int
    data: bytes | None = None
    source: Path | None = None
    sha256: str | None = None  # the file must hash to this (it came from a cache)


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = MTIME
    info.mode = MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def member_size(name: str, size: int) -> int:
    """The bytes one member takes in the archive: its header(s) and its padded data."""
    return len(_info(name, size).tobuf(FORMAT, ENCODING, "strict")) + _padded(size)


def archive_size(entries: list[Entry]) -> int:
    """The exact size of ``write_archive(entries)``'s file, computed from the headers."""
    total = sum(
        len(_info(e.name, e.size).tobuf(FORMAT, ENCODING, "strict")) + _padded(e.size)
        for e in entries
    )
    total += 2 * BLOCK  # the end-of-archive marker
    return -(-total // RECORD) * RECORD


class _Hashing:
    """A file object that hashes what is read from it and reports the bytes."""

    def __init__(self, handle: IO[bytes], source: Path, advance: Advance) -> None:
        self._handle = handle
        self._source = source
        self._advance = advance
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._handle.read(size)
        except OSError as exc:
            raise InstallError(f"cannot read {self._source}: {exc.strerror or exc}") from None
        self.digest.update(data)
        self._advance(len(data))
        return data


def _add_file(tar: tarfile.TarFile, entry: Entry, advance: Advance) -> None:
    assert entry.source is not None
    try:
        handle = open(entry.source, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InstallError(f"cannot read {entry.source}: {exc.strerror or exc}") from None
    with handle:
        if os.fstat(handle.fileno()).st_size != entry.size:
            raise InstallError(
                f"{entry.source} changed size since it was checked",
                hint="run gpuenv pack again: the cached copy will be fetched again",
            )
        reader = _Hashing(handle, entry.source, advance)
        tar.addfile(_info(entry.name, entry.size), reader)
    if entry.sha256 and reader.digest.hexdigest() != entry.sha256:
        with suppress(OSError):
            entry.source.unlink()  # a damaged stored artifact is never used again
        raise DamagedSource(entry.source)


class DamagedSource(InstallError):
    """A stored artifact no longer matches its sha256 (damaged on disk after it was
    checked): it was removed from the store, so that it is fetched again."""

    def __init__(self, source: Path) -> None:
        super().__init__(
            f"{source} no longer matches the sha256 in the lock (it was damaged on disk "
            "after being checked); it was removed from the store",
            hint="run gpuenv pack again: the artifact will be downloaded again",
        )
        self.source = source


def write_archive(path: Path, entries: list[Entry], advance: Advance) -> None:
    """Write ``entries`` to ``path`` atomically (a temporary file renamed into place)."""
    import io
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with (
            os.fdopen(fd, "wb") as raw,
            tarfile.open(fileobj=raw, mode="w:", format=FORMAT, encoding=ENCODING) as tar,
        ):
            for entry in entries:
                if entry.data is not None:
                    tar.addfile(_info(entry.name, entry.size), io.BytesIO(entry.data))
                    advance(entry.size)
                else:
                    _add_file(tar, entry, advance)
        Path(tmp).chmod(MODE)
        Path(tmp).replace(path)
    except BaseException as exc:
        with suppress(FileNotFoundError):
            Path(tmp).unlink()
        if isinstance(exc, OSError):  # a full or read-only disk: nothing was left behind
            raise InstallError(
                f"cannot write {path}: {exc.strerror or exc}",
                hint="free some space there, or write the archive elsewhere (-o)",
            ) from None
        raise


# --- reading -----------------------------------------------------------------------------------

_KINDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.DIRTYPE: "a directory",
    tarfile.GNUTYPE_SPARSE: "a sparse file",
    tarfile.CONTTYPE: "a contiguous file",
}


def hostile(reason: str, archive: Path) -> ArchiveError:
    return ArchiveError(
        f"refused {archive}: {reason}",
        hint="this is not an archive gpuenv pack wrote, or it was altered: nothing was installed",
    )


def check_member(member: tarfile.TarInfo, archive: Path, seen: set[str]) -> None:
    """Refuse anything but a plain, new, relative regular file."""
    name = member.name
    if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in name.split("/")):
        raise hostile(
            f"member {name!r} has an unsafe path (absolute, '..' or empty parts)", archive
        )
    if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
        kind = _KINDS.get(member.type, f"of tar type {member.type!r}")
        raise hostile(f"member {name!r} is {kind}, not a regular file", archive)
    if name in seen:
        raise hostile(f"member {name!r} appears twice", archive)
    seen.add(name)


@contextmanager
def open_archive(archive: Path) -> Iterator[tarfile.TarFile]:
    """The archive for streaming reads; ``ArchiveError`` when it is not a plain tar.

    A path that is not a regular file is refused before it is opened: a FIFO with no
    writer would block open(2) for ever, and a pipe (``--from <(curl ...)``) or a device
    cannot be read twice, as unpacking does."""
    try:
        kind = special_kind(archive.stat().st_mode)
    except OSError:
        kind = None  # missing or unreadable: the open below says which
    if kind is not None:
        raise ArchiveError(
            f"{archive} is {kind}, not a file: install --from reads the archive more than once",
            hint="save it to a file first, then: gpuenv install --from FILE",
        )
    with suppress(OSError):  # missing or unreadable: the open below says which
        problem = prescan(archive)  # extended headers are refused before tarfile parses them
        if problem:
            raise hostile(problem, archive)
    try:
        tar = tarfile.open(archive, mode="r:", encoding=ENCODING, errors="strict")  # noqa: SIM115
    except FileNotFoundError:
        raise ArchiveError(f"{archive}: no such file") from None
    except IsADirectoryError:
        raise ArchiveError(f"{archive} is a directory, not an archive") from None
    except (tarfile.TarError, OSError, UnicodeError) as exc:
        raise hostile(f"not an uncompressed tar archive ({exc})", archive) from None
    try:
        yield tar
    finally:
        tar.close()


def members(tar: tarfile.TarFile, archive: Path) -> Iterator[tarfile.TarInfo]:
    """Each member's header, checked (see ``check_member``); truncation is an error."""
    seen: set[str] = set()
    while True:
        try:
            member = tar.next()
        except (tarfile.TarError, OSError, UnicodeError) as exc:
            raise hostile(f"damaged or truncated ({exc})", archive) from None
        if member is None:
            return
        check_member(member, archive, seen)
        yield member


def read_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Path) -> bytes:
    handle = tar.extractfile(member)
    assert handle is not None  # a regular file
    try:
        data = handle.read()
    except (tarfile.TarError, OSError) as exc:
        raise hostile(f"{member.name}: damaged or truncated ({exc})", archive) from None
    if len(data) != member.size:
        raise hostile(f"{member.name}: truncated", archive)
    return data


class Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def copy_member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    out: Sink,
    archive: Path,
    advance: Advance,
    digests: Digest,
) -> None:
    """Stream the member into ``out``, hashing it into ``digests`` on the way."""
    handle = tar.extractfile(member)
    assert handle is not None
    copied = 0
    while True:
        try:
            chunk = handle.read(CHUNK)
        except (tarfile.TarError, OSError) as exc:
            raise hostile(f"{member.name}: damaged or truncated ({exc})", archive) from None
        if not chunk:
            break
        digests.update(chunk)
        out.write(chunk)  # a full disk is the caller's to report, not a damaged archive
        copied += len(chunk)
        advance(len(chunk))
    if copied != member.size:
        raise hostile(f"{member.name}: truncated", archive)
