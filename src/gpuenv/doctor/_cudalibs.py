"""Which copy of each CUDA library torch loads, and every other copy it could have.

``import torch`` loads in this order, and the model follows it:

1. ``LD_PRELOAD``'s libraries, before anything else;
2. ``torch/lib/libtorch_global_deps.so`` and the CUDA libraries it needs;
3. torch's Python-level preload (``_catalog.torch_preload``): for each library in torch's
   order, the first match along ``sys.path`` in ``nvidia/<folder>/lib``, then
   ``nvidia/cu<major>/lib``, then ``<folder>/lib``, dlopened by path;
4. ``libtorch_cuda.so`` (and ``libtorch_cuda_linalg.so``, ``libc10_cuda.so``) and what
   they need.

A needed name is satisfied by an already loaded library with that name or SONAME (the
first loaded wins; a second file with the same SONAME dlopened by path loads beside it,
unused). Otherwise the loader searches, per ld.so(8): the object's ``DT_RPATH`` (only
when it has no ``DT_RUNPATH``), ``LD_LIBRARY_PATH``, its ``DT_RUNPATH``, ``ld.so.cache``
(read from ``/etc/ld.so.cache``; where the host has none, the ``ld.so.conf``
directories stand in), then the system directories, taking the first file with exactly
the needed name: so ``libcudart.so.13`` never competes with ``libcudart.so.12``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.doctor import _ldcache
from gpuenv.doctor._catalog import Library, Preload, catalog, torch_preload, wheel_cuda_major
from gpuenv.doctor._elf import ElfDynamic, read_dynamic
from gpuenv.doctor._fsafe import is_dir, is_file, read_text, resolved

if TYPE_CHECKING:
    from gpuenv.doctor._context import Context
    from gpuenv.doctor._records import Claim

TORCH_OBJECTS = ("libtorch_cuda.so", "libtorch_cuda_linalg.so", "libc10_cuda.so")
OLD_TORCH_OBJECT = "libtorch.so"  # before libtorch_cuda.so was split out
GLOBAL_DEPS = "libtorch_global_deps.so"
VIA_LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
VIA_PRELOAD = "torch's preload"
VIA_LD_PRELOAD = "LD_PRELOAD"
_MAX_CONF_DEPTH = 4
_MAX_TOOLKIT_DEPTH = 4
_MAX_DEPTH = 8  # libraries needing libraries
_MAX_VERSION_FILE = 1 << 20  # a toolkit's version.json is a few kB
_CU_DIR = re.compile(r"^cu(\d+)$")
_TOOLKIT_DIR = re.compile(r"^cuda-(\d+\.\d+)$")
_CUDA_VERSION_DEP = re.compile(r"^cuda-version\s*[><=!~ ]*\s*(\d+)")


@dataclass(frozen=True)
class SearchDir:
    """One place the loader looks (or a directory that holds copies it may not look
    in); ``via`` says how it is reached, ``entry`` the variable's entry or the file
    that puts it there."""

    path: Path
    via: str
    entry: str | None = None
    cache: bool = False  # the ld.so.cache step: names are looked up, not listed

    def label(self) -> str:
        if self.cache:
            return "ld.so.cache"
        return f"{self.path} ({self.via})"


@dataclass(frozen=True)
class LibCopy:
    """One file of a CUDA library on this machine: the real file, the name it was first
    found under, its SONAME, its version and CUDA major (each with where that was read), the
    package that owns it, and the directory it was found in."""

    library: Library
    path: Path  # the real file, links resolved
    name: str  # the name it was found under first
    soname: str | None
    version: str | None
    version_from: str | None
    cuda_major: int | None
    cuda_major_from: str | None
    owner: str | None  # "pip nvidia-cudnn-cu12 9.1.0.70", "conda cudnn 9.1.0.70"
    owner_record: str | None
    where: SearchDir

    @property
    def family(self) -> str:
        return self.library.name

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "version": self.version,
            "via": self.where.via,
            "found_as": str(self.where.path / self.name),
            "soname": self.soname,
            "version_from": self.version_from,
            "cuda_major": self.cuda_major,
            "owner": self.owner,
        }


@dataclass(frozen=True)
class Load:
    """A library in the process: the name it answers to, the file, and why."""

    name: str
    copy: LibCopy
    by: str  # the object that needed it, "torch's preload" or "LD_PRELOAD"
    step: SearchDir

    @property
    def how(self) -> str:
        if self.by == VIA_PRELOAD:
            return f"torch's preload took it first from sys.path entry {self.step.entry}"
        if self.by == VIA_LD_PRELOAD:
            return f"LD_PRELOAD names it ({self.step.entry})"
        return f"{self.by} needs {self.name}; the loader found it through {_step_words(self.step)}"

    def to_json(self) -> dict[str, Any]:
        return {**self.copy.to_json(), "loaded_as": self.name, "by": self.by, "how": self.how}


def _step_words(step: SearchDir) -> str:
    if step.via == VIA_LD_LIBRARY_PATH:
        return f"LD_LIBRARY_PATH entry {step.entry!r}"
    return step.via


@dataclass(frozen=True)
class Loader:
    """The first of torch's CUDA objects found: the libraries it needs and the directories
    its needed names are searched in (the process's search, as the loader runs it)."""

    path: Path
    needed: tuple[str, ...]
    search: tuple[SearchDir, ...]


@dataclass
class LibraryIndex:
    """The model ``build_index`` fills in: every copy of a CUDA library in reach, which of
    them ``import torch`` loads and why, the second copies of a loaded SONAME, the names
    nothing answered, and whether torch's preload ran."""

    loader: Loader | None
    default_search: tuple[SearchDir, ...]
    copies: dict[str, list[LibCopy]] = field(default_factory=dict)
    # resolved directory -> {file name -> copy}
    listing: dict[Path, dict[str, LibCopy]] = field(default_factory=dict)
    loads: dict[str, Load] = field(default_factory=dict)  # name -> the library answering it
    doubles: list[Load] = field(default_factory=list)  # second copies of a loaded SONAME
    missing: list[tuple[str, str, tuple[SearchDir, ...]]] = field(default_factory=list)
    preload: Preload | None = None
    preload_ran: str | None = None  # why the preload ran (None: it did not)
    needed: dict[str, str] = field(default_factory=dict)  # name -> first object needing it
    cache: dict[str, SearchDir] = field(default_factory=dict)  # ld.so.cache: name -> where

    @property
    def search(self) -> tuple[SearchDir, ...]:
        return self.loader.search if self.loader else self.default_search

    def pick(self, name: str) -> LibCopy | None:
        """The copy the process uses for ``name``: the loaded one, else the first the
        default search finds."""
        load = self.loads.get(name)
        if load is not None:
            return load.copy
        found = self.find(name, self.default_search)
        return found[0] if found else None

    def find(self, name: str, steps: Iterable[SearchDir]) -> tuple[LibCopy, SearchDir] | None:
        for step in steps:
            where = self.cache.get(name) if step.cache else step
            if where is None:
                continue
            copy = self.listing.get(_resolved(where.path), {}).get(name)
            if copy is not None:
                return copy, where
        return None

    def searched(self, copy: LibCopy) -> bool:
        """Whether the loader's search can reach ``copy`` (or it is loaded)."""
        wanted = _resolved(copy.where.path)
        if any(load.copy.path == copy.path for load in self.loads.values()):
            return True
        if any(_resolved(d.path) == wanted for d in self.search if not d.cache):
            return True
        return any(
            self.cache.get(n) is not None and _resolved(self.cache[n].path) == wanted
            for n in self.listing.get(wanted, {})
        )

    def loaded(self, library: Library) -> list[Load]:
        seen: set[Path] = set()
        out = []
        for load in self.loads.values():
            if load.copy.library == library and load.copy.path not in seen:
                seen.add(load.copy.path)
                out.append(load)
        return out


def _resolved(path: Path) -> Path:
    return resolved(path)


# --- where the loader and the environment look -----------------------------------------


def _expand(entries: Iterable[str], origin: Path, ctx: Context, via: str) -> list[SearchDir]:
    out = []
    for entry in entries:
        text = entry.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin))
        out.append(SearchDir(ctx.resolve_entry(text), via, entry))
    return out


