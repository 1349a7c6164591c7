"""A requirement that is a folder, not a package: where it lies decides what it is.

pip installs a path as a local package (``-e /home/tiger/ColossalAI``,
``apex @ file:///home/tiger/apex``, 3DGS's ``submodules/simple-knn`` in an
environment.yml ``pip:`` list). A folder of the repository is a source to build
(``LOCAL_PACKAGE``, with its setup.py's CUDA use when the folder is there); one on the
author's machine or outside the repository cannot be had from the files at all
(``AUTHOR_PATH``): written into the spec it could never lock. ``.`` (the project itself)
is left to ``requirements.ask_from``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from gpuenv.errors import ForeignFileError
from gpuenv.importers._context import Context
from gpuenv.importers.model import AUTHOR_PATH, LOCAL_PACKAGE, Origin, ReadingBuilder

_NAMED_FILE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*@\s*(?P<url>file:\S+)$")
_CUDA_USE = re.compile(r"^.*\bCUDAExtension\b.*$", re.MULTILINE)
_EXTRAS = re.compile(r"(\[[^\]]*\])?(#.*)?$")
_ARCHIVES = (".whl", ".tar.gz", ".tgz", ".zip", ".tar.bz2")
COMPILES_CUDA = "it compiles CUDA code against torch"  # how a LOCAL_PACKAGE note begins


def _path_of(text: str, *, editable: bool) -> str | None:
    """The path a requirement names, or None when it names a package or a URL."""
    named = _NAMED_FILE.match(text)
    if named is not None or text.startswith("file:"):
        url = named["url"] if named is not None else text
        return unquote(urlsplit(url).path) or None
    if "://" in text or text.startswith(("git+", "hg+", "svn+", "bzr+")):
        return None
    if editable or text.startswith((".", "/", "~")):
        return text
    # pip reads a word with a separator as a path: `submodules/simple-knn` (no package
    # name can hold a slash, and a requirement with a URL has an @)
    return text if "/" in text and "@" not in text and " " not in text else None


def folder_named(text: str, *, editable: bool) -> str | None:
    """The folder a requirement names, as written (extras and ``#egg=`` still on it),
    or None when it names a package, a URL or a wheel or archive file."""
    path = _path_of(text, editable=editable)
    return None if path is None or path.endswith(_ARCHIVES) else path


def is_the_project(text: str) -> bool:
    """``.``, ``./``, ``.[dev]``: the folder imported, the project itself."""
    return os.path.normpath(_EXTRAS.sub("", text)) == "."


def read_local_path(
    ctx: Context,
    builder: ReadingBuilder,
    text: str,
    origin: Origin,
    *,
    editable: bool,
    context: bool = False,
) -> bool:
    """Record ``text`` as a local package or an author's path; False when it is
    neither (a package, a URL, the project itself, or a Dockerfile's path in its image).
    ``context``: a Dockerfile's path already read as the build context's (a COPY's)."""
    if builder.format == "dockerfile" and not context:  # a path in the image, unknown
        return False
    path = folder_named(text, editable=editable)
    if path is None:
        return False  # a package, a URL, or a wheel or archive file: ask_from's word
    path = _EXTRAS.sub("", path)  # `-e .[dev]`, `./pkg#egg=pkg`: the folder
    if path.startswith(("/", "~")):
        builder.fact(AUTHOR_PATH, path, origin, "a path on the author's machine")
        return True
    if is_the_project(path):
        return False  # ask_from says so
    relative = os.path.normpath(path)
    folder = ctx.root / relative
    if relative.startswith("..") or not ctx.inside(folder):
        builder.fact(AUTHOR_PATH, path, origin, "a folder outside the repository")
        return True
    builder.fact(LOCAL_PACKAGE, relative, origin, _cuda_use(ctx, folder))
    return True


def _cuda_use(ctx: Context, folder: Path) -> str | None:
    """What the folder's setup.py compiles, as a phrase; None when it compiles no CUDA
    code (a pure-Python package)."""
    setup = folder / "setup.py"
    if not folder.is_dir():
        return "its folder is not in this checkout (a git submodule not fetched?)"
    if not setup.is_file():
        return "it has no setup.py gpuenv could look into"
    try:
        text = ctx.text(setup)
    except ForeignFileError as exc:
        return f"its setup.py could not be read ({exc.problems[0].message})"
    found = _CUDA_USE.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    cited = Origin(ctx.display(setup), line, found.group(0).strip()).cite()
    return f"{COMPILES_CUDA} ({cited})"
