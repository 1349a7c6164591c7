"""Every copy of the CUDA runtime, cuBLAS, cuDNN and NCCL the environment's Python can
reach, and a model of the loader's search for torch's own ``libtorch_cuda.so``.

The model follows ld.so(8): an object's ``DT_RPATH`` (only when it has no
``DT_RUNPATH``), then ``LD_LIBRARY_PATH``, then its ``DT_RUNPATH``, then the
``/etc/ld.so.conf`` directories (what ``ld.so.cache`` holds), then the system
directories. A directory is searched for the exact ``DT_NEEDED`` name
(``libcudart.so.12``), so the first directory holding that name wins.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.doctor._elf import read_dynamic

if TYPE_CHECKING:
    from gpuenv.doctor._context import Context

FAMILIES = ("cudart", "cublas", "cudnn", "nccl")
LIB_RE = re.compile(r"^lib(cudart|cublas|cudnn|nccl)\.so(?:\.(\d+(?:\.\d+)*))?$")
LOADING_OBJECTS = ("libtorch_cuda.so", "libtorch.so")
_MAX_CONF_DEPTH = 4
_MAX_TOOLKIT_DEPTH = 4


@dataclass(frozen=True)
class SearchDir:
    path: Path
    via: str  # how the directory is reachable, in words


@dataclass(frozen=True)
class LibCopy:
    family: str
    path: Path  # the real file, links resolved
    name: str  # the name it was found under first
    soname: str | None
    version: str | None
    version_from: str | None
    where: SearchDir

    def to_json(self) -> dict[str, str | None]:
        return {
            "path": str(self.path),
            "version": self.version,
            "via": self.where.via,
            "found_as": str(self.where.path / self.name),
            "soname": self.soname,
            "version_from": self.version_from,
        }


@dataclass(frozen=True)
class Loader:
    path: Path
    needed: tuple[str, ...]
    search: tuple[SearchDir, ...]


@dataclass
class LibraryIndex:
    loader: Loader | None
    default_search: tuple[SearchDir, ...]
    copies: dict[str, list[LibCopy]] = field(default_factory=dict)
    # resolved directory -> {file name -> copy}
    listing: dict[Path, dict[str, LibCopy]] = field(default_factory=dict)

    @property
    def search(self) -> tuple[SearchDir, ...]:
        return self.loader.search if self.loader else self.default_search

    def pick(self, name: str) -> LibCopy | None:
        """The copy the loader finds for ``name`` (a DT_NEEDED name)."""
        for where in self.search:
            found = self.listing.get(_resolved(where.path), {}).get(name)
            if found is not None:
                return found
        return None

    def searched(self, copy: LibCopy) -> bool:
        """Whether the loader's search visits the directory holding ``copy``."""
        wanted = _resolved(copy.where.path)
        return any(_resolved(d.path) == wanted for d in self.search)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


# --- where the loader and the environment look -----------------------------------------


def _expand(entries: Iterable[str], origin: Path, ctx: Context, via: str) -> list[SearchDir]:
    out = []
    for entry in entries:
        text = entry.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin))
        out.append(SearchDir(ctx.resolve_entry(text), via))
    return out


def ld_so_conf_dirs(ctx: Context) -> list[SearchDir]:
    host = ctx.request.host
    dirs: list[SearchDir] = []

    def read(path: Path, depth: int) -> None:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        for raw in lines:
            line = raw.split("#", 1)[0].strip()
            if line.startswith("include") and depth < _MAX_CONF_DEPTH:
                pattern = line.split(None, 1)[1] if " " in line else ""
                base = host.root if pattern.startswith("/") else path.parent
                for match in sorted(base.glob(pattern.lstrip("/"))):
                    read(match, depth + 1)
            elif line.startswith("/"):
                dirs.append(SearchDir(host.path(line), f"ld.so.conf ({path.name})"))

    read(host.path("/etc/ld.so.conf"), 0)
    return dirs


def _system(ctx: Context) -> list[SearchDir]:
    host = ctx.request.host
    return [SearchDir(host.path(d), "system library directory") for d in host.system_lib_dirs]


def _ld_library_path(ctx: Context) -> list[SearchDir]:
    return [SearchDir(ctx.resolve_entry(e), "LD_LIBRARY_PATH") for e in ctx.ld_library_path]


def _loader(ctx: Context) -> Loader | None:
    torch = ctx.env.torch
    if torch is None:
        return None
    for name in LOADING_OBJECTS:
        path = torch.lib_dir / name
        dynamic = read_dynamic(path) if path.is_file() else None
        if dynamic is None:
            continue
        rpath = _expand(dynamic.rpath, path.parent, ctx, f"RPATH of {name}")
        runpath = _expand(dynamic.runpath, path.parent, ctx, f"RUNPATH of {name}")
        search = [] if dynamic.runpath else rpath
        search += _ld_library_path(ctx) + runpath + ld_so_conf_dirs(ctx) + _system(ctx)
        return Loader(path, dynamic.needed, tuple(search))
    return None


