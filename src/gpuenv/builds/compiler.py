"""The host compiler nvcc uses: found on this machine, checked against what the
toolkit accepts *before* a build starts, and named in the lock as ``gcc-<major>``.

What a toolkit accepts is read from the toolkit itself where it is at hand (the
``#if __GNUC__ > N`` check in ``include/crt/host_config.h``, the very check nvcc runs),
and from ``knowledge/data/host_compilers.toml`` otherwise (at lock time, before the toolkit is
installed). Candidates, in order: ``$CC`` (when it is a GCC), ``gcc``, then ``gcc-N``
for every major the toolkit accepts, newest first; each one's C++ driver (``g++``,
``g++-N``, or ``$CXX``) goes with it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuenv import _proc
from gpuenv.builds import knowledge
from gpuenv.errors import BuildError, ExternalToolError

_GNUC_MAX = re.compile(r"^\s*#\s*if\s+__GNUC__\s*>\s*(\d+)\s*$", re.MULTILINE)
_OLDEST_GCC = 4
_NEWEST_GCC = 20


@dataclass(frozen=True)
class HostCompiler:
    """A GCC found on this machine, with its C++ driver when there is one: a compiler
    nvcc can be told to use."""

    family: str  # "gcc"
    major: int
    version: str  # "12.2.0"
    cc: Path
    cxx: Path | None

    @property
    def name(self) -> str:
        """As the lock records it: ``gcc-12``."""
        return f"{self.family}-{self.major}"


@dataclass(frozen=True)
class Support:
    """The GCC majors one toolkit accepts, and where that was read."""

    cuda: str
    gcc_min: int
    gcc_max: int
    source: str

    def accepts(self, major: int) -> bool:
        return self.gcc_min <= major <= self.gcc_max

    def describe(self) -> str:
        return f"nvcc {self.cuda} accepts gcc {self.gcc_min} to {self.gcc_max} ({self.source})"


def toolkit_gcc_max(cuda_home: Path) -> int | None:
    """The newest GCC major the toolkit's own ``host_config.h`` lets through."""
    for header in (
        cuda_home / "include" / "crt" / "host_config.h",
        cuda_home / "targets" / "x86_64-linux" / "include" / "crt" / "host_config.h",
    ):
        try:
            text = header.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        match = _GNUC_MAX.search(text)
        if match:
            return int(match.group(1))
    return None


def support(cuda: str, cuda_home: Path | None = None) -> Support | None:
    """What nvcc of CUDA ``cuda`` accepts: from the toolkit at ``cuda_home`` when it says,
    else from the table. None when neither knows this release."""
    table = knowledge.support_for(cuda)
    found = toolkit_gcc_max(cuda_home) if cuda_home is not None else None
    minimum = table.gcc_min if table else _OLDEST_GCC
    if found is not None:
        return Support(cuda, minimum, found, f"{cuda_home}/include/crt/host_config.h")
    if table is not None:
        return Support(cuda, table.gcc_min, table.gcc_max, table.source)
    return None


def gcc_version(path: Path) -> str | None:
    """``gcc -dumpfullversion`` ("12.2.0"); None for something that is not a GCC."""
    try:
        result = _proc.run(
            [path, "-dumpfullversion", "-dumpversion"], timeout=30, check=False, what=path.name
        )
    except ExternalToolError:
        return None
    text = result.stdout.strip()
    if result.returncode != 0 or not re.fullmatch(r"\d+(\.\d+)*", text):
        return None
    version = _proc.run([path, "--version"], timeout=30, check=False, what=path.name)
    if "clang" in version.stdout.lower():
        return None  # clang answers -dumpversion too
    return text


def _which(name: str, environ: Mapping[str, str]) -> Path | None:
    found = shutil.which(name, path=environ.get("PATH", os.defpath))
    return Path(found) if found else None


def _cxx_for(cc: Path, environ: Mapping[str, str]) -> Path | None:
    name = cc.name
    if name.startswith("gcc"):
        sibling = cc.with_name("g++" + name[3:])
        if sibling.exists():
            return sibling
    cxx = environ.get("CXX")
    return _which(cxx, environ) if cxx else None


def candidates(environ: Mapping[str, str]) -> list[HostCompiler]:
    """Every GCC on this machine a build could use, in the order they are preferred."""
    names = []
    if environ.get("CC"):
        names.append(environ["CC"])
    names.append("gcc")
    names += [f"gcc-{major}" for major in range(_NEWEST_GCC, _OLDEST_GCC - 1, -1)]
    seen: set[str] = set()
    out = []
    for name in names:
        path = _which(name, environ) if "/" not in name else Path(name)
        if path is None or not path.exists():
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        version = gcc_version(path)
        if version is None:
            continue
        major = int(version.split(".")[0])
        out.append(HostCompiler("gcc", major, version, path, _cxx_for(path, environ)))
    return out


def for_lock(
    environ: Mapping[str, str], cuda: str | None, previous: str | None = None
) -> str | None:
    """The host compiler a new lock names (``gcc-12``): the previous lock's while the
    toolkit still accepts it; else this machine's preferred GCC that it accepts; else the
    newest major the toolkit accepts (to be installed where the build runs). Without a
    CUDA (a CPU build) nvcc sets no limit: the previous lock's, or this machine's GCC."""
    if cuda is None:
        if previous is not None:
            return previous
        found = candidates(environ)
        return found[0].name if found else None
    limits = support(cuda)
    if limits is None:
        return previous
    if previous is not None and _major_of(previous) is not None:
        major = _major_of(previous)
        if major is not None and limits.accepts(major):
            return previous
    for compiler in candidates(environ):
        if limits.accepts(compiler.major):
            return compiler.name
    return f"gcc-{limits.gcc_max}"


def _major_of(name: str) -> int | None:
    match = re.fullmatch(r"gcc-(\d+)", name)
    return int(match.group(1)) if match else None


def select(
    environ: Mapping[str, str], wanted: str | None, cuda: str | None, cuda_home: Path | None
) -> HostCompiler | None:
    """The compiler to build with. ``wanted`` is the lock's ``gcc-N``: a GCC of that
    major must be here, and the toolkit must accept it; both are checked now, before
    anything compiles, and a failure names the versions that would work."""
    found = candidates(environ)
    if wanted is None:
        return found[0] if found else None
    major = _major_of(wanted)
    if major is None:
        raise BuildError(f"the lock names host compiler {wanted!r}: gpuenv knows only gcc-N")
    limits = support(cuda, cuda_home) if cuda else None
    if limits is not None and not limits.accepts(major):
        raise BuildError(
            f"the lock builds with {wanted}, but {limits.describe()}",
            hint="relock (gpuenv lock --upgrade) to choose a compiler this toolkit accepts",
        )
    match = next((c for c in found if c.major == major), None)
    if match is not None:
        return match
    have = ", ".join(f"gcc {c.version} ({c.cc})" for c in found) or "no GCC at all"
    working = f"; {limits.describe()}" if limits is not None else ""
    raise BuildError(
        f"the lock builds with {wanted}; this machine has {have}{working}",
        hint=f"install gcc-{major} and g++-{major} (e.g. apt install gcc-{major} g++-{major}), "
        "or set CC to one, or relock here with 'gpuenv lock --upgrade' to use this "
        "machine's compiler",
    )
