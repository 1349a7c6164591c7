"""Which files and groups are a project's development tooling, not the environment a
paper ran in: by a group's name (``dev``, ``docs``, ``notebooks``) and by a file's name
(``requirements.dev.txt``, ``dev-requirements.txt``, ``Dockerfile.dev``). A leaf module:
discovery, the readers and the include reading (``_context``) all ask it."""

from __future__ import annotations

from collections.abc import Iterable

from gpuenv.names import normalize_name

# Optional groups a person reproducing a paper leaves out: tooling, not the environment.
DEV_GROUPS = frozenset(
    {"dev", "devel", "develop", "development", "test", "tests", "testing", "doc", "docs", "lint",
     "linting", "typing", "type", "types", "style", "quality", "bench", "benchmark", "ci",
     "readthedocs", "rtd",  # requirements/readthedocs.txt: the docs build's (mmdet's)
     "mkdocs", "sphinx",  # FastVideo's requirements-mkdocs.txt: a docs build's freeze
     "notebook", "notebooks"}  # coqui-ai/TTS's requirements.notebooks.txt: bokeh for plots
)  # fmt: skip


# Optional groups and features that are not the GPU environment: a CPU build's, another
# platform's (karpathy/nanochat's `cpu` extra takes torch 2.9.1+cpu from PyTorch's index).
NOT_GPU_GROUPS = frozenset({"cpu", "mac", "macos", "osx", "win"})


def is_dev_group(name: str) -> bool:
    return normalize_name(name).split("-")[0] in DEV_GROUPS


# What builds, versions and uploads a package: a group of these alone is for releasing
# the project, whatever its name (haotian-liu/LLaVA's `build = ["build", "twine"]`).
PACKAGING_TOOLS = frozenset(
    {"build", "twine", "wheel", "setuptools", "pip", "uv", "hatch", "hatchling", "flit",
     "flit-core", "poetry", "poetry-core", "pdm", "pdm-backend", "setuptools-scm",
     "check-manifest", "bump2version", "bumpver", "pkginfo", "readme-renderer"}
)  # fmt: skip


def only_packaging_tools(names: Iterable[str]) -> bool:
    """The group's projects (normalized names) are release tooling and nothing else."""
    listed = set(names)
    return bool(listed) and listed <= PACKAGING_TOOLS


# Development-named groups a project's install guide can still make the environment: its
# own `pip install -e ".[notebooks]"` (facebookresearch/sam2) is how the paper's demos run.
GUIDE_MAY_KEEP = frozenset({"notebook", "notebooks"})


def is_tooling(name: str) -> bool:
    """A group of tools whatever a guide says (a README's contributing section's
    ``pip install -e ".[dev]"`` is no part of the paper's environment)."""
    return is_dev_group(name) and normalize_name(name).split("-")[0] not in GUIDE_MAY_KEEP


_SEPARATORS = ("-", "_", ".")  # requirements-dev.txt, requirements_dev.txt, requirements.dev.txt


def dev_only(name: str) -> bool:
    """A development group's file: what follows ``requirements`` or ``environment`` and
    a separator, the extension dropped (coqui-ai/TTS's ``requirements.dev.txt`` was
    imported as the paper's environment: black, pylint, nose2), or what precedes
    ``requirements`` (``dev-requirements.txt``); a Dockerfile named for a development
    group (``Dockerfile.dev``, ``dev.Dockerfile``)."""
    lower = name.lower()
    before, dockerfile, after = lower.partition("dockerfile")
    if dockerfile:  # coqui-ai/TTS's Dockerfile.dev -r's its dev and notebook files
        rest = after[1:] if after[:1] in _SEPARATORS else ""
        first = before[:-1] if before[-1:] in _SEPARATORS else ""
        return bool(rest and is_dev_group(rest)) or bool(first and is_dev_group(first))
    stem = lower.rsplit(".", 1)[0]
    group = stem.removesuffix("requirements")
    if group != stem and group[-1:] in _SEPARATORS and group[:-1]:
        return is_dev_group(group[:-1].replace(".", "-"))
    for prefix in ("requirements", "environment"):
        rest = stem.removeprefix(prefix)
        if rest != stem and rest[:1] in _SEPARATORS and rest[1:]:
            return is_dev_group(rest[1:].replace(".", "-"))
    return False
