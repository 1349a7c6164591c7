"""The read side of ``gpuenv._fs``: bounded reads that refuse what is not a plain file
of a plausible size (a FIFO would block, ``/dev/zero`` would never end), strict UTF-8
with the byte offset of the first bad byte, and JSON whose nesting is bounded.

Its own module because ``gpuenv run`` reads markers, records, deltas and the lock
through it on every call: it imports only ``os``, ``stat``, ``json`` and
``gpuenv.errors`` (the write side needs ``tempfile`` and ``pathlib``, milliseconds
that ``run`` would pay for nothing). ``gpuenv._fs`` re-exports everything here, so
the rest of gpuenv reads and writes through one module.
"""

from __future__ import annotations

import json
import os
import stat

from gpuenv.errors import InputFileError

# --- reading ------------------------------------------------------------------------------

# Limits far above any real file of each kind (a lock of a large conda environment is
# about 1 MiB), far below what would hurt.
SPEC_LIMIT = 4 << 20
LOCK_LIMIT = 64 << 20
STATE_LIMIT = 4 << 20  # completion markers, verification records, environment deltas
JSON_DEPTH = 64  # gpuenv's own JSON files nest a handful of levels

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_kind(mode: int) -> str | None:
    """What a path of ``mode`` is when it is a FIFO, a device or a socket ("a FIFO
    (named pipe)", ...), else None: what gpuenv never reads as a file (a FIFO blocks,
    ``/dev/zero`` never ends) nor renames a file over (the device would be gone)."""
    return next((name for test, name in _KINDS if test(mode)), None)


def _kind(mode: int) -> str:
    return special_kind(mode) or "not a regular file"


def read_bytes(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed), at most ``limit``.

    Raises ``InputFileError`` for anything else (a FIFO is opened non-blocking, so it
    never hangs; a device, a directory or a file over ``limit`` is refused before
    reading), ``FileNotFoundError`` when nothing is there (callers decide what absence
    means) and ``OSError`` for other failures to open or read."""
    name = os.fspath(path)
    if "\x00" in name:  # os.open raises ValueError: no file can have such a name
        raise InputFileError(
            f"{name!r}: a path with a NUL byte names no file", path=name.replace("\x00", "?")
        )
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(name, flags)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputFileError(f"{name}: is a directory, not a {what}", path=name)
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(
                f"{name}: {_kind(info.st_mode)}, not a regular file: refusing to read it as "
                f"a {what}",
                path=name,
                hint=f"replace it with the {what} itself",
            )
        if info.st_size > limit:
            raise _too_large(name, info.st_size, limit, what)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while being read
            raise _too_large(name, size, limit, what)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _too_large(name: str, size: int, limit: int, what: str) -> InputFileError:
    return InputFileError(
        f"{name}: {size} bytes, more than any {what} gpuenv writes ({limit >> 20} MiB): "
        "refusing to read it",
        path=name,
    )


def decode_utf8(data: bytes, path: str | os.PathLike[str]) -> str:
    """``data`` as UTF-8 text (a leading UTF-8 byte order mark is dropped); UTF-16, NUL
    bytes or invalid UTF-8 raise ``InputFileError`` naming the byte offset."""
    name = os.fspath(path)
    hint = "save it as UTF-8"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputFileError(
            f"{name}: UTF-16 text (a byte order mark at offset 0), not UTF-8", path=name, hint=hint
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputFileError(
            f"{name}: a NUL byte at offset {nul}: not UTF-8 text (UTF-16?)", path=name, hint=hint
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{name}: not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            f"({exc.reason})",
            path=name,
            hint=hint,
        ) from None
    return text.removeprefix("\ufeff")


def read_text(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> str:
    """``read_bytes`` then ``decode_utf8``."""
    return decode_utf8(read_bytes(path, limit=limit, what=what), path)


def nested_deeper_than(value: object, depth: int) -> bool:
    """Whether ``value`` (parsed JSON or TOML) nests lists and tables over ``depth``
    levels; iterative, so no input can exhaust the stack. One level at a time, scalars
    dropped as each level is built: half the time of a walk node by node (the
    knowledge base's cache, 5,500 values, is checked on every lock)."""
    layer: list[object] = [value]
    level = 1
    while True:
        containers = [item for item in layer if isinstance(item, (dict, list))]
        if not containers:
            return False
        if level > depth:
            return True
        layer = [
            child
            for item in containers
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        level += 1


def load_json(
    path: str | os.PathLike[str],
    *,
    limit: int = STATE_LIMIT,
    depth: int = JSON_DEPTH,
    what: str = "JSON file",
) -> object:
    """The JSON value in the file at ``path``, read with ``read_text``; malformed
    JSON and nesting over ``depth`` raise ``InputFileError`` naming the file."""
    name = os.fspath(path)
    text = read_text(name, limit=limit, what=what)
    try:
        value: object = json.loads(text)
    except RecursionError:
        value = None
        deep = True
    except ValueError as exc:
        raise InputFileError(f"{name}: not valid JSON ({exc})", path=name) from None
    else:
        deep = nested_deeper_than(value, depth)
    if deep:
        raise InputFileError(
            f"{name}: JSON nested more than {depth} levels deep: not a {what} gpuenv wrote",
            path=name,
        )
    return value
