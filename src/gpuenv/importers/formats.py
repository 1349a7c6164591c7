"""Which reader a file needs: by its name first, then (for ``.txt`` and unnamed files,
and YAML whose name says nothing) by its content. An unrecognised file is an error that
lists what gpuenv reads."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from pathlib import Path

from gpuenv.importers import (
    cog,
    collect_env,
    conda_env,
    conda_lock,
    dockerfile,
    lockfiles,
    pyproject,
    readme,
    requirements,
    setup_cfg,
    setup_py,
)
from gpuenv.importers._context import Context
from gpuenv.importers._text import fail

Reader = Callable[[Context, Path, str, str], None]

READERS: dict[str, Reader] = {
    "conda-env": conda_env.read,
    "conda-lock": conda_lock.read,
    "cog": cog.read,
    "requirements": requirements.read,
    "constraints": requirements.read,
    "pip-freeze": requirements.read,
    "collect-env": collect_env.read,
    "pyproject": pyproject.read,
    "setup-py": setup_py.read,
    "setup-cfg": setup_cfg.read,
    "dockerfile": dockerfile.read,
    "python-version": lockfiles.read_python_version,
    "pipfile": lockfiles.read_pipfile,
    "pipfile-lock": lockfiles.read_pipfile_lock,
    "poetry-lock": lockfiles.read_poetry_lock,
    "uv-lock": lockfiles.read_uv_lock,
    "pixi": lockfiles.read_pixi,
    "readme": readme.read,
    "install-script": readme.read,
}

KNOWN = (
    "environment.yml / conda env export, conda-lock.yml, cog.yaml, requirements*.txt, "
    "*_requirements.txt, pip freeze output, collect_env output, pyproject.toml, setup.py, "
    "setup.cfg, Dockerfile, Pipfile, Pipfile.lock, poetry.lock, uv.lock, pixi.toml, "
    ".python-version, readme*.md (its shell blocks) and install scripts (*.sh)"
)


_NAMES = (
    (("cog.yaml", "cog.yml"), "cog"),
    (("*conda-lock*.yml", "*conda-lock*.yaml"), "conda-lock"),
    (("pyproject.toml",), "pyproject"),
    (("setup.py",), "setup-py"),
    (("setup.cfg",), "setup-cfg"),
    (("dockerfile*", "containerfile*", "*.dockerfile", "*.containerfile"), "dockerfile"),
    (("constraints*.txt",), "constraints"),
    (("pipfile",), "pipfile"),
    (("pipfile.lock",), "pipfile-lock"),
    (("poetry.lock",), "poetry-lock"),
    (("uv.lock",), "uv-lock"),
    (("pixi.toml",), "pixi"),
    ((".python-version",), "python-version"),
    (("readme*.md", "install*.md", "get_started*.md", "getting_started*.md"), "readme"),
    (("*.sh", "*.bash"), "install-script"),  # its pip and conda lines, as a README's
)


def _by_name(name: str) -> str | None:
    lower = name.lower()
    for patterns, kind in _NAMES:
        if any(fnmatch.fnmatch(lower, p) for p in patterns):
            return kind
    return None


def _yaml_kind(text: str) -> str | None:
    if re.search(r"(?m)^package:\s*$", text) and re.search(r"(?m)^metadata:\s*$", text):
        return "conda-lock"
    if re.search(r"(?m)^build:\s*$", text) and re.search(
        r"(?m)^\s+python_(version|packages):", text
    ):
        return "cog"
    if re.search(r"(?m)^dependencies:", text):
        return "conda-env"
    return None


def _text_kind(name: str, text: str) -> str | None:
    if collect_env.looks_like_collect_env(text):
        return "collect-env"
    if requirements.looks_like_freeze(text, name):
        return "pip-freeze"
    if name.lower().endswith((".txt", ".in", ".pip")) or "requirements" in name.lower():
        return "requirements"
    return None


def detect(path: Path, text: str, display: str) -> str:
    """The format of ``path``; an unknown one is a ``ForeignFileError``."""
    name = path.name
    found = _by_name(name)
    if found is not None:
        return found
    if name.lower().endswith((".yml", ".yaml")):
        kind = _yaml_kind(text)
        if kind is not None:
            return kind
        fail(display, None, "a YAML file gpuenv does not recognise", f"gpuenv reads: {KNOWN}")
    kind = _text_kind(name, text)
    if kind is not None:
        return kind
    fail(display, None, "not an environment file gpuenv recognises", f"gpuenv reads: {KNOWN}")
