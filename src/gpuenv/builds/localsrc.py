"""A local project's source for its build: a copy of its tree (``file://`` source of
kind ``project``), so that the build's objects (setuptools' ``build/``, ninja files)
never land in the tree, and two targets' builds never reuse each other's objects."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

from gpuenv._srctree import SKIPPED_DIRS
from gpuenv.builds.model import BuildSource
from gpuenv.errors import BuildError


def root_of(source: BuildSource) -> Path:
    parts = urlsplit(source.url)
    if parts.scheme != "file" or not parts.path:
        raise BuildError(f"a project source must be a file:// URL, not {source.url!r}")
    return Path(unquote(parts.path))


def _ignored(directory: str, names: list[str]) -> set[str]:
    return {
        n
        for n in names
        if (n.startswith(".") or n in SKIPPED_DIRS or n.endswith(".egg-info"))
        and (Path(directory) / n).is_dir()
    }


def copy_tree(source: BuildSource, workdir: Path) -> Path:
    """The project's tree copied to ``<workdir>/src`` (links kept as links)."""
    root = root_of(source)
    target = workdir / "src"
    try:
        shutil.copytree(root, target, symlinks=True, ignore=_ignored)
    except (OSError, shutil.Error) as exc:
        raise BuildError(
            f"the project at {root} could not be copied for its build: {exc}"
        ) from None
    return target
