"""A prefix's completion marker (``etc/gpuenv/installed.json``) and the project
pointers, read with the standard library alone: ``gpuenv run`` reads both on every
call, so this module avoids ``pathlib`` (which brings ``re`` and ``urllib``),
``dataclasses`` and ``typing``. ``gpuenv.store`` writes what this reads."""

from __future__ import annotations

import json
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

    __slots__ = ("cuda", "gpuenv", "groups", "installed_at", "lock_hash", "python", "target")

    def __init__(
        self,
        lock_hash: str,
        target: str,
        python: str,
        gpuenv: str,
        installed_at: float,
        cuda: str | None = None,
        groups: tuple[str, ...] | None = None,
    ) -> None:
        self.lock_hash = lock_hash  # the target's content hash in the lock it came from
        self.target = target
        self.python = python
        self.gpuenv = gpuenv
        self.installed_at = installed_at
        self.cuda = cuda  # the CUDA the build is for; None: a CPU build (or an old marker)
        # The dependency groups installed (``add`` installs them again); None: not recorded
        self.groups = groups

    def to_json(self) -> dict[str, object]:
        return {
            "lock_hash": self.lock_hash,
            "target": self.target,
            "python": self.python,
            "gpuenv": self.gpuenv,
            "installed_at": self.installed_at,
            "cuda": self.cuda,
        } | ({} if self.groups is None else {"groups": list(self.groups)})

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
    groups = data.get("groups") if isinstance(data, dict) else None
    listed = isinstance(groups, list) and all(isinstance(g, str) for g in groups)
    kept = tuple(str(g) for g in groups) if listed and isinstance(groups, list) else None
    return Marker(*fields, groups=kept), None


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


# --- gc roots ---------------------------------------------------------------------------------
#
# ``<store>/roots/<digest>`` is a symlink to a project pointer (``<project>/.gpuenv/<t>``),
# ``<digest>.prefix`` a symlink to the prefix that pointer reached when it was last
# registered (so gc can keep it for a grace period when the project has moved away),
# and ``<digest>.gone`` the time gc first found the pointer gone. ``gpuenv.store``
# owns gc; registration lives here because ``gpuenv run`` re-registers a project's
# roots whenever it uses its pointers (a moved project is found again that way).

ROOTS = "roots"
ROOT_PREFIX_SUFFIX = ".prefix"
ROOT_GONE_SUFFIX = ".gone"


def root_link(store_root: str, pointer_path: str) -> str:
    from gpuenv import _sha256

    # The path's bytes on disk (os.fsencode): under a non-UTF-8 locale a project path
    # such as /home/josé holds surrogates, which str.encode() refused (a traceback from
    # run), and the digest is the same whatever the locale.
    digest = _sha256.hexdigest(os.fsencode(os.path.abspath(pointer_path)))[:32]
    return os.path.join(store_root, ROOTS, digest)


def _link(link: str, target: str) -> None:
    """Point ``link`` at ``target`` atomically (a new link renamed over the old)."""
    temporary = f"{link}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    os.symlink(target, temporary)
    try:
        os.replace(temporary, link)
    except OSError:
        os.unlink(temporary)
        raise


def register_root(store_root: str, pointer_path: str, prefix: str) -> bool:
    """Make the pointer a gc root of ``store_root``, remembering ``prefix``; True when
    something had to be written (a few ``readlink`` calls otherwise)."""
    link = root_link(store_root, pointer_path)
    wanted = os.path.abspath(pointer_path)
    changed = False
    if resolve_pointer(link) != wanted:
        os.makedirs(os.path.dirname(link), exist_ok=True)
        _link(link, wanted)
        changed = True
    if resolve_pointer(link + ROOT_PREFIX_SUFFIX) != prefix:
        _link(link + ROOT_PREFIX_SUFFIX, prefix)
        changed = True
    if changed:
        try:  # noqa: SIM105 - contextlib is not imported on the run path
            os.unlink(link + ROOT_GONE_SUFFIX)
        except FileNotFoundError:
            pass
    return changed


def store_of(prefix: str) -> str | None:
    """The store a prefix path lives in (``<store>/prefixes/<name>``), or None."""
    parent = os.path.dirname(os.path.normpath(prefix))
    return os.path.dirname(parent) if os.path.basename(parent) == "prefixes" else None


def refresh_roots(project: str, target: str) -> None:
    """Re-register the project's pointers for ``target`` (current and previous) as gc
    roots of the stores they point into: after a project moved, its first ``run``
    makes gc keep its prefixes again. Never fails: a read-only store is fine."""
    for previous in (False, True):
        link = pointer(project, target, previous=previous)
        prefix = resolve_pointer(link)
        store = store_of(prefix) if prefix else None
        if prefix is None or store is None:
            continue
        try:  # noqa: SIM105 - contextlib is not imported on the run path
            register_root(store, link, prefix)
        except OSError:
            pass


# --- the project's lock state ------------------------------------------------------------------
#
# ``<project>/.gpuenv/.lock-state.json`` remembers, for the lock bytes with a given
# sha256, each target's content hash; and the targets the user rolled back on
# purpose. ``gpuenv run`` compares a prefix's marker with the current lock through it
# without parsing the lock (one read and one sha256 of the file); a miss parses the
# lock once and writes the state again. Whatever the file says is true by
# construction (a digest of the lock bytes and what those bytes hold), so a stale or
# missing state only costs the slow path.

