"""The CUDA libraries torch loads and torch's own preload order, from
``knowledge/data/cudalibs.toml``, and the preload order the installed torch states in its
``__init__.py`` (read as text, never imported).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuenv.doctor._fsafe import read_text
from gpuenv.knowledge._data import data_toml

_MAX_INIT = 1 << 20  # torch's __init__.py is about 100 kB
_PRELOAD_FN = re.compile(r"^def _preload_cuda_deps\b.*?(?=^def |\Z)", re.MULTILINE | re.DOTALL)
_PAIR = re.compile(r"""\(\s*["'](\w+)["']\s*,\s*["'](lib[^"']+)["']\s*\)""")
_DICT_ITEM = re.compile(r"""["'](\w+)["']\s*:\s*["'](lib[^"']+)["']""")
_LOAD_FN = re.compile(r"^def _load_global_deps\b.*?(?=^def |^if |\Z)", re.MULTILINE | re.DOTALL)
_CU_SUFFIX = re.compile(r"-cu(\d+)$")


@dataclass(frozen=True)
class Library:
    """One CUDA library torch loads, as ``cudalibs.toml`` lists it: its file stem, its
    folder in the nvidia wheels, the wheel and conda packages that ship it, and what its
    version must match."""

    name: str  # cudart, cublasLt, ...
    file: str  # libcudart
    folder: str  # nvidia/<folder>/lib
    wheel: str  # nvidia-cuda-runtime
    conda: tuple[str, ...]
    versioned: str  # "cuda" | "cudnn" | "nccl" | "own"

    @property
    def label(self) -> str:
        return self.file


@dataclass(frozen=True)
class Preload:
    """torch's preload: (folder, glob) pairs in order, whether it runs after a successful
    load of libtorch_global_deps.so, whether it looks in nvidia/cu<major>/lib, and where
    the list was read."""

    order: tuple[tuple[str, str], ...]
    after_success: bool
    cuda_major_folder: bool
    source: str


@dataclass(frozen=True)
class Catalog:
    """The CUDA libraries of ``cudalibs.toml`` and the preload order stated there, with the
    pattern that tells which library a file name is."""

    libraries: tuple[Library, ...]
    preload: Preload
    _pattern: re.Pattern[str]

    def match(self, filename: str) -> Library | None:
        """The library a file name belongs to (``libcublasLt.so.12`` is cublasLt, not
        cublas)."""
        found = self._pattern.match(filename)
        if found is None:
            return None
        return self.by_file(found[1])

    def by_file(self, stem: str) -> Library | None:
        return next((lib for lib in self.libraries if lib.file == stem), None)

    def by_name(self, name: str) -> Library | None:
        return next((lib for lib in self.libraries if lib.name == name), None)


@cache
def catalog() -> Catalog:
    data = data_toml("cudalibs.toml")
    libraries = tuple(
        Library(
            name=str(raw["name"]),
            file=str(raw["file"]),
            folder=str(raw["folder"]),
            wheel=str(raw["wheel"]),
            conda=tuple(raw.get("conda", ())),
            versioned=str(raw.get("versioned", "own")),
        )
        for raw in data["library"]
    )
    # Longest stems first, so libcublasLt is not read as libcublas followed by "Lt".
    stems = sorted((re.escape(lib.file) for lib in libraries), key=len, reverse=True)
    pattern = re.compile(r"^(" + "|".join(stems) + r")\.so(?:\.\d+)*$")
    raw_preload = data["preload"]
    preload = Preload(
        order=tuple((str(a), str(b)) for a, b in raw_preload["order"]),
        after_success=bool(raw_preload["after_success"]),
        cuda_major_folder=bool(raw_preload["cuda_major_folder"]),
        source=f"gpuenv data ({raw_preload['source']})",
    )
    return Catalog(libraries, preload, pattern)


def torch_preload(init_py: Path) -> Preload:
    """The preload the installed torch performs, read from its ``__init__.py``; the data
    file's copy when the file is absent or states no list (a torch too old to preload
    is described by an empty order)."""
    default = catalog().preload
    text = read_text(init_py, _MAX_INIT)
    if text is None:
        return default
    body = _PRELOAD_FN.search(text)
    if body is None:
        load = _LOAD_FN.search(text)
        if load is None:
            return default
        # Older torch: the list lives inside _load_global_deps, used only on failure.
        pairs = _DICT_ITEM.findall(load.group(0)) or _PAIR.findall(load.group(0))
        return Preload(tuple(pairs), False, False, f"{init_py} (_load_global_deps)")
    pairs = _PAIR.findall(body.group(0)) or _DICT_ITEM.findall(body.group(0))
    if not pairs:
        return default
    load = _LOAD_FN.search(text)
    after = load is not None and re.search(r"_preload_cuda_deps\(\s*\)", load.group(0)) is not None
    cu_major = 'f"cu{' in text or "cu{maj" in text
    return Preload(tuple(pairs), after, cu_major, f"{init_py} (_preload_cuda_deps)")


def wheel_cuda_major(dist_name: str) -> int | None:
    """The CUDA major a wheel's name states (``nvidia-cudnn-cu12`` -> 12)."""
    found = _CU_SUFFIX.search(dist_name)
    return int(found[1]) if found else None
