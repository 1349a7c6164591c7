"""gpuenv._elf, the one ELF reader of the library (doctor's dynamic section, builds' GPU
code and symbols): real objects read right, hostile headers give None or nothing."""

from __future__ import annotations

import io
import shutil
import struct
from pathlib import Path

import pytest

from gpuenv import _elf as elf
from gpuenv.doctor._elf import read_dynamic


def _real_object() -> Path:
    found = shutil.which("ls") or shutil.which("sh")
    if found is None:
        pytest.skip("no system binary to read")
    return Path(found).resolve()


def test_a_system_binary_has_its_segments_sections_and_needed_libraries() -> None:
    path = _real_object()
    with path.open("rb") as fh:
        header = elf.read_header(fh)
        assert header is not None and header.is64 in (True, False)
        kinds = {s.kind for s in elf.segments(fh, header)}
        names = {s.name for s in elf.sections(fh, header)}
    assert elf.PT_LOAD in kinds and elf.PT_DYNAMIC in kinds
    assert {".dynsym", ".dynstr", ".text"} <= names
    dynamic = read_dynamic(path)
    assert dynamic is not None and any(n.startswith("libc.so") for n in dynamic.needed)


def _header64(**fields: int) -> bytearray:
    data = bytearray(64)
    data[:6] = b"\x7fELF\x02\x01"
    values = {"phoff": 64, "shoff": 0, "phentsize": 56, "phnum": 0}
    values.update(fields)
    struct.pack_into("<QQ", data, 32, values["phoff"], values["shoff"])
    struct.pack_into("<HH", data, 54, values["phentsize"], values["phnum"])
    struct.pack_into(
        "<HHH",
        data,
        58,
        fields.get("shentsize", 64),
        fields.get("shnum", 0),
        fields.get("shstrndx", 0),
    )
    return data


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x7fELF",
        b"\x7fELF\x03\x01" + bytes(58),  # no such class
        b"\x7fELF\x02\x03" + bytes(58),  # no such byte order
        b"\x7fELF\x02\x01" + bytes(40),  # a 64-bit header cut short
        b"\x7fELF\x01\x01" + bytes(30),  # a 32-bit header cut short
        b"MZ" + bytes(62),
    ],
)
def test_what_is_not_an_elf_header_is_none(data: bytes) -> None:
    assert elf.read_header(io.BytesIO(data)) is None


def test_implausible_tables_are_empty_not_errors() -> None:
    huge = _header64(phnum=60000, shnum=60000, shoff=64)
    header = elf.read_header(io.BytesIO(bytes(huge)))
    assert header is not None
    assert elf.segments(io.BytesIO(bytes(huge)), header) == []
    tiny_entries = _header64(phentsize=8, phnum=3)
    header = elf.read_header(io.BytesIO(bytes(tiny_entries)))
    assert header is not None and elf.segments(io.BytesIO(bytes(tiny_entries)), header) == []
    names_out_of_range = _header64(shoff=64, shnum=1, shstrndx=7) + bytes(64)
    header = elf.read_header(io.BytesIO(bytes(names_out_of_range)))
    assert header is not None
    assert elf.sections(io.BytesIO(bytes(names_out_of_range)), header) == []
    truncated = _header64(phnum=4)  # the table it announces is not there
    header = elf.read_header(io.BytesIO(bytes(truncated)))
    assert header is not None and elf.segments(io.BytesIO(bytes(truncated)), header) == []


def test_a_string_without_its_nul_stops_at_the_limit() -> None:
    blob = io.BytesIO(b"x" * (elf.MAX_STRING + 500))
    assert len(elf.cstring(blob, 0)) == elf.MAX_STRING
    assert elf.cstring(io.BytesIO(b"abc\0def"), 4) == "def"
