"""Applying an environment delta (``env-delta.json``) in Python: what ``gpuenv run``
does instead of sourcing an activation script.

This is the one implementation of the replay; ``gpuenv.activation`` builds deltas and
delegates here, and its tests compare the result with real shells sourcing the
scripts. It runs on every ``gpuenv run``, so it uses plain dicts and strings and
imports nothing beyond ``gpuenv.errors``: no ``re``, ``dataclasses`` or ``typing``.

A delta is ``{"format": 1, "active": PREFIX, "ops": [...]}`` where each op is
``{"op": "set", "name", "value"}``, ``{"op": "unset", "name"}`` or
``{"op": "prepend", "name", "entries", "clean": {"prefix", "store_root",
"cuda_version"} | null}``.
"""

from __future__ import annotations

from gpuenv.errors import FileFormatError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

ACTIVE_VAR = "_GPUENV_ACTIVE"
UNSET_LIST_VAR = "_GPUENV_UNSET"
BACKUP_PREFIX = "_GPUENV_OLD_"
DELTA_FORMAT = 1

REASON_EMPTY = "empty entry (it means the current directory)"
REASON_RELATIVE = "relative path"
REASON_OTHER_PREFIX = "inside another gpuenv prefix"
OWN = "own"  # one of the prefix's own dirs: dropped silently, it is prepended again


def reason_other_cuda(version: str) -> str:
    return f"CUDA directory of another version (this environment uses CUDA {version})"


def removal_message(name: str, entry: str, reason: str) -> str:
    """The line (without newline) a script prints on stderr for one dropped entry."""
    return f'gpuenv: dropped {name} entry "{entry}": {reason}'


def deactivating_message(active: str) -> str:
    return f"gpuenv: deactivating {active} first"


def valid_name(name: object) -> bool:
    """``[A-Za-z_][A-Za-z0-9_]*``, without importing ``re``."""
    return isinstance(name, str) and name.isascii() and name.isidentifier()


def inside(entry: str, root: str) -> bool:
    return entry == root or entry.startswith(root + "/")


def other_cuda(entry: str, version: str) -> bool:
    """A ``.../cuda-X.Y...`` directory of a CUDA other than ``version``."""
    start = 0
    found_any = False
    while True:
        at = entry.find("/cuda-", start)
        if at < 0:
            return found_any
        rest = entry[at + 6 :]
        start = at + 1
        if not rest[:1].isdigit():
            continue
        found_any = True
        if rest.startswith(version):
            after = rest[len(version) :]
            if after == "" or after[0] == "/" or (after[0] == "." and after[1:2].isdigit()):
                return False


def why_dropped(entry: str, own: Sequence[str], clean: Mapping[str, Any]) -> str | None:
    """Mirror of the case/if chain the emitters write; keep the order identical."""
    if entry == "":
        return REASON_EMPTY
    if not entry.startswith("/"):
        return REASON_RELATIVE
    if entry in own:
        return OWN
    if inside(entry, clean["prefix"]):
        return None
    if inside(entry, clean["store_root"]):
        return REASON_OTHER_PREFIX
    version = clean.get("cuda_version")
    return reason_other_cuda(version) if version and other_cuda(entry, version) else None


def _prepend(op: Mapping[str, Any], env: dict[str, str], messages: list[str]) -> None:
    name, entries, clean = op["name"], list(op["entries"]), op.get("clean")
    old = env.get(name, "")
    head = ":".join(entries)
    if clean is None:
        env[name] = head + (":" + old if old else "")
        return
    kept: list[str] = []
    said: set[str] = set()
    for entry in old.split(":") if old else ():
        why = why_dropped(entry, entries, clean)
        if why is None:
            kept.append(entry)
        elif why != OWN and entry not in said:
            said.add(entry)
            messages.append(removal_message(name, entry, why))
    env[name] = ":".join([head, *kept]) if head else ":".join(kept)


def _restore(env: dict[str, str], names: Sequence[str]) -> None:
    unset = env.get(UNSET_LIST_VAR, "").split(" ")
    for name in names:
        backup = BACKUP_PREFIX + name
        if backup in env:
            env[name] = env.pop(backup)
        elif name in unset:
            env.pop(name, None)
    env.pop(ACTIVE_VAR, None)
    env.pop(UNSET_LIST_VAR, None)


def checked_ops(delta: Mapping[str, Any]) -> tuple[str, list[Mapping[str, Any]]]:
    """The delta's active prefix and ops, after the format and name checks."""
    try:
        if delta["format"] != DELTA_FORMAT:
            raise FileFormatError(
                f"environment delta format {delta['format']!r} is not supported "
                f"(this gpuenv reads format {DELTA_FORMAT})",
                hint="reinstall the environment with this gpuenv",
            )
        active, ops = delta["active"], list(delta["ops"])
        for op in ops:
            if op["op"] not in ("set", "unset", "prepend") or not valid_name(op["name"]):
                raise FileFormatError(f"malformed environment delta op {op!r}")
    except (KeyError, TypeError) as exc:
        raise FileFormatError(f"malformed environment delta ({exc!r})") from None
    if not isinstance(active, str):
        raise FileFormatError("malformed environment delta: 'active' is not a path")
    return active, ops


def apply(delta: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``environ`` with the delta applied exactly as the activation script would apply
    it, and the stderr lines the script would print (dropped entries, a deactivated
    other prefix) for the caller to show."""
    active, ops = checked_ops(delta)
    env = dict(environ)
    messages: list[str] = []
    if env.get(ACTIVE_VAR) == active:
        return env, messages
    names = list(dict.fromkeys(op["name"] for op in ops))
    if ACTIVE_VAR in env:
        messages.append(deactivating_message(env[ACTIVE_VAR]))
        _restore(env, names)
    unset: list[str] = []
    for name in names:
        if name in env:
            env[BACKUP_PREFIX + name] = env[name]
        else:
            unset.append(name)
    for op in ops:
        if op["op"] == "set":
            env[op["name"]] = op["value"]
        elif op["op"] == "unset":
            env.pop(op["name"], None)
        else:
            _prepend(op, env, messages)
    env[UNSET_LIST_VAR] = " ".join(unset)
    env[ACTIVE_VAR] = active
    return env, messages
