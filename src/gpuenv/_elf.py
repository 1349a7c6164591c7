"""One ELF reader for the library: the file header, the program headers (what the loader
reads: the dynamic segment) and the section headers (what tools read: ``.nv_fatbin``,
``.dynsym``), for 32- and 64-bit files of either byte order.

Every read is bounded and seeks to what it needs, so a 1 GB ``libtorch_cuda.so`` costs a
handful of small reads; anything that is not a readable ELF file gives ``None`` (or an
empty list where the header was fine), never an exception other than ``OSError`` and
``struct.error``, which callers catch. Its users: ``doctor._elf`` (the dynamic section)
and ``builds.elfscan`` (GPU code and symbols). The verification probe keeps its own copy:
it runs without gpuenv, under Python 3.8.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

PT_LOAD = 1
PT_DYNAMIC = 2
SHT_DYNSYM = 11
MAX_PHNUM = 4096
MAX_SECTIONS = 1 << 16
MAX_STRING = 1 << 16
_SECTION_NAMES_LIMIT = 1 << 20


@dataclass(frozen=True)
class Header:
    """The fields of an ELF file header that locate its program and section headers."""

    endian: str  # "<" or ">"
    is64: bool
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


@dataclass(frozen=True)
class Segment:
    """One program header: its type (``PT_LOAD``, ``PT_DYNAMIC``), where it lies in the
    file, its virtual address and its size in the file."""

    kind: int
    offset: int
    vaddr: int
    filesz: int


@dataclass(frozen=True)
class Section:
    """One section header, its name read from the section-name table."""

    name: str
    kind: int
    offset: int
    size: int
    link: int
    entsize: int


def read_header(fh: BinaryIO) -> Header | None:
    """The ELF header at the start of ``fh``; None when it is not one."""
    fh.seek(0)
    ident = fh.read(64)
    if len(ident) < 16 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2):
        return None
    if ident[5] not in (1, 2):
        return None
    endian = "<" if ident[5] == 1 else ">"
    is64 = ident[4] == 2
    if len(ident) < (64 if is64 else 52):
        return None
    if is64:
        phoff, shoff = struct.unpack_from(endian + "QQ", ident, 32)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(
            endian + "HHHHH", ident, 54
        )
    else:
        phoff, shoff = struct.unpack_from(endian + "II", ident, 28)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(
            endian + "HHHHH", ident, 42
        )
    return Header(endian, is64, phoff, phentsize, phnum, shoff, shentsize, shnum, shstrndx)


def segments(fh: BinaryIO, header: Header) -> list[Segment]:
    """Every program header; empty when the table is implausible."""
    entry = struct.Struct(header.endian + ("IIQQQQQQ" if header.is64 else "IIIIIIII"))
    if header.phnum > MAX_PHNUM:
        return []
    rows = _table(fh, header.phoff, header.phentsize, header.phnum, entry)
    if header.is64:  # type, flags, offset, vaddr, paddr, filesz, ...
        return [Segment(f[0], f[2], f[3], f[5]) for f in rows]
    return [Segment(f[0], f[1], f[2], f[4]) for f in rows]  # type, offset, vaddr, paddr, filesz


def _table(
    fh: BinaryIO, offset: int, entsize: int, count: int, entry: struct.Struct
) -> list[tuple[int, ...]]:
    """``count`` entries of ``entsize`` bytes at ``offset``, as far as the file holds them;
    none when an entry is smaller than its layout."""
    if entsize < entry.size:
        return []
    fh.seek(offset)
    table = fh.read(entsize * count)
    return [entry.unpack_from(table, i * entsize) for i in range(min(count, len(table) // entsize))]


def file_offset(found: list[Segment], vaddr: int) -> int | None:
    """Where the loadable segment holding ``vaddr`` keeps it in the file."""
    for segment in found:
        if segment.kind == PT_LOAD and segment.vaddr <= vaddr < segment.vaddr + segment.filesz:
            return segment.offset + (vaddr - segment.vaddr)
    return None


def sections(fh: BinaryIO, header: Header) -> list[Section]:
    """Every section header, named; empty when the table is absent or implausible."""
    entry = struct.Struct(header.endian + ("IIQQQQIIQQ" if header.is64 else "IIIIIIIIII"))
    if not header.shoff or header.shnum > MAX_SECTIONS:
        return []
    rows = _table(fh, header.shoff, header.shentsize, header.shnum, entry)
    # name, type, flags, addr, offset, size, link, info, addralign, entsize
    raw = [(f[0], f[1], f[4], f[5], f[6], f[9]) for f in rows]
    if header.shstrndx >= len(raw):
        return []
    fh.seek(raw[header.shstrndx][2])
    names = fh.read(min(raw[header.shstrndx][3], _SECTION_NAMES_LIMIT))
    out = []
    for name_at, kind, offset, size, link, entsize in raw:
        end = names.find(b"\0", name_at)
        name = names[name_at:end].decode("ascii", "replace") if end >= 0 else ""
        out.append(Section(name, kind, offset, size, link, entsize))
    return out


def cstring(fh: BinaryIO, offset: int) -> str:
    """The NUL-terminated string at ``offset`` (at most ``MAX_STRING`` bytes)."""
    fh.seek(offset)
    data = b""
    while len(data) < MAX_STRING:
        chunk = fh.read(256)
        if not chunk:
            break
        end = chunk.find(b"\0")
        if end >= 0:
            return (data + chunk[:end]).decode("utf-8", "replace")
        data += chunk
    return data.decode("utf-8", "replace")