def ld_so_conf_dirs(ctx: Context) -> list[SearchDir]:
    host = ctx.request.host
    dirs: list[SearchDir] = []

    def read(path: Path, depth: int) -> None:
        text = read_text(path)
        if text is None:
            return
        lines = text.splitlines()
        for raw in lines:
            line = raw.split("#", 1)[0].strip()
            if line.startswith("include") and depth < _MAX_CONF_DEPTH:
                pattern = line.split(None, 1)[1] if " " in line else ""
                base = host.root if pattern.startswith("/") else path.parent
                for match in sorted(base.glob(pattern.lstrip("/"))):
                    read(match, depth + 1)
            elif line.startswith("/"):
                shown = "/" + str(path.relative_to(host.root)) if host.root != Path("/") else path
                dirs.append(SearchDir(host.path(line), f"ld.so.conf ({path.name})", str(shown)))

    read(host.path("/etc/ld.so.conf"), 0)
    return dirs


def _system(ctx: Context) -> list[SearchDir]:
    host = ctx.request.host
    return [SearchDir(host.path(d), "system library directory") for d in host.system_lib_dirs]


def _ld_library_path(ctx: Context) -> list[SearchDir]:
    return [SearchDir(ctx.resolve_entry(e), VIA_LD_LIBRARY_PATH, e) for e in ctx.ld_library_path]


