"""File-system helpers shared by every module that writes: atomic replacement, and the
one place where a failed write becomes a typed error.

A write can fail for reasons that are the machine's, not gpuenv's: a full disk or
quota, a read-only mount, a permission, an I/O error. ``writing(path, what)`` wraps
any block that writes and turns an ``OSError`` raised in it into ``StorageError``
(exit 5, ``"kind": "storage"``) naming the file, what it is, and what to do.
``atomic_write_text`` writes through it; other write sites (directories, links,
renames, file locks) use it directly.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from gpuenv.errors import StorageError, UsageError

# A file system that refuses writes to this user: a read-only mount, or one whose
# permissions say no. Callers with somewhere else to go (verification records, file
# locks of a shared store) fall back on these; every other errno is just an error.
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})

_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "it is on a read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EIO: "an I/O error (the disk or network file system failed)",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "a directory is in the way",
    errno.ENAMETOOLONG: "the path is too long",
    errno.EMLINK: "too many links in the directory",
    errno.ELOOP: "too many symbolic links in the path",
}


def _advice(code: int | None, directory: str) -> str:
    if code == errno.ENOSPC:
        return (
            f"free space on the file system of {directory} "
            "(gpuenv gc removes prefixes no project uses), then retry"
        )
    if code == errno.EDQUOT:
        return f"free space within your quota on {directory}, or ask for a larger one, then retry"
    if code == errno.EROFS:
        return (
            f"{directory} is mounted read-only: write it from a machine that mounts it "
            "read-write, or point gpuenv elsewhere (GPUENV_HOME for the store, "
            "GPUENV_CACHE_DIR for the cache)"
        )
    if code in (errno.EACCES, errno.EPERM):
        return f"check the owner and permissions of {directory} (ls -ld {directory})"
    if code == errno.EIO:
        return "check the disk or the network file system (dmesg), then retry"
    return f"check {directory}, then retry"


# Linux's inode flags (``chattr``), read with FS_IOC_GETFLAGS: what no mode bit shows
_FS_IOC_GETFLAGS = 0x80086601
_FLAGS = ((0x10, "immutable", "+i"), (0x20, "append-only", "+a"))


def attribute_refusing_writes(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """("immutable", "+i") or ("append-only", "+a") where ``path`` carries that ``chattr``
    attribute (a rename over it, or a new name in it when it is a folder, is refused
    even to root, whatever its mode says); None where it has neither or it cannot be
    told (not Linux, a file system without the flags, no such file)."""
    import array
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (OSError, ValueError):
        return None
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
    except OSError:
        return None
    finally:
        os.close(fd)
    return next(((name, how) for bit, name, how in _FLAGS if flags[0] & bit), None)


def _attribute_advice(code: int | None, where: str) -> str | None:
    """The ``chattr`` attribute that refused the write at ``where`` (the file, or its
    folder), as advice; None where no attribute explains it."""
    return attribute_advice(where) if code in (errno.EPERM, errno.EACCES) else None


def attribute_advice(where: str) -> str | None:
    """How to lift the ``chattr`` attribute that refuses writing ``where`` (the file, or
    a new name in its folder); None where neither carries one."""
    for path in (where, str(Path(where).parent)):
        found = attribute_refusing_writes(path)
        if found is not None:
            name, how = found
            return (
                f"{path} is {name} (chattr {how}): remove it with chattr -{how[1]} {path} as root"
            )
    return None


def storage_error(
    exc: OSError, path: str | os.PathLike[str], what: str, *, hint: str | None = None
) -> StorageError:
    """``exc``, raised while writing ``what`` at ``path``, as a ``StorageError``. A
    ``chattr`` attribute that refused it is named over ``hint``: no mode or owner
    change the hint may suggest would help."""
    if isinstance(exc, StorageError):
        return exc
    where = os.fspath(path)
    directory = str(Path(where).parent)
    code = exc.errno
    reason = _REASONS.get(code) if code is not None else None
    if reason is None:
        reason = exc.strerror or str(exc) or type(exc).__name__
    return StorageError(
        f"cannot write {what} ({where}): {reason}",
        path=where,
        errno_name=errno.errorcode.get(code) if code is not None else None,
        hint=_attribute_advice(code, where) or hint or _advice(code, directory),
    )


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], what: str, *, hint: str | None = None) -> Iterator[None]:
    """Turn an ``OSError`` raised by the block (which writes ``what`` at ``path``)
    into a ``StorageError``. A ``StorageError`` from a nested block passes unchanged."""
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise storage_error(exc, path, what, hint=hint) from exc


def is_read_only(exc: BaseException) -> bool:
    """Whether ``exc`` (an ``OSError`` or the ``StorageError`` made from one) says the
    file system refuses this user's writes there (read-only, or no permission)."""
    if isinstance(exc, StorageError):
        return exc.errno_name in {errno.errorcode[c] for c in READ_ONLY_ERRNOS}
    return isinstance(exc, OSError) and exc.errno in READ_ONLY_ERRNOS


