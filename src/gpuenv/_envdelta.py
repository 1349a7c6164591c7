"""Applying an environment delta (``env-delta.json``) in Python: what ``gpuenv run``
does instead of sourcing an activation script.

This is the one implementation of the replay; ``gpuenv.activation`` builds deltas and
delegates here, and its tests compare the result with real shells sourcing the
scripts. It runs on every ``gpuenv run``, so it uses plain dicts and strings and
imports nothing beyond ``gpuenv.errors`` and ``gpuenv._sha256``: no ``re``, ``dataclasses``
or ``typing``.

A delta is ``{"format": 1, "active": PREFIX, "ops": [...]}`` where each op is
``{"op": "set", "name", "value"}``, ``{"op": "unset", "name"}`` or
``{"op": "prepend", "name", "entries", "clean": {"prefix", "store_root",
"cuda_version"} | null}``.

Records. Activating prefix P stacks on whatever is active: for every variable it
touches, and for ``_GPUENV_ACTIVE`` itself, it keeps the old value in
``_GPUENV_<tag>_OLD_<NAME>`` or lists the name in ``_GPUENV_<tag>_UNSET`` (it was
unset), where ``<tag>`` is a short hash of P's path (``prefix_tag``). The names are
P's own, so deactivating P restores exactly the state it was activated in, another
prefix's activation included, and nothing another activation (or a forged variable)
wrote is read. A prefix already active is left alone, when its effects are really in
place (``in_place``: a ``_GPUENV_ACTIVE`` inherited by a shell that reset ``PATH`` is
forgotten and the prefix activated again); one active further down the stack is not
activated again (its records are in use): the caller is told.
"""

from __future__ import annotations

from gpuenv import _sha256
from gpuenv.errors import FileFormatError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

ACTIVE_VAR = "_GPUENV_ACTIVE"
RESERVED_PREFIX = "_GPUENV_"
DELTA_FORMAT = 1
TAG_CHARS = 12

REASON_EMPTY = "empty entry (it means the current directory)"
REASON_RELATIVE = "relative path"
REASON_OTHER_PREFIX = "inside another gpuenv prefix"
OWN = "own"  # one of the prefix's own dirs: dropped silently, it is prepended again


def prefix_tag(prefix: str) -> str:
    """The short hash of a prefix's path that names its records."""
    return _sha256.hexdigest(prefix.encode("utf-8", "surrogateescape"))[:TAG_CHARS]


def backup_var(tag: str, name: str) -> str:
    return f"{RESERVED_PREFIX}{tag}_OLD_{name}"


def unset_var(tag: str) -> str:
    """The space-separated names that were unset; also marks "this prefix is active"."""
    return f"{RESERVED_PREFIX}{tag}_UNSET"


def reason_other_cuda(version: str) -> str:
    return f"CUDA directory of another version (this environment uses CUDA {version})"


def shown(entry: str) -> str:
    """An entry as announced: C0 control characters and DEL become ``?`` (the shells
    do the same), so an announcement never carries a terminal escape."""
    return "".join("?" if ch < " " or ch == "\x7f" else ch for ch in entry)


def removal_message(name: str, entry: str, reason: str) -> str:
    """The line (without newline) a script prints on stderr for one dropped entry."""
    return f'gpuenv: dropped {name} entry "{shown(entry)}": {reason}'


def beneath_message(prefix: str) -> str:
    """Why sourcing ``prefix`` changed nothing: it is active beneath another one."""
    return (
        f"gpuenv: {shown(prefix)} is already active beneath another environment: "
        "gpuenv_deactivate that one first"
    )


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


def _str_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def _op_ok(op: Mapping[str, Any]) -> bool:
    """The fields ``apply`` uses have the types it expects (a delta is read from disk)."""
    kind = op["op"]
    if kind == "set":
        return isinstance(op["value"], str)
    if kind == "unset":
        return True
    entries, clean = op["entries"], op.get("clean")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return False
    if clean is None:
        return True
    return (
        isinstance(clean, dict)
        and isinstance(clean["prefix"], str)
        and isinstance(clean["store_root"], str)
        and _str_or_none(clean.get("cuda_version"))
    )


