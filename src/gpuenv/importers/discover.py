"""Finding the environment files in a repository checkout, the way a person would.

A bounded walk (``MAX_DEPTH`` folders down, ``MAX_ENTRIES`` directory entries in all),
never following links to folders (so a symlink loop ends), never entering vendored,
data or tool folders (``SKIP``). What it uses:

- every known file at the top level, and anywhere below the folders people keep them in
  (``docker/``, ``docker/<name>/``, ``requirements/``, ``envs/``, ``conda/``,
  ``.devcontainer/``, ...);
- Dockerfiles, ``setup.py`` and ``pyproject.toml`` in other subfolders
  (``training/Dockerfile``, ``utils/docker/Dockerfile``, ``models/ops/setup.py``).

What it finds and does not use is listed with the reason: development-only requirement
files, files in examples/tests/docs folders, other formats in other subfolders, and
``pixi.lock`` (every platform's solve; ``pixi.toml`` is read). Naming a file explicitly
always imports it.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpuenv.importers._devfiles import dev_only, is_dev_group

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
    # named for a part of the project (Vim's vim/vim_requirements.txt, det-requirements.txt)
    "*_requirements.txt",
    "*-requirements.txt",
    "*_requirements.in",
    "*-requirements.in",
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
    "pipfile",
    "pipfile.lock",
    "poetry.lock",
    "uv.lock",
    "pixi.toml",
    ".python-version",
)
# Found, named in the report, never read: why.
LISTED = {
    "pixi.lock": "pixi's lock holds every platform's solve: pixi.toml is read instead",
}
# Folders that hold environment files in real repositories: everything known below them
# is used (``requirements/base.txt``, ``docker/cuda/Dockerfile``).
FOLDERS = (
    "docker",
    "dockers",
    "requirements",
    "envs",
    "env",
    "environment",
    "environments",
    "conda",
    ".devcontainer",
    "install",
    "installation",
    "container",
    "containers",
)
# Kinds used in any other subfolder: a second project or image of the repository.
ANYWHERE = ("dockerfile*", "*.dockerfile", "containerfile", "setup.py", "pyproject.toml")
# Folders whose files are listed, not used: not the paper's environment.
ASIDE = frozenset(
    {"examples", "example", "tests", "test", "docs", "doc", "benchmarks", "benchmark",
     "demo", "demos", "notebooks", "tutorials", "tutorial", "website", "legacy", "old",
     "deprecated", "archive"}
)  # fmt: skip
# Folders never entered: vendored code, data, build output, tool state.
SKIP = frozenset(
    {"node_modules", ".git", ".hg", ".svn", "third_party", "thirdparty", "3rdparty",
     "vendor", "vendored", "external", "extern", "externals", "submodules", "data",
     "datasets", "dataset", "checkpoints", "checkpoint", "ckpt", "ckpts", "weights",
     "pretrained", "models_zoo", "outputs", "output", "logs", "wandb", "runs", "mlruns",
     "lightning_logs", "build", "dist", "site-packages", "venv", ".venv", "__pycache__",
     ".tox", ".nox", ".eggs", ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints",
     "assets", "images", "img", "figures", "static", "media", "results", ".pixi",
     ".github", ".idea", ".vscode"}
)  # fmt: skip
MAX_DEPTH = 4  # folders below the root
MAX_ENTRIES = 5000  # directory entries looked at in one search
MAX_FOUND = 32  # files used
MAX_LISTED = 40  # files listed as found and not used


@dataclass
class Found:
    """What discovery found in a checkout: the files it uses, those it does not use (with
    why), how many directory entries it looked at, and the one folder that holds the
    project where there is one."""

    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # path, why
    entries: int = 0
    # Nothing at the top, everything in one subfolder (NVlabs/eg3d keeps its project and
    # environment.yml in eg3d/): that folder is the project's, and its files are used.
    project_folder: Path | None = None


def _known(name: str, in_requirements: bool) -> bool:
    if any(fnmatch.fnmatch(name, p) for p in PATTERNS):
        return True
    # requirements/base.txt, requirements/cuda.in: every list there is a requirements file
    return in_requirements and name.endswith((".txt", ".in"))


# What a setup.py that builds something imports its setup() from.
_SETUP_CALL = re.compile(rb"\b(setuptools|distutils|skbuild)\b")


def _calls_setup(path: Path) -> bool:
    """A subfolder's setup.py that builds something (setuptools, distutils or
    scikit-build named), not a module of that name (dinov2's ``dinov2/eval/setup.py``
    calls its own ``setup(args)`` for an evaluation). Unreadable: kept, and its reader
    says why."""
    try:
        with path.open("rb") as file:
            return bool(_SETUP_CALL.search(file.read(1 << 20)))
    except OSError:
        return True


@dataclass
class _Walk:
    """One discovery's walk of the checkout at ``root``, filling in ``found``; ``listed``
    counts the files not used, past ``MAX_LISTED`` of which only "more" is listed."""

    root: Path
    found: Found
    listed: int = 0

    def skip(self, path: Path, why: str) -> None:
        if self.listed < MAX_LISTED:
            self.found.skipped.append((path, why))
        elif self.listed == MAX_LISTED:
            self.found.skipped.append((path.parent, NOT_LISTED))
        self.listed += 1

    def use(self, path: Path) -> None:
        if len(self.found.files) < MAX_FOUND:
            self.found.files.append(path)
        else:
            self.skip(path, f"more than {MAX_FOUND} environment files: not read")

    def file(self, path: Path, parts: tuple[str, ...]) -> None:
        name = path.name.lower()
        in_requirements = bool(parts) and parts[-1] == "requirements"
        if name in LISTED:
            self.skip(path, LISTED[name])
            return
        if not _known(name, in_requirements):
            return
        aside = next((p for p in parts if p in ASIDE), None)
        if dev_only(name) or (in_requirements and is_dev_group(name.split(".", 1)[0])):
            self.skip(path, "development requirements")
        elif aside is not None:
            self.skip(path, f"in {aside}/: not the paper's environment (pass it to use it)")
        elif name == "setup.py" and parts and not _calls_setup(path):
            self.skip(path, "a module named setup.py (no setuptools): not a project's")
        elif not parts or parts[0] in FOLDERS or any(fnmatch.fnmatch(name, p) for p in ANYWHERE):
            self.use(path)
        else:
            self.skip(path, SUBFOLDER)

    def folder(self, folder: Path, parts: tuple[str, ...]) -> list[tuple[Path, tuple[str, ...]]]:
        """Read one folder; the subfolders to walk next."""
        found = self.found
        try:
            with os.scandir(folder) as entries:
                ordered = sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            found.skipped.append((folder, f"cannot be listed: {exc.strerror or exc}"))
            return []
        below: list[tuple[Path, tuple[str, ...]]] = []
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
            if is_dir:
                hidden = name.startswith(".") and name not in FOLDERS
                if name not in SKIP and not hidden and len(parts) < MAX_DEPTH:
                    below.append((Path(entry.path), (*parts, name)))
            elif entry.is_symlink() and not is_file:
                if _known(name, False):
                    found.skipped.append(
                        (Path(entry.path), "a link to a folder or nothing: not followed")
                    )
            elif is_file:
                self.file(Path(entry.path), parts)
        return below


def discover(root: Path) -> Found:
    """The environment files of the checkout at ``root``, top level first, then each
    level down (breadth first, sorted by name)."""
    found = Found()
    walk = _Walk(root, found)
    level: list[tuple[Path, tuple[str, ...]]] = [(root, ())]
    while level and found.entries <= MAX_ENTRIES:
        following: list[tuple[Path, tuple[str, ...]]] = []
        for folder, parts in level:
            following.extend(walk.folder(folder, parts))
            if found.entries > MAX_ENTRIES:
                break
        level = following
    if not found.files:
        _use_the_one_project_folder(root, found)
    return found


SUBFOLDER = "in a subfolder: not used (pass it to use it)"
NOT_LISTED = "more files found: not listed"


def _use_the_one_project_folder(root: Path, found: Found) -> None:
    """Where no file was used and every file left in a subfolder lies in the same
    top-level folder, that folder holds the project: its files are used."""
    aside = [path for path, why in found.skipped if why == SUBFOLDER]
    tops = {path.relative_to(root).parts[0] for path in aside}
    if len(tops) != 1:
        return
    found.project_folder = root / tops.pop()
    found.files = aside[:MAX_FOUND]
    found.skipped = [(p, why) for p, why in found.skipped if why != SUBFOLDER]