LOCK_STATE = ".lock-state.json"
STATE_FORMAT = 1


# The state as last parsed, by path and the file's identity: `gpuenv run` reads it for
# the gate and again for the changed-files check, and parsed it twice.
_parsed_states: dict[str, tuple[tuple[int, int, int], dict[str, object]]] = {}


def read_lock_state(project: str) -> dict[str, object]:
    """The project's lock state; empty when absent or unreadable. Read again only when
    the file changed (a copy: callers build new states, never change this one)."""
    path = os.path.join(project, PROJECT_DIR, LOCK_STATE)
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return {}
    identity = (info.st_ino, info.st_mtime_ns, info.st_size)
    seen = _parsed_states.get(path)
    if seen is not None and seen[0] == identity:
        return dict(seen[1])
    try:
        data = _fsread.load_json(path, limit=MARKER_LIMIT, what="lock state")
    except (OSError, InputFileError):
        return {}
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        return {}
    _parsed_states[path] = (identity, data)
    return dict(data)


def input_stamps(paths: list[str], project: str) -> dict[str, list[object]]:
    """What ``inputs_changed`` compares against, per file: its mtime, size and sha256
    (zeros and None for a file that is not there: one appearing is a change). A file
    inside ``project`` is kept by its path there: a copied checkout compares its own."""
    from gpuenv import _sha256

    stamps: dict[str, list[object]] = {}
    inside = os.path.join(os.path.abspath(project), "")
    for path in paths:
        key = os.path.relpath(path, inside) if path.startswith(inside) else path
        try:
            info = os.stat(path)
            data = _fsread.read_bytes(path, limit=_fsread.SPEC_LIMIT, what="lock input")
        except (OSError, InputFileError):
            stamps[key] = [0, 0, None]
            continue
        stamps[key] = [info.st_mtime_ns, info.st_size, _sha256.hexdigest(data)]
    return stamps


def inputs_changed(project: str) -> list[str]:
    """The lock's input files (the spec, the project's pyproject.toml or setup.py) that
    changed since the project's environments were installed: ``gpuenv run`` says so, as
    the new dependency is not there until a lock and an install. A file's stat is read;
    its bytes only when the stat moved (a checkout that touched it)."""
    inputs = read_lock_state(project).get("inputs")
    if not isinstance(inputs, dict):
        return []
    changed = []
    for key, stamp in inputs.items():
        if not key or not isinstance(key, str) or not isinstance(stamp, list) or len(stamp) != 3:
            continue
        path = os.path.join(project, key)  # a relative key is the project's own file
        try:
            info = os.stat(path)
        except FileNotFoundError:
            if stamp[2] is not None:
                changed.append(path)
            continue
        except (OSError, ValueError):  # a NUL in a hand-edited state: nothing to say
            continue
        if stamp[2] is None:
            changed.append(path)  # appeared
        elif [info.st_mtime_ns, info.st_size] != stamp[:2] and _digest(path) != stamp[2]:
            changed.append(path)
    return changed


def _digest(path: str) -> str | None:
    from gpuenv import _sha256

    try:
        return _sha256.hexdigest(
            _fsread.read_bytes(path, limit=_fsread.SPEC_LIMIT, what="lock input")
        )
    except (OSError, ValueError, InputFileError):
        return None


def _string_map(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def known_hash(state: dict[str, object], digest: str, target: str) -> str | None:
    """The content hash of ``target`` in the lock whose bytes hash to ``digest``,
    when the state knows it."""
    if state.get("lock") != digest:
        return None
    return _string_map(state.get("targets")).get(target)


def rolled_back(state: dict[str, object], target: str) -> str | None:
    """The content hash the user rolled ``target`` back to, if they did."""
    return _string_map(state.get("rollback")).get(target)


def write_lock_state(
    project: str,
    *,
    digest: str | None = None,
    targets: dict[str, str] | None = None,
    rollback: dict[str, str | None] | None = None,
    inputs: dict[str, list[object]] | None = None,
) -> None:
    """Update the project's lock state (``digest`` and ``targets`` together replace
    what is known; ``rollback`` entries set to None are cleared; ``inputs``, the lock's
    input files as installed, from ``input_stamps``, replace the old). Failing to write
    is ignored: the state is a shortcut, never the only source of truth."""
    state = read_lock_state(project)
    new: dict[str, object] = {
        "format": STATE_FORMAT,
        "lock": state.get("lock"),
        "targets": _string_map(state.get("targets")),
        "rollback": _string_map(state.get("rollback")),
    }
    kept = inputs if inputs is not None else state.get("inputs")
    if isinstance(kept, dict):
        new["inputs"] = kept
    if digest is not None and targets is not None:
        new["lock"], new["targets"] = digest, dict(sorted(targets.items()))
    pins = _string_map(new["rollback"])
    for name, value in (rollback or {}).items():
        if value is None:
            pins.pop(name, None)
        else:
            pins[name] = value
    new["rollback"] = dict(sorted(pins.items()))
    if new == state:
        return
    directory = os.path.join(project, PROJECT_DIR)
    try:
        if not os.path.isdir(directory):
            return  # nothing is installed here: nothing to remember
        from pathlib import Path

        from gpuenv import _fs  # the write side: tempfile, pathlib (not on the run path)

        _fs.atomic_write_text(
            Path(directory, LOCK_STATE), json.dumps(new, indent=1) + "\n", durable=False
        )
    except OSError:
        pass
