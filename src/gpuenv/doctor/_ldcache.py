"""``/etc/ld.so.cache``: the name -> path table the loader consults after
``LD_LIBRARY_PATH`` and ``DT_RUNPATH`` (ldconfig builds it from the ``ld.so.conf``
directories and the trusted system directories).

Both layouts glibc writes are read: the new one (``glibc-ld.so.cache1.1``, alone since
glibc 2.32) and the old one (``ld.so-1.7.0``) with the new one appended. Only x86-64
libc6 entries count (the flags ``ldconfig -p`` prints as ``libc6,x86-64``); among
entries of one name the first wins, as in the loader's search.
"""

from __future__ import annotations

import struct
from pathlib import Path

from gpuenv.doctor._fsafe import read_bytes

_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_NEW_HEADER = struct.Struct("<20sIIB3xI12x")  # magic+version, nlibs, strings, flags, ext.
_NEW_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap
_OLD_ENTRY = 12
_FLAG_TYPE_MASK = 0x00FF
_FLAG_REQUIRED_MASK = 0xFF00
_FLAG_ELF_LIBC6 = 0x0003
_FLAG_X8664_LIB64 = 0x0300
_MAX_CACHE = 64 << 20
_MAX_NAME = 4096


def _string(data: bytes, offset: int) -> str | None:
    if not 0 <= offset < len(data):
        return None
    end = data.find(b"\0", offset, offset + _MAX_NAME)
    if end < 0:
        return None
    return data[offset:end].decode("utf-8", "replace")


def _new_start(data: bytes) -> int | None:
    if data.startswith(_NEW_MAGIC):
        return 0
    if not data.startswith(_OLD_MAGIC) or len(data) < len(_OLD_MAGIC) + 1 + 4:
        return None
    # The old header is the magic and a 4-byte count, aligned like its int fields.
    header = (len(_OLD_MAGIC) + 3) & ~3
    (nlibs,) = struct.unpack_from("<I", data, header)
    start = header + 4 + nlibs * _OLD_ENTRY
    start = (start + 7) & ~7  # aligned for the new header's 64-bit fields
    return start if data[start : start + len(_NEW_MAGIC)] == _NEW_MAGIC else None


def parse(data: bytes) -> dict[str, str]:
    """name -> path of every x86-64 libc6 entry (the first of each name). An unreadable
    or truncated cache gives what could be read (possibly nothing)."""
    start = _new_start(data)
    if start is None or len(data) < start + _NEW_HEADER.size:
        return {}
    _magic, nlibs, _strings, _flags, _extension = _NEW_HEADER.unpack_from(data, start)
    table: dict[str, str] = {}
    base = start + _NEW_HEADER.size
    for i in range(nlibs):
        pos = base + i * _NEW_ENTRY.size
        if pos + _NEW_ENTRY.size > len(data):
            break
        flags, key, value, _os, _hwcap = _NEW_ENTRY.unpack_from(data, pos)
        if (flags & _FLAG_TYPE_MASK) != _FLAG_ELF_LIBC6:
            continue
        if (flags & _FLAG_REQUIRED_MASK) != _FLAG_X8664_LIB64:
            continue
        name, path = _string(data, start + key), _string(data, start + value)
        if name and path and name not in table:
            table[name] = path
    return table


def read(path: Path) -> dict[str, str] | None:
    """The cache at ``path``; None when there is none (the caller then models the
    ``ld.so.conf`` directories instead)."""
    data = read_bytes(path, _MAX_CACHE)
    if data is None:
        return None
    return parse(data)
