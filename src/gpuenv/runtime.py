"""The hot path of ``gpuenv run``, ``shell`` and ``activate``: find the project, pick
its installed target, and compute the activated environment.

Everything here is a few ``stat``/``readlink`` calls and two small JSON reads: no
spec parsing, no lock parsing, no pydantic, no NVML. The prefix carries what is
needed: its completion marker and the environment delta written at install time.
Standard library only (plus gpuenv's own light modules).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuenv.errors import NotInstalled, UsageError
from gpuenv.store import PROJECT_DIR, PREVIOUS_SUFFIX, Marker, current_prefix, read_marker

SPEC_FILENAME = "gpuenv.toml"
DELTA = Path("etc/gpuenv/env-delta.json")


def find_spec(explicit: str | None, cwd: Path) -> Path:
    """``-f`` when given; else the nearest gpuenv.toml in ``cwd`` or a parent (as git
    finds .git); else ``./gpuenv.toml`` (and the error about it comes later)."""
    if explicit:
        return Path(explicit)
    for directory in (cwd, *cwd.parents):
        candidate = directory / SPEC_FILENAME
        if candidate.is_file():
            return candidate
    return cwd / SPEC_FILENAME


def installed_targets(project: Path) -> list[str]:
    """Targets the project has a current pointer for (its .gpuenv/ links)."""
    links = project / PROJECT_DIR
    try:
        names = sorted(p.name for p in links.iterdir() if p.is_symlink())
    except FileNotFoundError:
        return []
    return [n for n in names if not n.endswith(PREVIOUS_SUFFIX) and not n.startswith(".")]


@dataclass(frozen=True)
class Selected:
    target: str
    prefix: Path
    marker: Marker


def select(project: Path, target: str | None) -> Selected:
    """The prefix to activate: ``target``'s, or the only installed one."""
    if target is None:
        installed = installed_targets(project)
        if not installed:
            raise NotInstalled(
                f"nothing is installed for {project / SPEC_FILENAME}",
                hint="run 'gpuenv install' first",
            )
        if len(installed) > 1:
            raise UsageError(
                f"several targets are installed here ({', '.join(installed)}): pick one",
                hint=f"pass --target, e.g. --target {installed[0]}",
            )
        target = installed[0]
    prefix = current_prefix(project, target)
    marker = read_marker(prefix) if prefix is not None else None
    if prefix is None or marker is None:
        raise NotInstalled(
            f"target {target} is not installed (or its install did not finish)",
            hint=f"run 'gpuenv install --target {target}'",
        )
    return Selected(target, prefix, marker)


def child_environment(
    selected: Selected, environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The environment a command runs with, and the notes activation prints."""
    from gpuenv.activation import apply_delta

    try:
        delta = json.loads((selected.prefix / DELTA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise NotInstalled(
            f"target {selected.target}: {selected.prefix / DELTA} is missing or damaged",
            hint=f"run 'gpuenv install --target {selected.target}' to rebuild it",
        ) from None
    return apply_delta(delta, environ)
