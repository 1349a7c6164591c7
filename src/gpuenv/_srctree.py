"""A project's source tree as its build sees it: the files that decide what compiling
it produces, and one hash of their contents (the key of its build).

Python files are not in the key (an editable install reads them from the tree, so an
edit is visible at once and rebuilds nothing), except the build's own: ``setup.py``
and the in-tree build backend (``[build-system] backend-path``). The key covers the
build configuration (``pyproject.toml``, ``setup.cfg``, ``MANIFEST.in``, CMake files)
and every native source (C, C++, CUDA, Cython, headers).

Paths are strings and the standard library's cheapest modules only (no pathlib):
``gpuenv run`` uses it to say that a compiled project is stale.
"""

from __future__ import annotations

import os
import stat

from gpuenv import _sha256

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

# Directories never part of a project's sources (caches, build outputs, environments).
SKIPPED_DIRS = frozenset(
    {"__pycache__", "build", "dist", "node_modules", "site-packages", "venv", "env"}
)
CUDA_SUFFIXES = frozenset({".cu", ".cuh"})
NATIVE_SUFFIXES = frozenset(
    {".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".inl", ".pyx", ".pxd"}
    | CUDA_SUFFIXES
)
BUILD_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in"})
MAX_FILES = 200_000  # a walk that finds more is not a project's sources
KEY_FORMAT = 1


def walk(root: str | os.PathLike[str]) -> Iterator[str]:
    """The project's files (paths relative to ``root``, with ``/``), in a stable order,
    skipping hidden and build directories (``.git``, ``.gpuenv``, ``.venv``, ``build``,
    ``*.egg-info``), never following a link to a directory."""
    base = os.fspath(root)
    count = 0
    for directory, dirs, files in os.walk(base):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in SKIPPED_DIRS
            and not d.endswith(".egg-info")
            and not os.path.islink(os.path.join(directory, d))  # noqa: PTH114, PTH118
        )
        relative = os.path.relpath(directory, base)
        for name in sorted(files):
            count += 1
            if count > MAX_FILES:
                return
            yield name if relative == "." else f"{relative.replace(os.sep, '/')}/{name}"


def is_build_input(relative: str, backend_dirs: Iterable[str] = ()) -> bool:
    """Whether a file (its path relative to the root, with ``/``) is in the build's key."""
    name = relative.rsplit("/", 1)[-1]
    if "/" not in relative and name in BUILD_FILES:
        return True
    if "." in name and "." + name.rsplit(".", 1)[1].lower() in NATIVE_SUFFIXES:
        return True
    if name == "CMakeLists.txt" or name.endswith(".cmake"):
        return True
    return any(
        relative.startswith(d.strip("/") + "/")
        for d in backend_dirs
        if d.strip("/") not in ("", ".")
    )


def build_inputs(root: str | os.PathLike[str], backend_dirs: Iterable[str] = ()) -> list[str]:
    dirs = tuple(backend_dirs)
    return [p for p in walk(root) if is_build_input(p, dirs)]


def tree_key(root: str | os.PathLike[str], backend_dirs: Iterable[str] = ()) -> str:
    """sha256 over the build inputs' relative paths and contents."""
    base = os.fspath(root)
    digest = _sha256.new(f"gpuenv-tree {KEY_FORMAT}\n".encode())
    for relative in build_inputs(base, backend_dirs):
        path = os.path.join(base, relative)  # noqa: PTH118
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # noqa: PTH116
                continue  # a FIFO would block, a device never end
            content = _sha256.new()
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    content.update(chunk)
        except OSError:
            continue  # unreadable (a broken link): not an input
        digest.update(f"{relative}\0{content.hexdigest()}\n".encode())
    return "sha256:" + digest.hexdigest()
