"""Reading a foreign file before believing it: a regular file, bounded in size, text
(no NUL bytes), UTF-8 (the first bad byte named by line). Every refusal is a
``ForeignFileError`` (exit 2) naming the file and, where it has one, the line."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from gpuenv import _toml
from gpuenv.errors import ForeignFileError, SpecProblem
from gpuenv.importers.model import UNREADABLE, Origin, ReadingBuilder, hide_secrets

MAX_BYTES = 8 * 1024 * 1024  # the largest environment file imported (conda-lock files of
# big multi-platform environments reach a few MiB; nothing legitimate comes near this)


def problem(file: str, line: int | None, message: str, hint: str | None = None) -> SpecProblem:
    return SpecProblem(file, line, "", hide_secrets(message), hint)


QUOTED = 200  # characters of a file's line a report quotes


def quoted(text: str, limit: int = QUOTED) -> str:
    """A file's line as a report quotes it: runs of blanks one space (a Dockerfile's
    continued RUN keeps each line's indent), and a line too long cut between words with
    an ellipsis. Cut at 200 characters, alphafold's 'jaxlib==0.4.26+cuda12.cudnn89'
    read 'jaxlib==0.4', and icefall's RUN lines ended in a stray 'f' or 'g'."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def fail(file: str, line: int | None, message: str, hint: str | None = None) -> NoReturn:
    raise ForeignFileError([problem(file, line, message, hint)])


def parse_toml(text: str, display: str) -> dict[str, Any]:
    """A foreign TOML file's document; text that is not TOML fails naming its line."""
    try:
        return _toml.loads(text)
    except _toml.TomlError as exc:
        fail(display, exc.line, f"not valid TOML: {exc}")
    except RecursionError:
        fail(display, None, "not valid TOML: nested too deeply")


@contextmanager
def line_not_read(builder: ReadingBuilder, origin: Origin) -> Iterator[None]:
    """One entry that cannot be understood is listed under "not read" (with its file
    and line) and the rest of the file is used: a valid shell line gpuenv cannot split,
    an option it does not know, a malformed requirement."""
    try:
        yield
    except ForeignFileError as exc:
        for found in exc.problems:
            where = Origin(found.file, found.line or origin.line, origin.text)
            message = found.message
            builder.note(
                UNREADABLE,
                message if message.startswith("not read") else f"not read: {message}",
                where,
            )


def _open_error(display: str, exc: OSError) -> NoReturn:
    if exc.errno == errno.ELOOP:
        fail(display, None, "a symbolic link loop, not a file")
    if exc.errno == errno.ENOENT:
        fail(display, None, "no such file (or a dangling symbolic link)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        fail(display, None, "cannot be read: permission denied")
    fail(display, None, f"cannot be read: {exc.strerror or exc}")


OUTSIDE = "not read (outside the repository)"


def under(real: Path, roots: tuple[Path, ...]) -> bool:
    """``real`` (a resolved path) is one of ``roots`` or inside one (empty: anywhere)."""
    return not roots or any(real == root or real.is_relative_to(root) for root in roots)


def _opened_path(fd: int, path: Path) -> Path:
    """Where the descriptor really points (Linux: /proc/self/fd, so a link swapped in
    after a check is seen); elsewhere the path resolved."""
    try:
        return Path(f"/proc/self/fd/{fd}").readlink()
    except OSError:
        try:
            return path.resolve()
        except RuntimeError:  # a symlink loop: nothing to read
            return path.absolute()


def read_bytes(path: Path, display: str, roots: tuple[Path, ...] = ()) -> bytes:
    """The file's bytes, refusing anything but a regular file of at most MAX_BYTES, and
    (with ``roots``) anything whose real path is outside them: its contents are never
    read, so no error can show them.

    The type is checked on the opened descriptor, so a FIFO or device swapped in after a
    check is never read (opening is non-blocking for the same reason)."""
    if roots:
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            resolved = path.absolute()
        if not under(resolved, roots):
            fail(display, None, OUTSIDE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        _open_error(display, exc)
    try:
        if roots and not under(_opened_path(fd, path), roots):
            fail(display, None, OUTSIDE)
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            fail(display, None, "is a directory", "pass a file, or the folder itself to search it")
        if not stat.S_ISREG(info.st_mode):
            fail(display, None, "not a regular file (a device, socket or pipe)")
        if info.st_size > MAX_BYTES:
            fail(display, None, f"too large for an environment file ({info.st_size} bytes)")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        _open_error(display, exc)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        fail(display, None, f"too large for an environment file (over {MAX_BYTES} bytes)")
    return data


def decode(data: bytes, display: str) -> str:
    """``data`` as text: no NUL bytes, valid UTF-8 (a byte-order mark is dropped). UTF-16
    with its byte-order mark is read too: Windows PowerShell 5's ``>`` writes it
    (``conda env export > environment.yml``), and it was "a binary file"."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) and not data.startswith(b"\xff\xfe\0\0"):
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeError:
            fail(
                display, None, "not UTF-16 text after its byte-order mark", "save the file as UTF-8"
            )
    nul = data.find(b"\0")
    if nul >= 0:
        fail(
            display,
            data.count(b"\n", 0, nul) + 1,
            "a binary file, not text (NUL byte)",
            "pass an environment file: environment.yml, requirements.txt, pyproject.toml, ...",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = data[exc.start : exc.start + 1].hex()
        fail(display, line, f"not UTF-8 text (byte 0x{byte})", "save the file as UTF-8")
    return text.removeprefix("\ufeff")


def read_text(path: Path, display: str, roots: tuple[Path, ...] = ()) -> str:
    return decode(read_bytes(path, display, roots), display)


def line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
