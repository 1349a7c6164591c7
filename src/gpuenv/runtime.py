"""The hot path of ``gpuenv run``, ``shell`` and ``activate``: find the project, pick
its installed target, and compute the activated environment.

Everything here is a few ``stat``/``readlink`` calls and two small JSON reads: no
spec parsing, no lock parsing, no pydantic, no NVML. The prefix carries what is
needed: its completion marker and the environment delta written at install time.
Only the standard library's cheapest modules are imported (``os``, ``json``): no
``pathlib``, ``dataclasses`` or ``typing`` — each is milliseconds on every run.
"""

from __future__ import annotations

import os

from gpuenv import _envdelta, _fsread
from gpuenv._marker import (
    PREVIOUS_SUFFIX,
    PROJECT_DIR,
    Marker,
    pointer,
    read_marker_checked,
    resolve_pointer,
)
from gpuenv.errors import FileFormatError, NotInstalled, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    T = TypeVar("T")

SPEC_FILENAME = "gpuenv.toml"
DELTA = os.path.join("etc", "gpuenv", "env-delta.json")


def find_spec(explicit: str | None, cwd: str) -> str:
    """``-f`` when given; else the nearest gpuenv.toml in ``cwd`` or a parent (as git
    finds .git); else ``<cwd>/gpuenv.toml`` (and the error about it comes later)."""
    if explicit == "":  # `-f ''`: a path left empty by a script, not "the default"
        raise UsageError("-f/--file needs a path", hint="leave -f out for ./gpuenv.toml")
    if explicit:
        return explicit
    directory = os.path.abspath(cwd)
    while True:
        candidate = os.path.join(directory, SPEC_FILENAME)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return os.path.join(os.path.abspath(cwd), SPEC_FILENAME)
        directory = parent


def project_of(spec: str) -> str:
    return os.path.dirname(os.path.abspath(spec))


def installed_targets(project: str) -> list[str]:
    """Targets the project has a current pointer for (its .gpuenv/ links)."""
    links = os.path.join(project, PROJECT_DIR)
    try:
        names = sorted(e.name for e in os.scandir(links) if e.is_symlink())
    except FileNotFoundError:
        return []
    return [n for n in names if not n.endswith(PREVIOUS_SUFFIX) and not n.startswith(".")]


class Selected:
    """The installed prefix a command runs in (and the project whose pointer led there)."""

    __slots__ = ("marker", "prefix", "project", "target")

    def __init__(self, target: str, prefix: str, marker: Marker, project: str = "") -> None:
        self.target = target
        self.prefix = prefix
        self.marker = marker
        self.project = project


def _named_targets(spec: str) -> list[str] | None:
    """The targets ``spec`` names; None when it cannot be read as a spec (the commands
    that parse it say why). Only on the error path: the hot path never parses TOML."""
    targets = _spec_targets(spec)
    return sorted(targets) if targets else None


def _spec_targets(spec: str) -> dict[str, object] | None:
    """The spec's ``[targets]`` table as TOML reads it; None when it cannot be read."""
    from gpuenv import _toml

    try:
        text = _fsread.read_bytes(spec, limit=_fsread.SPEC_LIMIT, what=SPEC_FILENAME)
        targets = _toml.loads(text.decode("utf-8")).get("targets")
    except (OSError, FileFormatError, UnicodeDecodeError, ValueError):
        return None
    return targets if isinstance(targets, dict) else None


def refuse_foreign(
    spec: str, target: str, action: str, targets: dict[str, object] | None = None
) -> None:
    """A macOS or Windows target named on another system: exit 2, saying where it runs
    (``targets``: the spec's table, when the caller has read it)."""
    from gpuenv import _foreign

    table = (targets if targets is not None else _spec_targets(spec) or {}).get(target)
    if isinstance(table, dict):
        where = _foreign.platform_of(table.get("platform"), table.get("gpu"))
        _foreign.refuse(target, where, action)


def declared_targets(spec: str) -> dict[str, object]:
    """The targets of a spec named with ``-f``, read as the commands that parse it read
    it: a missing file, a folder, a FIFO or a device, text that is not UTF-8 or TOML are
    exit 2 naming the file. run, shell and activate took the pointers beside any path
    otherwise: another spec's target, or one for a file that does not exist."""
    from gpuenv import _toml

    try:
        data = _fsread.read_bytes(spec, limit=_fsread.SPEC_LIMIT, what=SPEC_FILENAME)
    except FileNotFoundError:
        raise UsageError(
            f"{spec}: no such file", hint="create one with 'gpuenv init', or pass -f PATH"
        ) from None
    except OSError as exc:
        raise UsageError(f"{spec}: cannot be read: {exc.strerror or exc}") from None
    try:
        document = _toml.loads(_fsread.decode_utf8(data, spec))
    except (_toml.TomlError, RecursionError) as exc:
        detail = str(exc) if isinstance(exc, _toml.TomlError) else "nested too deeply"
        raise FileFormatError(
            f"{spec}: not a valid {SPEC_FILENAME}: {detail}",
            hint="'gpuenv plan' lists everything wrong with it",
        ) from None
    targets = document.get("targets")
    return targets if isinstance(targets, dict) else {}


