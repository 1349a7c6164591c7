"""The one shared model every reader produces: what an environment asked for, and from
which file and line.

A reader turns one foreign file into a ``Reading``: ``Ask``s (requirements, each with
its ``Origin``), ``Fact``s (the Python, the CUDA build, an image, an index, ...) and
``Note``s (what it read but gpuenv does not carry over, and what it could not read).
Readers never decide anything: merging, deciding and reporting happen afterwards, on
these values only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum

from gpuenv._redact import redact


class Authority(IntEnum):
    """How much a file's word counts when files disagree.

    A record of an installed environment (pip freeze, conda env export, a conda-lock
    file, collect_env output) says what actually ran; an environment definition
    (environment.yml, requirements files, a Dockerfile, cog.yaml) says what the authors
    installed; package metadata (pyproject.toml, setup.py, setup.cfg) says what a
    library accepts, usually as ranges."""

    METADATA = 1
    DEFINITION = 2
    RECORD = 3

    def describe(self) -> str:
        return {
            Authority.METADATA: "package metadata (what the project accepts)",
            Authority.DEFINITION: "an environment definition (what the authors installed)",
            Authority.RECORD: "a record of an installed environment (what actually ran)",
        }[self]


# A netrc-shaped line (``machine h login u password p``) or ``password: p``: what
# follows the word is never shown, whatever file it was found in.
_SECRET_WORD = re.compile(r"(?i)\b(password|passwd|account)(\s*[:=]\s*|\s+)(\S+)")


def hide_secrets(text: str) -> str:
    if "ass" not in text.lower() and "account" not in text.lower():
        return text
    return _SECRET_WORD.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)


@dataclass(frozen=True)
class Origin:
    """Where something was read: a display path (relative to what was imported), the
    line (1-based, when known) and the entry as written there."""

    file: str
    line: int | None
    text: str

    def __post_init__(self) -> None:
        # Shown in the report and written as the spec's comments, which are committed:
        # a token in an index URL (`--extra-index-url https://user:TOKEN@host/simple`)
        # must reach neither.
        object.__setattr__(self, "text", redact(hide_secrets(self.text)))

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def cite(self) -> str:
        """``environment.yaml:7 pytorch=1.12.1``: where, and what it said."""
        return f"{self.where()} {self.text}".strip()


@dataclass(frozen=True)
class Ask:
    """One requirement an environment file states, normalised to PyPI's view.

    ``name`` is the canonical PyPI project name (conda's ``pytorch`` is ``torch``),
    ``specifier`` a PEP 440 specifier set in text ("==1.12.1", ">=1.10", "" for any).
    ``build`` is the torch-style build a file named for it ("cu113", "cpu"), from a
    ``+cu113`` local version, a conda build string or an image tag. ``url`` is a direct
    reference (a wheel URL, ``git+https://...@ref``)."""

    name: str
    specifier: str
    origin: Origin
    manager: str = "pip"  # who installed it: "pip", "conda" or "image" (a base image)
    build: str | None = None
    url: str | None = None
    extras: tuple[str, ...] = ()
    marker: str | None = None
    group: str | None = None  # an optional-dependency group or conda-lock category
    editable: bool = False
    pre: bool = False  # asked for a pre-release or nightly
    conda_only: bool = False  # a conda package with no pip form (ffmpeg): stays in [conda]
    # Asked by gpuenv from what the code does, not by a file: why (setuptools<82 where
    # the code imports pkg_resources). It dates nothing and is reported as a change.
    inferred: str | None = None

    def requirement_text(self) -> str:
        """The requirement as a pip line (without any URL)."""
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        marker = f"; {self.marker}" if self.marker else ""
        return f"{self.name}{extras}{self.specifier}{marker}"


# Keys of ``Fact``: what a file says about the environment as a whole.
PYTHON = "python"  # "3.8.5", ">=3.8"
TORCH_BUILD = "torch-build"  # "cu113", "cpu": the CUDA build torch was installed for
CUDA_MAJOR = "cuda-major"  # "12": a build of that CUDA major, any minor (cuda-version 12.*)
TOOLKIT = "toolkit"  # nvcc was there: "11.3" (version when known) or ""
IMAGE = "image"  # a container image the environment was built on
INDEX = "index"  # an index or find-links URL the files install from
PRE = "pre"  # pip --pre: pre-releases (nightlies) allowed
GPU = "gpu"  # the GPU the paper ran on (collect_env)
DRIVER = "driver"  # the driver the paper ran on (collect_env)
CUDA_EXTENSION = "cuda-extension"  # the project compiles CUDA code against torch
# The repository's code was read (a folder imported): its value, how many source files.
CODE_READ = "code-read"
# A torch API change's marker the code contains ("torch._six"), where it first does.
CODE_USES = "code-uses"
# A folder pip installs (``submodules/simple-knn``): a source of the repository to build;
# the note says what its setup.py compiles
LOCAL_PACKAGE = "local-package"
# A path on the author's machine or outside the repository (``-e /home/tiger/ColossalAI``,
# ``apex @ file:///home/tiger/apex``): nothing in the files installs it; the note says which
AUTHOR_PATH = "author-path"
CHANNELS = "channels"  # conda channels, comma-separated
NAME = "name"  # the environment's or project's name


@dataclass(frozen=True)
class Fact:
    """One thing a file says of the environment as a whole (``key``: the Python, torch's
    build, an image, an index, ...), where it says it, and how it was read (``note``:
    "implied by the base image", "pip --pre")."""

    key: str
    value: str
    origin: Origin
    note: str | None = None


# Kinds of ``Note``.
UNREADABLE = "unreadable"  # could not be read statically (a computed install_requires)
DROPPED = "dropped"  # read, not carried over (conda runtime libraries, apt packages)
UNMANAGED = "unmanaged"  # something gpuenv does not install (apt packages, system tools)
ASKED_AS_MODULE = "module"  # a module's name asked (PIL): its project is asked instead

SYSTEM_SHOWN = 24  # system package names a note lists before "and N more"


def system_packages(names: list[str]) -> str:
    """The note for packages the machine must provide, every one named up to
    ``SYSTEM_SHOWN`` (coqui-ai/TTS's apt line was cut at 8 with no word of the rest, and
    the two it needs, espeak-ng and libsndfile1-dev, were the 9th and 10th)."""
    shown = ", ".join(names[:SYSTEM_SHOWN])
    more = len(names) - SYSTEM_SHOWN
    rest = f", and {more} more" if more > 0 else ""
    return f"system packages ({shown}{rest}): install them on the machine"


INCLUDED = "included"  # another file this one pulls in (-r, python_requirements)
OPTIONAL_READ = "optional-read"  # optional groups read as the project's requirements


@dataclass(frozen=True)
class Note:
    """What a file says that is neither an ask nor a fact (``kind``: unreadable, dropped,
    unmanaged, or another file it pulls in), with where it says it."""

    kind: str
    message: str
    origin: Origin


def _python_text(value: str) -> bool:
    """A Python version ("3.8.5") or a PEP 440 range (">=3.8"), or empty (no pin)."""
    import re

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not value or re.fullmatch(r"3(\.\d{1,2}){1,2}", value):
        return True
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return False
    return True


@dataclass(frozen=True)
class Reading:
    """Everything one file says."""

    file: str
    format: str  # "conda-env", "conda-export", "requirements", "pip-freeze", ...
    authority: Authority
    asks: tuple[Ask, ...] = ()
    facts: tuple[Fact, ...] = ()
    notes: tuple[Note, ...] = ()
    platform: str | None = None  # the one platform the file is for ("osx-arm64"), if any


@dataclass
class ReadingBuilder:
    """Collects a reading while a reader walks its file."""

    file: str
    format: str
    authority: Authority
    asks: list[Ask] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    platform: str | None = None

    def note(self, kind: str, message: str, origin: Origin) -> None:
        self.notes.append(Note(kind, hide_secrets(message), origin))

    def fact(self, key: str, value: str, origin: Origin, note: str | None = None) -> None:
        if key == PYTHON and not _python_text(value):
            self.note(UNREADABLE, f"{origin.text}: {value!r} is not a Python version", origin)
            return
        self.facts.append(Fact(key, value, origin, note))

    def build(self) -> Reading:
        return Reading(
            self.file,
            self.format,
            self.authority,
            tuple(self.asks),
            tuple(self.facts),
            tuple(self.notes),
            self.platform,
        )
