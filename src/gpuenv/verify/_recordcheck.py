"""Where a machine's verification record lives, and whether it passes: the decision
``gpuenv run`` and ``shell`` make on every start, so plain ``os``, ``json`` and
``gpuenv._sha256`` on dicts. ``gpuenv.verify.record`` builds and writes records through these same
functions, so there is one definition of the path and of "passing".

A record lives in the prefix (``<prefix>/etc/gpuenv/verify/<fingerprint>.json``), or,
when the prefix is read-only here (a shared store mounted read-only on a cluster's
nodes), in this user's state directory (``_settings.state_dir``)::

    <state>/verify/<prefix key>/<fingerprint>.json     prefix key: hash of its path

``record_for`` is the one lookup: of the two, the more recently written decides, so
a newer failed verification always replaces an older pass wherever each was kept.
"""

from __future__ import annotations

import json
import os

from gpuenv import _fsread, _settings, _sha256
from gpuenv.errors import InputFileError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

RECORD_SCHEMA = 1
RECORD_DIR = os.path.join("etc", "gpuenv", "verify")
HASH_CHARS = 24


def canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def fingerprint_hash(fingerprint: Mapping[str, Any]) -> str:
    """A stable short hash of a machine fingerprint (key order does not matter; the
    caller gives list fields such as GPU UUIDs in a stable order)."""
    return _sha256.hexdigest(canonical(fingerprint).encode())[:HASH_CHARS]


def record_file(prefix: str | os.PathLike[str], fingerprint: Mapping[str, Any]) -> str:
    """The record's place inside the prefix."""
    return os.path.join(prefix, RECORD_DIR, fingerprint_hash(fingerprint) + ".json")


def prefix_key(prefix: str | os.PathLike[str]) -> str:
    """A short stable name for a prefix's absolute path."""
    return _sha256.hexdigest(os.fsencode(os.path.abspath(prefix)))[:HASH_CHARS]


def user_record_dir(prefix: str | os.PathLike[str]) -> str | None:
    """This user's record directory for ``prefix`` (None without a state directory)."""
    state = _settings.state_dir
    return os.path.join(state, "verify", prefix_key(prefix)) if state else None


def user_record_file(prefix: str | os.PathLike[str], fingerprint: Mapping[str, Any]) -> str | None:
    """The record's place in this user's state directory (read-only prefixes)."""
    directory = user_record_dir(prefix)
    return os.path.join(directory, fingerprint_hash(fingerprint) + ".json") if directory else None


def _newest(paths: list[str | None]) -> str | None:
    best, best_time = None, -1.0
    for path in paths:
        if path is None:
            continue
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        if mtime > best_time:
            best, best_time = path, mtime
    return best


def record_for(prefix: str | os.PathLike[str], fingerprint: Mapping[str, Any]) -> str | None:
    """The file holding this machine's record for ``prefix``, wherever it was kept
    (see the module doc); None when there is none."""
    return _newest([record_file(prefix, fingerprint), user_record_file(prefix, fingerprint)])


def _load(path: str | os.PathLike[str]) -> Any:
    """Bounded: a FIFO, a device, a huge or deeply nested file raises ``InputFileError``
    (a ``ValueError``) instead of hanging or exhausting memory."""
    return _fsread.load_json(path, limit=_fsread.STATE_LIMIT, what="verification record")


def load_record(path: str | os.PathLike[str] | None) -> object | None:
    """The JSON in a record file, or None when it is absent or unreadable: a damaged
    record counts as no record."""
    if path is None:
        return None
    try:
        value: object = _load(path)
    except (OSError, InputFileError, ValueError):
        return None
    return value


def is_passing(raw: Any, lock_hash: str, fingerprint: Mapping[str, Any] | None) -> bool:
    """A record of this schema, for this lock (and, when given, this machine), whose
    verdict and probe both passed: a record can never pass a failed probe."""
    if not isinstance(raw, dict) or raw.get("schema") != RECORD_SCHEMA:
        return False
    if raw.get("lock_hash") != lock_hash or raw.get("passed") is not True:
        return False
    probe = raw.get("probe")
    if not isinstance(probe, dict) or probe.get("passed") is not True:
        return False
    if fingerprint is None:
        return True
    stored = raw.get("fingerprint")
    return isinstance(stored, dict) and canonical(stored) == canonical(fingerprint)


def has_passing_record(
    prefix: str | os.PathLike[str], lock_hash: str, fingerprint: Mapping[str, Any]
) -> bool:
    path = record_for(prefix, fingerprint)
    if path is None:
        return False
    try:
        raw = _load(path)
    except (OSError, ValueError, RecursionError):
        return False
    return is_passing(raw, lock_hash, fingerprint)


def _record_names(directory: str | None) -> dict[str, str]:
    if directory is None:
        return {}
    try:
        return {e.name: e.path for e in os.scandir(directory) if e.name.endswith(".json")}
    except OSError:
        return {}


def passing_machines(prefix: str | os.PathLike[str], lock_hash: str) -> int:
    """How many machines hold a passing record for ``lock_hash`` in ``prefix`` (for
    each machine, its newest record, wherever it was kept)."""
    own = _record_names(os.path.join(prefix, RECORD_DIR))
    mine = _record_names(user_record_dir(prefix))
    count = 0
    for name in set(own) | set(mine):
        path = _newest([own.get(name), mine.get(name)])
        try:
            count += is_passing(_load(path), lock_hash, None) if path else 0
        except (OSError, ValueError, RecursionError):
            continue
    return count


def all_records(prefix: str | os.PathLike[str]) -> list[object]:
    """Each machine's newest readable record for ``prefix`` (any lock), wherever kept."""
    own = _record_names(os.path.join(prefix, RECORD_DIR))
    mine = _record_names(user_record_dir(prefix))
    newest = (_newest([own.get(name), mine.get(name)]) for name in sorted(set(own) | set(mine)))
    return [raw for raw in map(load_record, newest) if raw is not None]
