"""Where a machine's verification record lives, and whether it passes: the decision
``gpuenv run`` and ``shell`` make on every start, so plain ``os``/``json``/``hashlib``
on dicts. ``gpuenv.verify.record`` builds and writes records through these same
functions, so there is one definition of the path and of "passing".
"""

from __future__ import annotations

import hashlib
import json
import os

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
    return hashlib.sha256(canonical(fingerprint).encode()).hexdigest()[:HASH_CHARS]


def record_file(prefix: str | os.PathLike[str], fingerprint: Mapping[str, Any]) -> str:
    return os.path.join(prefix, RECORD_DIR, fingerprint_hash(fingerprint) + ".json")


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
    try:
        with open(record_file(prefix, fingerprint), encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError):
        return False
    return is_passing(raw, lock_hash, fingerprint)


def passing_machines(prefix: str | os.PathLike[str], lock_hash: str) -> int:
    """How many machines hold a passing record for ``lock_hash`` in ``prefix``."""
    directory = os.path.join(prefix, RECORD_DIR)
    count = 0
    try:
        entries = [e.path for e in os.scandir(directory) if e.name.endswith(".json")]
    except OSError:
        return 0
    for path in entries:
        try:
            with open(path, encoding="utf-8") as handle:
                count += is_passing(json.load(handle), lock_hash, None)
        except (OSError, ValueError):
            continue
    return count
