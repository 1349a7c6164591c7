"""A small ELF reader: the dynamic section of a shared object (SONAME, NEEDED, RPATH,
RUNPATH), read the way the loader does, through the program headers.

Only the few bytes needed are read (header, program headers, the dynamic segment and
each wanted string), so a 1 GB ``libtorch_cuda.so`` costs a handful of small reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gpuenv.doctor._fsafe import open_binary

_PT_LOAD = 1
_PT_DYNAMIC = 2
_DT_NULL = 0
_DT_NEEDED = 1
_DT_STRTAB = 5
_DT_SONAME = 14
_DT_RPATH = 15
_DT_RUNPATH = 29
_MAX_PHNUM = 4096
_MAX_DYNAMIC = 1 << 20
_MAX_STRING = 1 << 16


@dataclass(frozen=True)
class ElfDynamic:
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


@dataclass(frozen=True)
class _Layout:
    endian: str
    is64: bool

    @property
    def phdr(self) -> struct.Struct:
        if self.is64:
            return struct.Struct(self.endian + "IIQQQQQQ")
        return struct.Struct(self.endian + "IIIIIIII")

    @property
    def dyn(self) -> struct.Struct:
        return struct.Struct(self.endian + ("qQ" if self.is64 else "iI"))


def _layout(ident: bytes) -> _Layout | None:
    if len(ident) < 16 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2):
        return None
    if ident[5] not in (1, 2):
        return None
    return _Layout(endian="<" if ident[5] == 1 else ">", is64=ident[4] == 2)


def _segments(fh: BinaryIO, lay: _Layout) -> list[tuple[int, int, int, int]]:
    """(type, offset, vaddr, filesz) of every program header."""
    fh.seek(0)
    header = fh.read(64 if lay.is64 else 52)
    if lay.is64:
        phoff, phentsize, phnum = (
            struct.unpack_from(lay.endian + "Q", header, 32)[0],
            *struct.unpack_from(lay.endian + "HH", header, 54),
        )
    else:
        phoff, phentsize, phnum = (
            struct.unpack_from(lay.endian + "I", header, 28)[0],
            *struct.unpack_from(lay.endian + "HH", header, 42),
        )
    if phnum > _MAX_PHNUM or phentsize < lay.phdr.size:
        return []
    fh.seek(phoff)
    table = fh.read(phentsize * phnum)
    out = []
    for i in range(phnum):
        if (i + 1) * phentsize > len(table):
            break
        f = lay.phdr.unpack_from(table, i * phentsize)
        if lay.is64:  # type, flags, offset, vaddr, paddr, filesz, ...
            out.append((f[0], f[2], f[3], f[5]))
        else:  # type, offset, vaddr, paddr, filesz, ...
            out.append((f[0], f[1], f[2], f[4]))
    return out


def _string(fh: BinaryIO, offset: int) -> str:
    fh.seek(offset)
    data = b""
    while len(data) < _MAX_STRING:
        chunk = fh.read(256)
        if not chunk:
            break
        end = chunk.find(b"\0")
        if end >= 0:
            return (data + chunk[:end]).decode("utf-8", "replace")
        data += chunk
    return data.decode("utf-8", "replace")


def _file_offset(segments: list[tuple[int, int, int, int]], vaddr: int) -> int | None:
    for kind, offset, start, size in segments:
        if kind == _PT_LOAD and start <= vaddr < start + size:
            return offset + (vaddr - start)
    return None


def _entries(fh: BinaryIO, lay: _Layout, offset: int, size: int) -> list[tuple[int, int]]:
    fh.seek(offset)
    blob = fh.read(min(size, _MAX_DYNAMIC))
    entries = []
    for pos in range(0, len(blob) - lay.dyn.size + 1, lay.dyn.size):
        tag, value = lay.dyn.unpack_from(blob, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    return entries


def _read(fh: BinaryIO) -> ElfDynamic | None:
    lay = _layout(fh.read(16))
    if lay is None:
        return None
    segments = _segments(fh, lay)
    dynamic = next((s for s in segments if s[0] == _PT_DYNAMIC), None)
    if dynamic is None:
        return ElfDynamic(None, (), (), ())
    entries = _entries(fh, lay, dynamic[1], dynamic[3])
    strtab_vaddr = next((v for t, v in entries if t == _DT_STRTAB), None)
    strtab = _file_offset(segments, strtab_vaddr) if strtab_vaddr is not None else None
    if strtab is None:
        return ElfDynamic(None, (), (), ())
    values: dict[int, list[str]] = {}
    for tag, value in entries:
        if tag in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH):
            values.setdefault(tag, []).append(_string(fh, strtab + value))
    sonames = values.get(_DT_SONAME, [])
    return ElfDynamic(
        soname=sonames[0] if sonames else None,
        needed=tuple(values.get(_DT_NEEDED, [])),
        rpath=_split(values.get(_DT_RPATH, [])),
        runpath=_split(values.get(_DT_RUNPATH, [])),
    )


def _split(values: list[str]) -> tuple[str, ...]:
    return tuple(part for value in values for part in value.split(":") if part)


def read_dynamic(path: Path) -> ElfDynamic | None:
    """The dynamic section of ``path``; None when it is not a readable ELF file."""
    fh = open_binary(path)  # a FIFO or a device named like a library is not one
    if fh is None:
        return None
    try:
        with fh:
            return _read(fh)
    except (OSError, struct.error):
        return None
