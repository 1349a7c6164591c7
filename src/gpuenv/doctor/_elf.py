"""The dynamic section of a shared object (SONAME, NEEDED, RPATH, RUNPATH), read the way
the loader does, through the program headers (``gpuenv._elf``, the one ELF reader).

Only the few bytes needed are read (header, program headers, the dynamic segment and
each wanted string), so a 1 GB ``libtorch_cuda.so`` costs a handful of small reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gpuenv import _elf as elf
from gpuenv.doctor._fsafe import open_binary

_DT_NULL = 0
_DT_NEEDED = 1
_DT_STRTAB = 5
_DT_SONAME = 14
_DT_RPATH = 15
_DT_RUNPATH = 29
_MAX_DYNAMIC = 1 << 20


@dataclass(frozen=True)
class ElfDynamic:
    """What the dynamic section of a shared object names: its SONAME, the libraries it
    needs, and its RPATH and RUNPATH entries (split at ``:``, ``$ORIGIN`` as written)."""

    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


def _entries(fh: BinaryIO, header: elf.Header, offset: int, size: int) -> list[tuple[int, int]]:
    dyn = struct.Struct(header.endian + ("qQ" if header.is64 else "iI"))
    fh.seek(offset)
    blob = fh.read(min(size, _MAX_DYNAMIC))
    entries = []
    for pos in range(0, len(blob) - dyn.size + 1, dyn.size):
        tag, value = dyn.unpack_from(blob, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    return entries


def _read(fh: BinaryIO) -> ElfDynamic | None:
    header = elf.read_header(fh)
    if header is None:
        return None
    segments = elf.segments(fh, header)
    dynamic = next((s for s in segments if s.kind == elf.PT_DYNAMIC), None)
    if dynamic is None:
        return ElfDynamic(None, (), (), ())
    entries = _entries(fh, header, dynamic.offset, dynamic.filesz)
    strtab_vaddr = next((v for t, v in entries if t == _DT_STRTAB), None)
    strtab = elf.file_offset(segments, strtab_vaddr) if strtab_vaddr is not None else None
    if strtab is None:
        return ElfDynamic(None, (), (), ())
    values: dict[int, list[str]] = {}
    for tag, value in entries:
        if tag in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH):
            values.setdefault(tag, []).append(elf.cstring(fh, strtab + value))
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