def checked_ops(delta: Mapping[str, Any]) -> tuple[str, list[Mapping[str, Any]]]:
    """The delta's active prefix and ops, after the format, name and type checks."""
    try:
        if type(delta["format"]) is not int or delta["format"] != DELTA_FORMAT:
            raise FileFormatError(
                f"environment delta format {delta['format']!r} is not supported "
                f"(this gpuenv reads format {DELTA_FORMAT})",
                hint="reinstall the environment with this gpuenv",
            )
        active, ops = delta["active"], list(delta["ops"])
        for op in ops:
            if (
                not isinstance(op, dict)
                or op["op"] not in ("set", "unset", "prepend")
                or not valid_name(op["name"])
                or not _op_ok(op)
            ):
                raise FileFormatError(f"malformed environment delta op {str(op)[:200]}")
            if op["name"].startswith(RESERVED_PREFIX):
                raise FileFormatError(f"environment delta op on gpuenv's own {op['name']}")
    except (KeyError, TypeError) as exc:
        raise FileFormatError(f"malformed environment delta ({exc!r})") from None
    if not isinstance(active, str):
        raise FileFormatError("malformed environment delta: 'active' is not a path")
    return active, ops


def managed_names(ops: Sequence[Mapping[str, Any]]) -> list[str]:
    """What an activation records: the variables its ops touch, then ``ACTIVE_VAR``."""
    return [*dict.fromkeys(op["name"] for op in ops), ACTIVE_VAR]


def in_place(ops: Sequence[Mapping[str, Any]], environ: Mapping[str, str]) -> bool:
    """Whether every op's effect is really in ``environ``: each set variable holds its
    value, each unset one is absent, each prepended variable starts with its entries."""
    for op in ops:
        kind, name = op["op"], op["name"]
        if kind == "set":
            if environ.get(name) != op["value"]:
                return False
        elif kind == "unset":
            if name in environ:
                return False
        else:
            entries = op["entries"]
            if entries and environ.get(name, "").split(":")[: len(entries)] != entries:
                return False
    return True


def stale(delta: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` claims the delta's prefix is active (``_GPUENV_ACTIVE``)
    while its effects are not in place: the marker was inherited by a shell that reset
    ``PATH`` (a login shell, tmux, a Slurm profile). Such a marker is not trusted."""
    active, ops = checked_ops(delta)
    return environ.get(ACTIVE_VAR) == active and not in_place(ops, environ)


def apply(delta: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``environ`` with the delta applied exactly as the activation script would apply
    it, and the stderr lines the script would print (dropped entries, a refusal) for
    the caller to show. A marker saying the prefix is active is checked, not trusted:
    when its effects are gone, it and the prefix's records are forgotten and the
    prefix is activated again on the environment as it is."""
    active, ops = checked_ops(delta)
    env = dict(environ)
    tag = prefix_tag(active)
    if env.get(ACTIVE_VAR) == active:
        if in_place(ops, env):
            return env, []
        del env[ACTIVE_VAR]
        env.pop(unset_var(tag), None)
    if unset_var(tag) in env:
        return env, [beneath_message(active)]
    unset: list[str] = []
    for name in managed_names(ops):
        if name in env:
            env[backup_var(tag, name)] = env[name]
        else:
            env.pop(backup_var(tag, name), None)
            unset.append(name)
    messages: list[str] = []
    for op in ops:
        if op["op"] == "set":
            env[op["name"]] = op["value"]
        elif op["op"] == "unset":
            env.pop(op["name"], None)
        else:
            _prepend(op, env, messages)
    env[unset_var(tag)] = " ".join(unset)
    env[ACTIVE_VAR] = active
    return env, messages