class _Cache:
    """``/etc/ld.so.cache`` and, for attribution, which ``ld.so.conf`` file lists each
    directory it names."""

    def __init__(self, ctx: Context) -> None:
        host = ctx.request.host
        table = _ldcache.read(host.path("/etc/ld.so.cache"))
        self.present = table is not None
        self.conf = ld_so_conf_dirs(ctx)
        by_dir = {_resolved(d.path): d for d in self.conf}
        self.dirs: dict[str, SearchDir] = {}  # name -> where the cache sends it
        for name, target in (table or {}).items():
            if catalog().match(name) is None and not name.startswith("libcuda.so"):
                continue
            directory = host.path(str(Path(target).parent))
            conf = by_dir.get(_resolved(directory))
            if conf is not None:
                via = f"ld.so.cache (listed in {conf.entry})"
                self.dirs[name] = SearchDir(directory, via, conf.entry)
            else:
                self.dirs[name] = SearchDir(directory, "ld.so.cache (a trusted directory)")

    def steps(self) -> list[SearchDir]:
        """The cache as search steps: one per directory it sends names to (or, with no
        cache file, the ld.so.conf directories)."""
        if not self.present:
            return list(self.conf)
        unique: dict[Path, SearchDir] = {}
        for step in self.dirs.values():
            unique.setdefault(step.path, step)
        return list(unique.values())


def _environment_dirs(ctx: Context) -> Iterator[SearchDir]:
    """Directories the environment holds libraries in, searched or not."""
    yield SearchDir(ctx.env.prefix / "lib", "environment lib directory")
    for entry in ctx.env.search_path:
        try:
            entries = sorted(os.scandir(entry.path / "nvidia"), key=lambda e: e.name)
        except OSError:
            continue
        for found in entries:
            if is_dir(Path(found.path)):
                yield SearchDir(Path(found.path) / "lib", f"nvidia wheel ({found.name})")
    cuda_home = ctx.request.environ.get("CUDA_HOME") or ctx.request.environ.get("CUDA_PATH")
    toolkits = [Path(cuda_home)] if cuda_home else []
    toolkits.append(ctx.request.host.path("/usr/local/cuda"))
    for toolkit in toolkits:
        yield SearchDir(toolkit / "lib64", f"toolkit ({toolkit})")
        yield SearchDir(toolkit / "targets" / "x86_64-linux" / "lib", f"toolkit ({toolkit})")


# --- versions -------------------------------------------------------------------------


def toolkit_files_version(root: Path) -> tuple[str, str] | None:
    """A toolkit's CUDA version from its ``version.json`` or ``version.txt``."""
    raw = read_text(root / "version.json", _MAX_VERSION_FILE)
    if raw is not None:
        try:
            return str(json.loads(raw)["cuda"]["version"]), str(root / "version.json")
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
    text = read_text(root / "version.txt", _MAX_VERSION_FILE)
    if text is None:
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


