"""A prefix's completion marker (``etc/gpuenv/installed.json``) and the project
pointers, read with the standard library alone: ``gpuenv run`` reads both on every
call, so this module avoids ``pathlib`` (which brings ``re`` and ``urllib``),
``dataclasses`` and ``typing``. ``gpuenv.store`` writes what this reads."""

from __future__ import annotations

import os

from gpuenv import _fsread
from gpuenv.errors import InputFileError

MARKER = os.path.join("etc", "gpuenv", "installed.json")
PROJECT_DIR = ".gpuenv"
PREVIOUS_SUFFIX = ".previous"
MARKER_LIMIT = 64 << 10

# What a target name may be: it names a pointer (``.gpuenv/<target>`` beside
# ``<target>.previous``) and a store prefix (``<target>-<hash>``). No dots (so no name
# ends in ".previous" or is "." or ".."), no separators, nothing a shell or a file
# system treats specially, at most 64 characters.
TARGET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
TARGET_NAME_RULE = "letters, digits, '-' and '_', starting with a letter or digit, at most 64"


def valid_target_name(name: object) -> bool:
    """``TARGET_NAME_PATTERN``, without importing ``re`` (this is on the run path)."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 64
        and name.isascii()
        and name[0].isalnum()
        and all(c.isalnum() or c in "-_" for c in name)
    )


class Marker:
    """What an installed prefix holds: written last, so its presence means complete."""

    __slots__ = ("cuda", "gpuenv", "installed_at", "lock_hash", "python", "target")

    def __init__(
        self,
        lock_hash: str,
        target: str,
        python: str,
        gpuenv: str,
        installed_at: float,
        cuda: str | None = None,
    ) -> None:
        self.lock_hash = lock_hash  # the target's content hash in the lock it came from
        self.target = target
        self.python = python
        self.gpuenv = gpuenv
        self.installed_at = installed_at
        self.cuda = cuda  # the CUDA the build is for; None: a CPU build (or an old marker)

    def to_json(self) -> dict[str, object]:
        return {
            "lock_hash": self.lock_hash,
            "target": self.target,
            "python": self.python,
            "gpuenv": self.gpuenv,
            "installed_at": self.installed_at,
            "cuda": self.cuda,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Marker) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.lock_hash)


def read_marker(prefix: str | os.PathLike[str]) -> Marker | None:
    """The marker of ``prefix``; None when absent or damaged (= not installed)."""
    return read_marker_checked(prefix)[0]


def read_marker_checked(prefix: str | os.PathLike[str]) -> tuple[Marker | None, str | None]:
    """The marker of ``prefix``, or None and why: absent (None: an install that did
    not finish), or damaged (a sentence: a FIFO, too large, not JSON, wrong fields)."""
    path = os.path.join(prefix, MARKER)
    try:
        data = _fsread.load_json(path, limit=MARKER_LIMIT, what="completion marker")
    except FileNotFoundError:
        return None, None
    except InputFileError as exc:
        return None, exc.message
    except OSError as exc:
        return None, f"{path}: cannot read: {exc.strerror}"
    fields = _marker_fields(data)
    if fields is None:
        return None, f"{path}: not a completion marker gpuenv wrote"
    return Marker(*fields), None


def _marker_fields(data: object) -> tuple[str, str, str, str, float, str | None] | None:
    if not isinstance(data, dict):
        return None
    strings = [data.get(k) for k in ("lock_hash", "target", "python", "gpuenv")]
    when, cuda = data.get("installed_at"), data.get("cuda")
    if not all(isinstance(v, str) for v in strings) or not isinstance(cuda, (str, type(None))):
        return None
    if isinstance(when, bool) or not isinstance(when, (int, float)):
        return None
    lock_hash, target, python, gpuenv = (str(v) for v in strings)
    return lock_hash, target, python, gpuenv, float(when), cuda


def pointer(project: str | os.PathLike[str], target: str, *, previous: bool = False) -> str:
    return os.path.join(project, PROJECT_DIR, target + (PREVIOUS_SUFFIX if previous else ""))


def resolve_pointer(link: str | os.PathLike[str]) -> str | None:
    try:
        return os.readlink(link)
    except OSError:
        return None
