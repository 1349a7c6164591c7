"""File tests that never raise: the doctor follows paths it reads from variables,
``.pth`` files, RPATHs, RECORDs and caches, any of which can hold a name too long for
the file system, a NUL byte or a symlink loop. Such a path simply is not there."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

_ERRORS = (OSError, ValueError, RuntimeError)  # RuntimeError: a symlink loop (3.10, 3.11)


def _answer(test: Callable[[], bool]) -> bool:
    """``test()``; False when the path cannot even be asked about."""
    try:
        return test()
    except _ERRORS:
        return False


def is_dir(path: Path) -> bool:
    return _answer(path.is_dir)


def is_file(path: Path) -> bool:
    return _answer(path.is_file)


def exists(path: Path) -> bool:
    return _answer(path.exists)


def executable(path: Path) -> bool:
    return _answer(lambda: os.access(path, os.X_OK))


def resolved(path: Path) -> Path:
    """``path`` with links resolved, or as given when it cannot be."""
    try:
        return path.resolve()
    except _ERRORS:
        return path


MAX_TEXT = 4 << 20  # no metadata, .pth, conf or version file the doctor reads is larger


def open_regular(path: str | Path) -> int | None:
    """A read-only descriptor of the regular file at ``path`` (links followed); None
    for anything else. Opened non-blocking, so a FIFO planted where a library, a
    RECORD or a ``pyvenv.cfg`` should be never hangs the doctor, and a device such as
    ``/dev/zero`` (which would never end) is refused before a byte is read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except _ERRORS:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return fd


def open_binary(path: str | Path) -> BinaryIO | None:
    """``open_regular`` as a buffered binary file (for readers that seek)."""
    fd = open_regular(path)
    return None if fd is None else os.fdopen(fd, "rb")


def read_text(path: str | Path, limit: int = MAX_TEXT) -> str | None:
    """The start of a text file (undecodable bytes replaced); None when unreadable."""
    data = read_bytes(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_bytes(path: str | Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a regular file, read with plain system calls (several
    times cheaper than a text-mode open, for the thousands of small files of a big
    environment); None when unreadable or not a regular file."""
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        chunks = []
        total = 0
        while total < limit:
            chunk = os.read(fd, min(1 << 20, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
