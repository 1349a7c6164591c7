"""A prefix's completion marker (``etc/gpuenv/installed.json``) and the project
pointers, read with the standard library alone: ``gpuenv run`` reads both on every
call, so this module avoids ``pathlib`` (which brings ``re`` and ``urllib``),
``dataclasses`` and ``typing``. ``gpuenv.store`` writes what this reads."""

from __future__ import annotations

import json
import os

MARKER = os.path.join("etc", "gpuenv", "installed.json")
PROJECT_DIR = ".gpuenv"
PREVIOUS_SUFFIX = ".previous"


class Marker:
    """What an installed prefix holds: written last, so its presence means complete."""

    __slots__ = ("gpuenv", "installed_at", "lock_hash", "python", "target")

    def __init__(
        self, lock_hash: str, target: str, python: str, gpuenv: str, installed_at: float
    ) -> None:
        self.lock_hash = lock_hash
        self.target = target
        self.python = python
        self.gpuenv = gpuenv
        self.installed_at = installed_at

    def to_json(self) -> dict[str, object]:
        return {
            "lock_hash": self.lock_hash,
            "target": self.target,
            "python": self.python,
            "gpuenv": self.gpuenv,
            "installed_at": self.installed_at,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Marker) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.lock_hash)


def read_marker(prefix: str | os.PathLike[str]) -> Marker | None:
    """The marker of ``prefix``; None when absent or damaged (= not installed)."""
    try:
        with open(os.path.join(prefix, MARKER), encoding="utf-8") as handle:
            data = json.load(handle)
        return Marker(
            str(data["lock_hash"]),
            str(data["target"]),
            str(data["python"]),
            str(data["gpuenv"]),
            float(data["installed_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pointer(project: str | os.PathLike[str], target: str, *, previous: bool = False) -> str:
    return os.path.join(project, PROJECT_DIR, target + (PREVIOUS_SUFFIX if previous else ""))


def resolve_pointer(link: str | os.PathLike[str]) -> str | None:
    try:
        return os.readlink(link)
    except OSError:
        return None
