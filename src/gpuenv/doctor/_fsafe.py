"""File tests that never raise: the doctor follows paths it reads from variables,
``.pth`` files, RPATHs, RECORDs and caches, any of which can hold a name too long for
the file system, a NUL byte or a symlink loop. Such a path simply is not there."""

from __future__ import annotations

import os
from pathlib import Path

_ERRORS = (OSError, ValueError, RuntimeError)  # RuntimeError: a symlink loop (3.10, 3.11)


def is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except _ERRORS:
        return False


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except _ERRORS:
        return False


def exists(path: Path) -> bool:
    try:
        return path.exists()
    except _ERRORS:
        return False


def executable(path: Path) -> bool:
    try:
        return os.access(path, os.X_OK)
    except _ERRORS:
        return False


def resolved(path: Path) -> Path:
    """``path`` with links resolved, or as given when it cannot be."""
    try:
        return path.resolve()
    except _ERRORS:
        return path


MAX_TEXT = 4 << 20  # no metadata, .pth, conf or version file the doctor reads is larger


def read_text(path: Path, limit: int = MAX_TEXT) -> str | None:
    """The start of a text file (undecodable bytes replaced); None when unreadable."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except _ERRORS:
        return None


def read_bytes(path: str, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a file, read with plain system calls (several times
    cheaper than a text-mode open, for the thousands of small files of a big
    environment); None when unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except _ERRORS:
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