def select(
    project: str, target: str | None, *, spec: str | None = None, explicit: bool = False
) -> Selected:
    """The prefix to activate: ``target``'s, or the only installed one. ``spec`` (default
    ``<project>/gpuenv.toml``) tells a target it does not name from one not installed.
    ``explicit``: the user named ``spec`` (``-f``): it must be a spec, and only the
    targets it declares are candidates."""
    spec_file = spec or os.path.join(project, SPEC_FILENAME)
    declared = declared_targets(spec_file) if explicit else None
    if target is not None:
        # The spec, read for the foreign check anyway: a target it does not declare is
        # refused even where a pointer beside it exists (another spec's, a renamed
        # target's: run took it). Unreadable without -f: the commands that parse it say.
        table = (
            declared
            if declared is not None
            else (_spec_targets(spec_file) if os.path.isfile(spec_file) else None)
        )
        if table is not None and target not in table:
            raise UsageError(
                f"no target named {target!r} in {spec_file}",
                hint=f"targets in this spec: {', '.join(sorted(table)) or 'none'}",
            )
        if table is not None:
            refuse_foreign(spec_file, target, "run", table)
    if target is None:
        target = _only_pointed(project, spec_file, declared)
    prefix = resolve_pointer(pointer(project, target))
    marker, why = read_marker_checked(prefix) if prefix is not None else (None, None)
    if prefix is None or marker is None:
        named = _named_targets(spec_file)
        if named is not None and target not in named:
            raise UsageError(
                f"no target named {target!r}", hint=f"targets in this spec: {', '.join(named)}"
            )
        detail = f": {why}" if why else " (or its install did not finish)"
        raise NotInstalled(
            f"target {target} is not installed{detail}",
            hint=f"run 'gpuenv install --target {target}'",
        )
    if marker.target != target:
        raise NotInstalled(
            f"target {target}: {prefix} is the prefix of target {marker.target}",
            hint=f"run 'gpuenv install --target {target}'",
        )
    return Selected(target, prefix, marker, project)


def only_pointed(project: str, *, spec: str | None = None, explicit: bool = False) -> str:
    """The target a command takes when none is named: the only one the project points
    at (``.gpuenv/<target>``), whether or not its prefix is still there (``rollback``
    leaves a deleted one); ``spec`` and ``explicit`` as for ``select``."""
    spec_file = spec or os.path.join(project, SPEC_FILENAME)
    return _only_pointed(project, spec_file, declared_targets(spec_file) if explicit else None)


def _only_pointed(project: str, spec_file: str, declared: dict[str, object] | None) -> str:
    installed = installed_targets(project)
    if declared is not None:  # pointers beside it of targets it does not declare
        installed = [name for name in installed if name in declared]
    if not installed and not os.path.isfile(spec_file):
        raise NotInstalled(
            f"no {SPEC_FILENAME} here: {spec_file} does not exist",
            hint=f"write one with 'gpuenv init' (then 'gpuenv lock' and 'gpuenv install'), "
            f"or pass -f PATH to a project's {SPEC_FILENAME}",
        )
    if not installed:
        raise NotInstalled(
            f"nothing is installed for {spec_file}", hint="run 'gpuenv install' first"
        )
    if len(installed) > 1:
        raise UsageError(
            f"several targets are installed here ({', '.join(installed)}): pick one",
            hint=f"pass --target, e.g. --target {installed[0]}",
        )
    return installed[0]


def child_environment(
    selected: Selected, environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The environment a command runs with, and the notes activation prints. An
    inherited ``_GPUENV_ACTIVE`` is checked, not trusted (``_envdelta.apply``)."""
    env, notes = _with_delta(selected, lambda delta: _envdelta.apply(delta, environ))
    return env, notes + shadowing_notes(env, selected.prefix)


def shadowing_notes(env: Mapping[str, str], prefix: str) -> list[str]:
    """A torch (or a companion) on PYTHONPATH outside the prefix is imported before the
    prefix's own, verified one: the command would run a torch verify never saw (verify's
    probe runs without PYTHONPATH). Said, not refused: the user may mean it. A stat or
    two per PYTHONPATH entry, and nothing at all without one."""
    entries = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]
    if not entries:
        return []
    from gpuenv.names import TORCH_IMPORTS

    inside = os.path.realpath(prefix) + os.sep
    notes = []
    for number, entry in enumerate(entries, start=1):
        if (os.path.realpath(entry) + os.sep).startswith(inside):
            continue
        found = [n for n in TORCH_IMPORTS if os.path.isfile(os.path.join(entry, n, "__init__.py"))]
        if found:
            notes.append(
                f"gpuenv: warning: PYTHONPATH entry {number} ({entry}) holds {', '.join(found)}, "
                "which Python imports before the verified prefix's own: unset PYTHONPATH "
                "or drop that entry to run what was verified"
            )
    return notes


def stale_activation(selected: Selected, environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` says the prefix is active while its PATH or variables are not
    in place (``gpuenv activate`` then makes the script forget that marker)."""
    return _with_delta(selected, lambda delta: _envdelta.stale(delta, environ))


def _with_delta(selected: Selected, use: Callable[[Any], T]) -> T:
    path = os.path.join(selected.prefix, DELTA)
    try:
        delta = _fsread.load_json(path, limit=_fsread.STATE_LIMIT, what="environment delta")
        return use(delta)
    except FileNotFoundError:
        why = f"{path} is missing"
    except FileFormatError as exc:  # InputFileError included: a FIFO, too large, not JSON
        why = exc.message
    except OSError as exc:
        why = f"{path}: cannot read: {exc.strerror}"
    raise NotInstalled(
        f"target {selected.target}: its environment delta is unusable: {why}",
        hint=f"run 'gpuenv install --target {selected.target}' to rebuild it",
    )