def _major(version: str | None) -> int | None:
    head = (version or "").split(".", 1)[0]
    return int(head) if head.isdigit() else None


@dataclass(frozen=True)
class _Facts:
    """What one library file says of itself: its version and CUDA major, each with where it
    was read, and the package that owns it."""

    version: str | None
    version_from: str | None
    cuda_major: int | None
    cuda_major_from: str | None
    owner: str | None
    owner_record: str | None


def _owner_facts(library: Library, claim: Claim | None) -> _Facts | None:
    if claim is None:
        return None
    owner = claim.owner
    version = owner.version.split("+", 1)[0]
    major = wheel_cuda_major(owner.name) if owner.kind == "pip" else None
    major_from = f"distribution name {owner.name}" if major is not None else None
    if major is None and owner.package is not None:
        for dep in owner.package.depends:
            found = _CUDA_VERSION_DEP.match(dep)
            if found:
                major, major_from = int(found[1]), f"{owner.meta.name}: depends {dep}"
                break
    if major is None and library.versioned == "cuda":
        major, major_from = _major(version), f"{owner.label}"
    record = str(owner.meta)
    return _Facts(version, record, major, major_from, owner.label, record)


def _facts(ctx: Context, library: Library, real: Path) -> _Facts:
    found = _owner_facts(library, ctx.records.owner_of(str(real)))
    version, version_from = (found.version, found.version_from) if found else (None, None)
    major, major_from = (found.cuda_major, found.cuda_major_from) if found else (None, None)
    suffix = real.name.split(".so.", 1)[1] if ".so." in real.name else ""
    if version is None and "." in suffix:
        version, version_from = suffix, "file name"
    cu_dir = _CU_DIR.match(real.parent.parent.name) if real.parent.name == "lib" else None
    if cu_dir and real.parent.parent.parent.name == "nvidia":
        major, major_from = int(cu_dir[1]), f"directory {real.parent}"
    if library.versioned in ("cuda", "own") and (version is None or major is None):
        toolkit = _toolkit_version(real)
        if toolkit and version is None and library.versioned == "cuda":
            version, version_from = toolkit
        if toolkit and major is None:
            major, major_from = _major(toolkit[0]), toolkit[1]
    if major is None and library.versioned == "cuda":
        major, major_from = _major(version), version_from
    owner = found.owner if found else None
    return _Facts(
        version, version_from, major, major_from, owner, found.owner_record if found else None
    )


# --- the index ------------------------------------------------------------------------