def _environment_dirs(ctx: Context) -> Iterator[SearchDir]:
    """Directories the environment holds libraries in, searched or not."""
    yield SearchDir(ctx.env.prefix / "lib", "environment lib directory")
    for site in ctx.env.site_packages:
        try:
            entries = sorted(os.scandir(site / "nvidia"), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir():
                yield SearchDir(Path(entry.path) / "lib", f"nvidia wheel ({entry.name})")
    cuda_home = ctx.request.environ.get("CUDA_HOME") or ctx.request.environ.get("CUDA_PATH")
    toolkits = [Path(cuda_home)] if cuda_home else []
    toolkits.append(ctx.request.host.path("/usr/local/cuda"))
    for toolkit in toolkits:
        yield SearchDir(toolkit / "lib64", f"toolkit ({toolkit})")
        yield SearchDir(toolkit / "targets" / "x86_64-linux" / "lib", f"toolkit ({toolkit})")


# --- versions -------------------------------------------------------------------------


class _Owners:
    """Versions of library files from the packages that installed them: conda-meta
    records and the RECORD files of the ``nvidia-*`` wheels (read only for those)."""

    def __init__(self, ctx: Context) -> None:
        self.by_path: dict[Path, tuple[str, str]] = {}
        for package in ctx.env.conda_packages:
            for rel in package.files:
                if rel.startswith("lib/lib") and LIB_RE.match(rel[4:]):
                    self.by_path[_resolved(ctx.env.prefix / rel)] = (
                        package.version,
                        str(package.meta),
                    )
        for dist in ctx.env.dists:
            if dist.name.startswith("nvidia-"):
                self._record(dist.path, dist.version.split("+", 1)[0])

    def _record(self, info: Path, version: str) -> None:
        try:
            lines = (info / "RECORD").read_text(encoding="utf-8").splitlines()
        except OSError:
            return
        for line in lines:
            rel = line.split(",", 1)[0]
            if LIB_RE.match(rel.rsplit("/", 1)[-1]):
                self.by_path[_resolved(info.parent / rel)] = (version, str(info))


_TOOLKIT_DIR = re.compile(r"^cuda-(\d+\.\d+)$")
_TOOLKIT_FAMILIES = ("cudart", "cublas")  # versioned like the toolkit (cuDNN, NCCL are not)


def toolkit_files_version(root: Path) -> tuple[str, str] | None:
    """A toolkit's CUDA version from its ``version.json`` or ``version.txt``."""
    try:
        data = json.loads((root / "version.json").read_text(encoding="utf-8"))
        return str(data["cuda"]["version"]), str(root / "version.json")
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        text = (root / "version.txt").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"CUDA Version (\d+\.\d+(?:\.\d+)?)", text)
    return (match[1], str(root / "version.txt")) if match else None


def _toolkit_version(path: Path) -> tuple[str, str] | None:
    for parent in list(path.parents)[:_MAX_TOOLKIT_DEPTH]:
        found = toolkit_files_version(parent)
        if found:
            return found
        match = _TOOLKIT_DIR.match(parent.name)
        if match:
            return match[1], f"directory name {parent}"
    return None


def _version(owners: _Owners, family: str, path: Path) -> tuple[str | None, str | None]:
    owned = owners.by_path.get(path)
    if owned is not None:
        return owned
    match = LIB_RE.match(path.name)
    if match and match[2] and "." in match[2]:
        return match[2], "file name"
    found = _toolkit_version(path) if family in _TOOLKIT_FAMILIES else None
    return found if found else (None, None)


# --- the index ------------------------------------------------------------------------


def _scan(directory: Path) -> dict[Path, tuple[str, list[str]]]:
    """Every CUDA library file in ``directory``: real path -> (family, names)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return {}
    found: dict[Path, tuple[str, list[str]]] = {}
    for entry in sorted(entries, key=lambda e: e.name):
        match = LIB_RE.match(entry.name)
        if match:
            real = _resolved(Path(entry.path))
            if real.is_file():
                found.setdefault(real, (match[1], []))[1].append(entry.name)
    return found


def _copy(owners: _Owners, where: SearchDir, real: Path, family: str, names: list[str]) -> LibCopy:
    dynamic = read_dynamic(real)
    soname = dynamic.soname if dynamic else None
    version, version_from = _version(owners, family, real)
    return LibCopy(
        family=family,
        path=real,
        name=soname if soname in names else names[0],
        soname=soname,
        version=version,
        version_from=version_from,
        where=where,
    )


def build_index(ctx: Context) -> LibraryIndex:
    loader = _loader(ctx)
    default = tuple(_ld_library_path(ctx) + ld_so_conf_dirs(ctx) + _system(ctx))
    index = LibraryIndex(loader=loader, default_search=default)
    owners = _Owners(ctx)
    seen: dict[Path, LibCopy] = {}
    for where in [*index.search, *_environment_dirs(ctx)]:
        key = _resolved(where.path)
        if key in index.listing:
            continue
        listing = index.listing.setdefault(key, {})
        for real, (family, names) in _scan(where.path).items():
            copy = seen.get(real)
            if copy is None:
                copy = seen[real] = _copy(owners, where, real, family, names)
                index.copies.setdefault(family, []).append(copy)
            listing.update(dict.fromkeys(names, copy))
    return index