def _only_replaces_a_file(path: Path) -> None:
    """The rename replaces whatever ``path`` names: a device (``-o /dev/full`` as root
    put a regular file where the device was), a FIFO or a socket. Only a regular file or
    a symbolic link is replaced: renaming over a link replaces the link, never what it
    points to, so gpuenv's own cache files can always be rewritten (one that a link made
    into ``/dev/zero`` included); ``output_path`` writes through a link a user named."""
    try:
        info = path.lstat()
    except OSError:
        return  # nothing there (or unreadable: the write itself says why)
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise OSError(errno.EEXIST, f"it is {kind}: gpuenv replaces only files", str(path))


def temporary_beside(
    path: Path, *, prefix: str, suffix: str = "", made: list[Path] | None = None
) -> tuple[int, Path]:
    """A new file in ``path``'s folder under a random name, open for reading and
    writing: created exclusively, mode 0600, not through a symbolic link, closed on
    exec, as ``tempfile.mkstemp`` creates one, without importing ``tempfile`` (with
    ``random`` and ``shutil``'s ``bz2`` and ``lzma``: 3 ms of an install's start).

    ``made`` is told the name before the file is created: a caller that calls this
    inside its ``try`` can remove the file on Ctrl-C even when the interrupt lands
    after the file exists but before this returns (a name in ``made`` may not exist)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        candidate = path.parent / f"{prefix}{os.urandom(6).hex()}{suffix}"
        if made is not None:
            made.append(candidate)
        try:
            return os.open(candidate, flags, 0o600), candidate
        except FileExistsError:
            if made is not None:
                made.remove(candidate)  # someone else's: never removed by the caller
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(path.parent))


def remove_made(made: list[Path]) -> None:
    """Remove the temporary files ``temporary_beside`` named in ``made`` (those that
    exist): a write that failed or was interrupted leaves none behind."""
    for leftover in made:
        with contextlib.suppress(OSError):
            leftover.unlink()


def start_writeback(path: Path) -> None:
    """Begin writing a just-stored file's dirty pages to disk, waiting for none and
    dropping none, so that ``release_cached`` finds them clean (droppable) once uv has
    read them from memory. Linux's ``sync_file_range(SYNC_FILE_RANGE_WRITE)``;
    elsewhere nothing. Called once uv has been told of the file: it blocks while the
    disk's queue is full (up to 0.5 s for a 900 MB wheel, measured), which the wheel
    that arrives last would otherwise wait out before uv could start on it.

    Not ``POSIX_FADV_DONTNEED``: it starts the same writeback, but also drops the pages
    already clean, and with gigabytes written in seconds the kernel's flusher has
    cleaned many. uv then read them back from disk: 3.5 GB of a 4.2 GB cold CUDA
    install, every run (``/proc/diskstats``)."""
    call = _sync_file_range()
    if call is not None:  # its -1 on a failure is ignored: advice, not work
        _on_opened(path, lambda fd: call(fd, 0, 0, _SYNC_FILE_RANGE_WRITE))


_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writing the dirty pages, do not wait
_SYNC_FILE_RANGE: list[Callable[[int, int, int, int], int] | None] = []


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's ``sync_file_range``, looked up once (ctypes is imported only by the
    downloads that need it); None where the C library has none (macOS)."""
    if not _SYNC_FILE_RANGE:
        found = None
        if os.name == "posix":
            import ctypes

            with contextlib.suppress(OSError, AttributeError):
                function = ctypes.CDLL(None, use_errno=True).sync_file_range
                function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
                function.restype = ctypes.c_int
                found = function
        _SYNC_FILE_RANGE.append(found)
    return _SYNC_FILE_RANGE[0]


