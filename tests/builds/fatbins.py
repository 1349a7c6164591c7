"""Synthetic shared objects for tests that cannot run nvcc: gcc compiles a C file whose
``.nv_fatbin`` section holds a hand-made fat binary (the layout nvcc writes: header
magic 0xBA55ED50, entries of kind 1 (PTX) or 2 (cubin) with the arch at offset 28), and
optionally a Python extension module, and undefined c10/at:: symbols."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import pytest

MODULE = """
#include <Python.h>
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{ {call} return PyModule_Create(&module); }}
"""


def fatbin(sass: Sequence[int] = (), ptx: Sequence[int] = ()) -> bytes:
    entries = b""
    for kind, archs in ((2, sass), (1, ptx)):
        for arch in archs:
            payload = b"\0" * 16
            header = struct.pack("<HHIQII", kind, 0x101, 64, len(payload), 0, 0)
            header += struct.pack("<HHI", 0, 0, arch).ljust(64 - len(header), b"\0")
            entries += header + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entries)) + entries


def shared_object(
    path: Path,
    *,
    sass: Sequence[int] = (),
    ptx: Sequence[int] = (),
    module: str | None = None,
    undefined: Sequence[str] = (),
    defined: Sequence[str] = (),
) -> Path:
    """Compile ``path`` (a .so): a fat binary of ``sass``/``ptx`` archs, a Python module
    named ``module`` (its file name must then be ``<module><EXT_SUFFIX>``), and calls to
    the undefined symbols ``undefined`` (resolved, or not, when it is loaded)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("needs gcc")
    blob = fatbin(sass, ptx) if (sass or ptx) else b""
    lines = [f"extern void {s}(void);" for s in undefined]
    lines += [f"void {s}(void) {{}}" for s in defined]
    if blob:
        data = ", ".join(str(b) for b in blob)
        lines.append(
            f'__attribute__((section(".nv_fatbin"), used)) static const unsigned char fb[] = {{{data}}};'
        )
    calls = " ".join(f"{s}();" for s in undefined)
    if module:
        lines.append(MODULE.format(name=module, call=calls))
    else:
        lines.append(f"void gpuenv_fixture(void) {{ {calls} }}")
    source = path.with_suffix(".c")
    path.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("\n".join(lines) + "\n")
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [gcc, "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(path)],
        check=True,
        capture_output=True,
    )
    return path


def ext_suffix() -> str:
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"