def _scan(directory: Path) -> dict[Path, tuple[Library, list[str]]]:
    """Every CUDA library file in ``directory``: real path -> (library, names)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return {}
    found: dict[Path, tuple[Library, list[str]]] = {}
    cat = catalog()
    for entry in sorted(entries, key=lambda e: e.name):
        library = cat.match(entry.name)
        if library is not None:
            real = _resolved(Path(entry.path))
            if is_file(real):
                found.setdefault(real, (library, []))[1].append(entry.name)
    return found


class _Builder:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.cache = _Cache(ctx)
        self.lib_path = _ld_library_path(ctx)
        default = [*self.lib_path, *self._cache_steps(), *_system(ctx)]
        self.index = LibraryIndex(loader=None, default_search=tuple(default))
        self.index.cache = dict(self.cache.dirs)
        self.seen: dict[Path, LibCopy] = {}
        self.dynamic: dict[Path, ElfDynamic | None] = {}

    def _cache_steps(self) -> list[SearchDir]:
        if self.cache.present:
            return [SearchDir(Path("/etc/ld.so.cache"), "ld.so.cache", cache=True)]
        return list(self.cache.conf)

    # listing ----------------------------------------------------------------------

    def list_dir(self, where: SearchDir) -> dict[str, LibCopy]:
        key = _resolved(where.path)
        listing = self.index.listing.get(key)
        if listing is not None:
            return listing
        listing = self.index.listing.setdefault(key, {})
        for real, (library, names) in _scan(where.path).items():
            copy = self.seen.get(real)
            if copy is None:
                copy = self.seen[real] = self._copy(where, real, library, names)
                self.index.copies.setdefault(library.name, []).append(copy)
            listing.update(dict.fromkeys(names, copy))
        return listing

    def _copy(self, where: SearchDir, real: Path, library: Library, names: list[str]) -> LibCopy:
        dynamic = self.read(real)
        soname = dynamic.soname if dynamic else None
        facts = _facts(self.ctx, library, real)
        return LibCopy(
            library=library,
            path=real,
            name=soname if soname in names else names[0],
            soname=soname,
            version=facts.version,
            version_from=facts.version_from,
            cuda_major=facts.cuda_major,
            cuda_major_from=facts.cuda_major_from,
            owner=facts.owner,
            owner_record=facts.owner_record,
            where=where,
        )

    def read(self, path: Path) -> ElfDynamic | None:
        if path not in self.dynamic:
            self.dynamic[path] = read_dynamic(path) if is_file(path) else None
        return self.dynamic[path]

    # searching --------------------------------------------------------------------

    def steps_for(self, path: Path, dynamic: ElfDynamic) -> list[SearchDir]:
        name = path.name
        rpath = (
            []
            if dynamic.runpath
            else _expand(dynamic.rpath, path.parent, self.ctx, f"RPATH of {name}")
        )
        runpath = _expand(dynamic.runpath, path.parent, self.ctx, f"RUNPATH of {name}")
        return [*rpath, *self.lib_path, *runpath, *self._cache_steps(), *_system(self.ctx)]

    def search(self, name: str, steps: list[SearchDir]) -> tuple[LibCopy, SearchDir] | None:
        for step in steps:
            where = self.cache.dirs.get(name) if step.cache else step
            if where is None:
                continue
            copy = self.list_dir(where).get(name)
            if copy is not None:
                return copy, where
        return None

    def need(self, name: str, by: str, steps: list[SearchDir]) -> Load | bool | None:
        """Satisfy one needed name (a CUDA library's): True when a loaded library
        already answers it, the new Load, or None when nothing has it."""
        self.index.needed.setdefault(name, by)
        if name in self.index.loads:
            return True
        found = self.search(name, steps)
        if found is None:
            self.index.missing.append((name, by, tuple(steps)))
            return None
        copy, step = found
        return self.register(Load(name, copy, by, step))

    def register(self, load: Load) -> Load | bool | None:
        """Put a library in the process; the Load when it is a new object whose own
        dependencies still have to be loaded."""
        loads = self.index.loads
        if any(other.copy.path == load.copy.path for other in loads.values()):
            loads.setdefault(load.name, load)  # the same file under another name
            return True
        soname = load.copy.soname or load.copy.path.name
        if load.by == VIA_PRELOAD and soname in loads:
            self.index.doubles.append(load)  # loads beside the first copy, unused
            return True
        loads.setdefault(load.name, load)
        loads.setdefault(soname, load)
        return load

    def load_object(self, path: Path, label: str) -> bool:
        """Load an object and, breadth first as ld.so does, the CUDA libraries it
        needs and those they need; False when one is missing."""
        ok = True
        queue: list[tuple[Path, str]] = [(path, label)]
        for depth in range(_MAX_DEPTH):
            fresh: list[tuple[Path, str]] = []
            for obj, name in queue:
                dynamic = self.read(obj)
                if dynamic is None:
                    ok = ok and depth > 0
                    continue
                steps = self.steps_for(obj, dynamic)
                for needed in dynamic.needed:
                    if catalog().match(needed) is None:
                        continue
                    got = self.need(needed, name, steps)
                    ok = ok and got is not None
                    if isinstance(got, Load):
                        fresh.append((got.copy.path, got.copy.path.name))
            if not fresh:
                break
            queue = fresh
        return ok

    def register_and_load(self, load: Load) -> None:
        got = self.register(load)
        if isinstance(got, Load):
            self.load_object(got.copy.path, got.copy.path.name)

    # the steps of `import torch` ------------------------------------------------------

    def ld_preload(self) -> None:
        """``LD_PRELOAD``'s CUDA libraries: by path, or searched by name."""
        value = self.ctx.request.environ.get("LD_PRELOAD", "")
        for entry in (e for e in re.split(r"[: ]", value) if e):
            name = Path(entry).name
            if catalog().match(name) is None:
                continue
            if "/" in entry:
                step = SearchDir(self.ctx.resolve_entry(str(Path(entry).parent)), VIA_LD_PRELOAD)
                copy = self.list_dir(step).get(name)
                found = (copy, step) if copy is not None else None
            else:
                found = self.search(name, list(self.index.default_search))
            if found is not None:
                step = SearchDir(found[1].path, VIA_LD_PRELOAD, entry)
                self.register_and_load(Load(name, found[0], VIA_LD_PRELOAD, step))

    def global_deps(self) -> bool | None:
        """Load libtorch_global_deps.so; None when this torch has none."""
        torch = self.ctx.env.torch
        path = torch.lib_dir / GLOBAL_DEPS if torch is not None else None
        if path is None or self.read(path) is None:
            return None
        return self.load_object(path, GLOBAL_DEPS)

    def run_preload(self, preload: Preload) -> None:
        torch = self.ctx.env.torch
        major = torch.cuda.major if torch is not None and torch.cuda is not None else None
        for folder, pattern in preload.order:
            found = self._first(folder, pattern, major if preload.cuda_major_folder else None)
            if found is None:
                continue
            directory, name, entry = found
            step = SearchDir(directory, VIA_PRELOAD, str(entry))
            copy = self.list_dir(step).get(name)
            if copy is not None:
                self.register_and_load(Load(copy.soname or name, copy, VIA_PRELOAD, step))

    def _first(self, folder: str, pattern: str, major: int | None) -> tuple[Path, str, Path] | None:
        """torch's ``_get_cuda_dep_paths`` over sys.path: the first entry with any
        match, and its first match (in directory order, as glob returns them)."""
        for entry in self.ctx.env.search_path:
            dirs = [entry.path / "nvidia" / folder / "lib"]
            if major is not None:
                dirs.append(entry.path / "nvidia" / f"cu{major}" / "lib")
            dirs.append(entry.path / folder / "lib")
            for directory in dirs:
                try:
                    names = [e.name for e in os.scandir(directory)]
                except OSError:
                    continue
                matches = [
                    n for n in names if not n.startswith(".") and fnmatch.fnmatchcase(n, pattern)
                ]
                if matches:
                    return directory, matches[0], entry.path
        return None

    def torch_objects(self) -> None:
        torch = self.ctx.env.torch
        if torch is None:
            return
        names = [n for n in TORCH_OBJECTS if is_file(torch.lib_dir / n)]
        if not names and is_file(torch.lib_dir / OLD_TORCH_OBJECT):
            names = [OLD_TORCH_OBJECT]
        for name in names:
            path = torch.lib_dir / name
            dynamic = self.read(path)
            if dynamic is None:
                continue
            if self.index.loader is None:
                steps = tuple(self.steps_for(path, dynamic))
                self.index.loader = Loader(path, dynamic.needed, steps)
            self.load_object(path, name)


def build_index(ctx: Context) -> LibraryIndex:
    builder = _Builder(ctx)
    index = builder.index
    builder.ld_preload()
    deps_ok = builder.global_deps()
    torch = ctx.env.torch
    if torch is not None and torch.cuda is not None and deps_ok is not None:
        preload = torch_preload(torch.package_dir / "__init__.py")
        index.preload = preload
        cudart = any(load.copy.library.name == "cudart" for load in index.loads.values())
        if deps_ok is False:
            index.preload_ran = f"{GLOBAL_DEPS} could not find a CUDA library"
        elif preload.after_success and cudart:
            index.preload_ran = f"{GLOBAL_DEPS} loaded libcudart"
        if index.preload_ran and preload.order:
            builder.run_preload(preload)
            if deps_ok is False:
                index.missing = [m for m in index.missing if m[1] != GLOBAL_DEPS]
                builder.global_deps()
    builder.torch_objects()
    for where in [*builder.index.search, *builder.cache.steps(), *_environment_dirs(ctx)]:
        if not where.cache:
            builder.list_dir(where)
    index.missing = [m for m in index.missing if m[0] not in index.loads]
    return index
