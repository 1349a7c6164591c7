"""Finding the environment files in a repository checkout, the way a person would:
the top level, and the folders people keep them in (``docker/``, ``requirements/``,
``envs/``, ``conda/``, ``.devcontainer/``, ...), one level down, never following links
to folders (so a symlink loop ends), with bounds on what is looked at.

Development-only requirement files (``requirements-dev.txt``, ``docs/``) are skipped
and listed, so the report can say they were left out; naming a file explicitly always
imports it.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpuenv.importers.pyproject import is_dev_group

PATTERNS = (
    "environment*.yml",
    "environment*.yaml",
    "env.yml",
    "env.yaml",
    "conda*.yml",
    "conda*.yaml",
    "*conda-lock*.yml",
    "*conda-lock*.yaml",
    "requirements*.txt",
    "requirements*.in",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "dockerfile*",
    "*.dockerfile",
    "containerfile",
    "cog.yaml",
    "cog.yml",
    "collect_env*.txt",
    "pip-freeze*.txt",
    "pip_freeze*.txt",
)
# Folders one level below the root that hold environment files in real repositories.
FOLDERS = (
    "docker",
    "requirements",
    "envs",
    "env",
    "environment",
    "environments",
    "conda",
    ".devcontainer",
    "install",
)
MAX_ENTRIES = 5000  # directory entries looked at in one search
MAX_FOUND = 32


@dataclass
class Found:
    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # path, why
    entries: int = 0


def _dev_only(name: str) -> bool:
    stem = name.lower().split(".", 1)[0]
    for prefix in ("requirements", "requirements_", "requirements-", "environment"):
        if stem.startswith(prefix) and stem != prefix:
            rest = stem[len(prefix) :].lstrip("-_")
            return bool(rest) and is_dev_group(rest)
    return False


def _scan(folder: Path, found: Found, *, top: bool) -> list[Path]:
    """Matching files in ``folder`` and (at the top) the folders to look into."""
    subfolders: list[Path] = []
    try:
        with os.scandir(folder) as entries:
            ordered = sorted(entries, key=lambda e: e.name)
    except OSError as exc:
        found.skipped.append((folder, f"cannot be listed: {exc.strerror or exc}"))
        return []
    for entry in ordered:
        found.entries += 1
        if found.entries > MAX_ENTRIES:
            found.skipped.append((folder, f"more than {MAX_ENTRIES} entries: search stopped"))
            return []
        name = entry.name.lower()
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = entry.is_file(follow_symlinks=True)
        except OSError:  # a symlink loop or a vanished entry
            found.skipped.append((Path(entry.path), "a broken or looping link"))
            continue
        if is_dir and top and name in FOLDERS:
            subfolders.append(Path(entry.path))
        elif entry.is_symlink() and not is_file:
            found.skipped.append((Path(entry.path), "a link to a folder or nothing: not followed"))
        elif is_file and any(fnmatch.fnmatch(name, p) for p in PATTERNS):
            if _dev_only(name):
                found.skipped.append((Path(entry.path), "development requirements"))
            elif len(found.files) < MAX_FOUND:
                found.files.append(Path(entry.path))
    return subfolders


def discover(root: Path) -> Found:
    """The environment files of the checkout at ``root``, top level first."""
    found = Found()
    for folder in _scan(root, found, top=True):
        _scan(folder, found, top=False)
    return found