def release_cached(path: Path) -> None:
    """Let the kernel drop the page cache of a file gpuenv has finished with for now.

    A cold install writes every artifact into the store (about 4 GiB for a CUDA stack),
    and uv reads each once, right after; pack and later installs read it from disk
    again, if ever. Left cached, those pages crowd out what the user had cached, count
    against a container's memory limit, and keep uv from reusing them for the 7 GiB it
    unpacks next: on a virtual machine whose host backs each fresh page on first touch,
    that reuse alone made a cold CUDA install 2 to 3 s faster (bench/install.py). Pages
    still being written back stay; nothing happens where the call does not exist."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        _on_opened(path, lambda fd: advise(fd, 0, 0, os.POSIX_FADV_DONTNEED))


def _on_opened(path: Path, action: Callable[[int], object]) -> None:
    """``action(fd)`` on ``path`` opened for reading, without following a link or
    waiting on a FIFO put in the store's place; nothing happens when it cannot be
    opened, and a failed ``action`` is nothing either (advice, not work)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        action(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(
    path: Path,
    text: str,
    *,
    mode: int = 0o644,
    durable: bool = True,
    what: str = "a file",
    hint: str | None = None,
    before_rename: Callable[[], None] | None = None,
) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never
    a half-written one: a temporary file in the same directory, renamed over it.

    ``durable`` also fsyncs the data before the rename and the folder after it, so the
    file itself survives a power loss, not only a killed process, and two such writes
    land in the order they were made: for files users keep (the lock, the spec).
    Files inside a prefix skip it (see ``Store.mark_installed``). A failure is a
    ``StorageError`` about ``what`` (see ``writing``); no temporary file is left.
    ``before_rename`` runs once the new file is complete, just before its rename (the
    write of another file that must land with this one, as close to it as can be); what
    it raises leaves ``path`` as it was."""
    with writing(path, what, hint=hint):
        _only_replaces_a_file(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        made: list[Path] = []
        try:
            fd, tmp = temporary_beside(path, prefix=f".{path.name}.", suffix=".tmp", made=made)
            # surrogateescape: a path decoded under a non-UTF-8 locale (/home/josé as
            # surrogates) is written back as the bytes it has on disk, not refused.
            with os.fdopen(
                fd, "w", encoding="utf-8", errors="surrogateescape", newline="\n"
            ) as handle:
                handle.write(text)
                if durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            Path(tmp).chmod(mode)
            if before_rename is not None:
                before_rename()
            Path(tmp).replace(path)
        except BaseException:
            remove_made(made)
            raise
        if durable:
            # The rename is a change to the folder: without this a power loss can undo it
            # while a later rename (the lock after the spec, in `gpuenv add`) survives.
            _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """fsync a folder, where the system allows it (some network file systems refuse)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def output_path(path: Path, *, hint: str) -> Path:
    """Where to write the file a user named (``-o PATH``) so that the atomic rename
    replaces a file and nothing else: a symbolic link is followed (the link stays, the
    file it names is written); a path that is a device, a FIFO or a socket
    (``/dev/stdout``, ``/dev/full``) is refused with ``UsageError``, since renaming over
    it would put a regular file in its place. Other paths come back unchanged."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = target.stat().st_mode
    except OSError:
        return target  # nothing there yet (or unreadable): the write says what is wrong
    kind = special_kind(mode)
    shown = str(path) if target == path else f"{path} (-> {target})"
    if stat.S_ISDIR(mode):  # -o '' is '.': it said "Device or resource busy", exit 5
        raise UsageError(f"{shown} is a directory: name a file (in it, say)", hint=hint)
    if kind is not None:
        raise UsageError(
            f"{shown} is {kind}, not a regular file: gpuenv writes its output by renaming "
            "a complete file over the path, which would replace it",
            hint=hint,
        )
    return target


# The errnos a tool's failure is translated for (its own wording otherwise stands).
TOOL_STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
)


def os_error_in(text: str) -> OSError | None:
    """The storage error a Rust tool (uv, rattler) reports in ``text`` as
    ``... (os error 28)``, or None: the first one among ``TOOL_STORAGE_ERRNOS``."""
    at = text.find("(os error ")
    while at >= 0:
        digits = text[at + 10 : text.find(")", at)]
        if digits.isdigit() and int(digits) in TOOL_STORAGE_ERRNOS:
            code = int(digits)
            return OSError(code, os.strerror(code))
        at = text.find("(os error ", at + 1)
    return None


# --- reading: bounded, checked (``gpuenv._fsread``, which the run path imports alone) ------

from gpuenv._fsread import (  # noqa: E402 - the read side, re-exported
    JSON_DEPTH,
    LOCK_LIMIT,
    SPEC_LIMIT,
    STATE_LIMIT,
    decode_utf8,
    load_json,
    nested_deeper_than,
    read_bytes,
    read_text,
    special_kind,
)

__all__ = [
    "JSON_DEPTH",
    "LOCK_LIMIT",
    "READ_ONLY_ERRNOS",
    "SPEC_LIMIT",
    "STATE_LIMIT",
    "atomic_write_text",
    "decode_utf8",
    "is_read_only",
    "load_json",
    "nested_deeper_than",
    "os_error_in",
    "output_path",
    "read_bytes",
    "read_text",
    "special_kind",
    "storage_error",
    "writing",
]
