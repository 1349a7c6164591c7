"""What a compiled extension carries, read from its ELF file: the GPU code in its
``.nv_fatbin`` section, and the torch symbols it needs.

A fat binary (``.nv_fatbin``) holds one or more fatbins (header magic ``0xBA55ED50``),
each a list of entries: kind 1 is PTX, kind 2 a cubin (SASS machine code), with the
target architecture at offset 28 of the entry header (``90`` for ``sm_90``). This is the
layout ``cuobjdump --list-elf`` reads; the tests check it against nvcc's own output.

Symbols: ``.dynsym`` entries whose section index is ``SHN_UNDEF`` are what the object
needs from others; a torch extension needs ``c10::`` and ``at::`` symbols
(``_ZN3c10...``, ``_ZN2at...``) from the torch it was compiled against, and a torch
that no longer exports one is the ``undefined symbol: _ZN3c10...`` of an import.

Everything is read through section headers (``gpuenv._elf``, the one ELF reader) with
bounded reads; anything that is not a readable 64- or 32-bit ELF file gives ``None``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from gpuenv import _elf as elf
from gpuenv._elf import Section

_T = TypeVar("_T")

FATBIN_MAGIC = 0xBA55ED50
_KIND_PTX = 1
_KIND_ELF = 2
_MAX_FATBIN = 1 << 32
_MAX_SYMTAB = 1 << 28
TORCH_SYMBOL_PREFIXES = ("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch")


@dataclass(frozen=True)
class GpuCode:
    """The architectures a fat binary carries: SASS (``sm``) and PTX (``compute``),
    as numbers (90 for 9.0, 120 for 12.0)."""

    sass: frozenset[int]
    ptx: frozenset[int]

    @property
    def empty(self) -> bool:
        return not self.sass and not self.ptx

    def entries(self) -> list[str]:
        """In torch's spelling: ``sm_90``, ``compute_90``."""
        return [f"sm_{a}" for a in sorted(self.sass)] + [f"compute_{a}" for a in sorted(self.ptx)]

    def runs_on(self, major: int, minor: int) -> str | None:
        """How a GPU of compute capability major.minor runs this code, or None: SASS of the
        same major and a minor not above the GPU's, or PTX for an older or equal arch
        (JIT-compiled by the driver)."""
        gpu = major * 10 + minor
        same = [a for a in self.sass if a // 10 == major and a % 10 <= minor]
        if gpu in self.sass:
            return f"sm_{gpu} machine code"
        if same:
            return f"sm_{max(same)} machine code runs on sm_{gpu}"
        older = [a for a in self.ptx if a <= gpu]
        if older:
            return f"PTX for compute_{max(older)} is JIT-compiled for sm_{gpu}"
        return None


def _read_elf(path: Path, read: Callable[[BinaryIO, str, bool, list[Section]], _T]) -> _T | None:
    """``read(file, endian, is64, sections)`` on ``path`` opened, through its section
    headers; None when it is not a readable 64- or 32-bit ELF file."""
    try:
        with path.open("rb") as fh:
            header = elf.read_header(fh)
            if header is None:
                return None
            return read(fh, header.endian, header.is64, elf.sections(fh, header))
    except (OSError, struct.error):
        return None


def _parse_fatbin(blob: bytes, endian: str) -> tuple[set[int], set[int]]:
    sass: set[int] = set()
    ptx: set[int] = set()
    pos = 0
    while pos + 16 <= len(blob):
        magic, _version, header_size, fat_size = struct.unpack_from(endian + "IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fatbins are 8-byte aligned; skip padding between them
            continue
        entry = pos + header_size
        end = min(len(blob), entry + fat_size)
        while entry + 32 <= end:
            kind, _flags, entry_header, size = struct.unpack_from(endian + "HHIQ", blob, entry)
            arch = struct.unpack_from(endian + "I", blob, entry + 28)[0]
            if kind == _KIND_ELF:
                sass.add(arch)
            elif kind == _KIND_PTX:
                ptx.add(arch)
            if entry_header == 0:
                break
            entry += entry_header + size
        pos = max(end, pos + 16)
    return sass, ptx


def gpu_code(path: Path) -> GpuCode | None:
    """The GPU architectures ``path`` carries code for (empty: no ``.nv_fatbin``, a
    CPU-only object); None when it is not a readable ELF file."""
    return _read_elf(path, _fatbin_code)


def _fatbin_code(fh: BinaryIO, endian: str, _is64: bool, sections: list[Section]) -> GpuCode:
    sass: set[int] = set()
    ptx: set[int] = set()
    for section in sections:
        if section.name == ".nv_fatbin" and 0 < section.size < _MAX_FATBIN:
            fh.seek(section.offset)
            more_sass, more_ptx = _parse_fatbin(fh.read(section.size), endian)
            sass |= more_sass
            ptx |= more_ptx
    return GpuCode(frozenset(sass), frozenset(ptx))


def _symbols(path: Path, *, defined: bool, prefixes: tuple[str, ...]) -> set[str] | None:
    def read(fh: BinaryIO, endian: str, is64: bool, sections: list[Section]) -> set[str]:
        out: set[str] = set()
        for table in (s for s in sections if s.kind == elf.SHT_DYNSYM):
            if table.link >= len(sections) or table.size > _MAX_SYMTAB:
                continue
            strings = sections[table.link]
            fh.seek(strings.offset)
            names = fh.read(min(strings.size, _MAX_SYMTAB))
            fh.seek(table.offset)
            out |= _read_symbols(fh.read(table.size), names, endian, is64, defined, prefixes)
        return out

    return _read_elf(path, read)


def _read_symbols(
    blob: bytes, names: bytes, endian: str, is64: bool, defined: bool, prefixes: tuple[str, ...]
) -> set[str]:
    entry = struct.Struct(endian + ("IBBHQQ" if is64 else "IIIBBH"))
    wanted = tuple(p.encode() for p in prefixes)
    out = set()
    for pos in range(0, len(blob) - entry.size + 1, entry.size):
        fields = entry.unpack_from(blob, pos)
        name_at, shndx = (fields[0], fields[3]) if is64 else (fields[0], fields[5])
        if (shndx != 0) != defined or name_at == 0:
            continue
        end = names.find(b"\0", name_at)
        name = names[name_at:end] if end >= 0 else b""
        if name.startswith(wanted):
            out.add(name.decode("ascii", "replace"))
    return out


def undefined_symbols(
    path: Path, prefixes: tuple[str, ...] = TORCH_SYMBOL_PREFIXES
) -> set[str] | None:
    """The symbols ``path`` needs from other objects, among those starting with ``prefixes``."""
    return _symbols(path, defined=False, prefixes=prefixes)


def defined_symbols(
    path: Path, prefixes: tuple[str, ...] = TORCH_SYMBOL_PREFIXES
) -> set[str] | None:
    """The symbols ``path`` exports, among those starting with ``prefixes``."""
    return _symbols(path, defined=True, prefixes=prefixes)
