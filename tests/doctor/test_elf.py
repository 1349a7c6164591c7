"""The ELF reader against real shared objects built by gcc."""

from __future__ import annotations

from pathlib import Path

from gpuenv.doctor._elf import read_dynamic
from tests.doctor.conftest import ElfFactory


def test_soname_needed_runpath(elf: ElfFactory) -> None:
    path = elf.build("libtorch_cuda.so", needed=["libcudart.so.12"], runpath=["$ORIGIN/a", "/b"])
    dynamic = read_dynamic(path)
    assert dynamic is not None
    assert dynamic.soname == "libtorch_cuda.so"
    assert "libcudart.so.12" in dynamic.needed
    assert dynamic.runpath == ("$ORIGIN/a", "/b")
    assert dynamic.rpath == ()


def test_rpath_without_runpath(elf: ElfFactory) -> None:
    dynamic = read_dynamic(elf.build("libx.so.1", rpath=["$ORIGIN/../lib"]))
    assert dynamic is not None
    assert dynamic.rpath == ("$ORIGIN/../lib",)
    assert dynamic.runpath == ()


def test_no_soname(elf: ElfFactory) -> None:
    dynamic = read_dynamic(elf.build(None))
    assert dynamic is not None
    assert dynamic.soname is None


def test_not_elf(tmp_path: Path) -> None:
    text = tmp_path / "libcudart.so.12"
    text.write_text("INPUT(-lfoo)\n")
    assert read_dynamic(text) is None
    assert read_dynamic(tmp_path / "missing.so") is None
    truncated = tmp_path / "trunc.so"
    truncated.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 20)
    read_dynamic(truncated)  # a truncated header must not raise
