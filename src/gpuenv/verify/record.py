"""Verification records: one per machine, inside the prefix.

    <prefix>/etc/gpuenv/verify/<fingerprint hash>.json

A record binds a probe result to the lock hash and to the machine's fingerprint (an
opaque mapping: driver version and GPU UUIDs, from ``gpuenv.hardware``). A prefix on a
shared file system is used by many nodes, so each machine has its own file, written
atomically (a temporary file in the same directory, then ``os.replace``): concurrent
verifications on several nodes never see or leave a half-written record, and node A's
pass never counts for node B. When the prefix is read-only here, the record goes to
this user's state directory instead (``_recordcheck``; the gate finds it there).

The reading path (``find_passing_record``) runs on every ``gpuenv run``: standard
library only, one small file, no validation beyond what deciding needs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv import __version__
from gpuenv.errors import FileFormatError
from gpuenv.verify import _recordcheck
from gpuenv.verify._recordcheck import RECORD_SCHEMA
from gpuenv.verify.model import ProbeResult

if TYPE_CHECKING:
    from datetime import datetime

RECORD_DIR = Path(_recordcheck.RECORD_DIR)
_canonical = _recordcheck.canonical
fingerprint_hash = _recordcheck.fingerprint_hash


def record_path(prefix: Path, fingerprint: Mapping[str, Any]) -> Path:
    return Path(_recordcheck.record_file(prefix, fingerprint))


def _utc_text(moment: datetime) -> str:
    from datetime import timezone  # only writers need it

    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True, kw_only=True)
class VerificationRecord:
    """One verification of one prefix on one machine."""

    lock_hash: str
    fingerprint: Mapping[str, Any]
    probe: ProbeResult
    passed: bool
    started_at: str
    finished_at: str
    gpuenv_version: str = __version__
    target: str | None = None
    schema: int = RECORD_SCHEMA
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fingerprint_hash(self) -> str:
        return fingerprint_hash(self.fingerprint)

    def matches(self, lock_hash: str, fingerprint: Mapping[str, Any]) -> bool:
        """For this lock on this machine (and nothing else)."""
        return (
            self.schema == RECORD_SCHEMA
            and self.lock_hash == lock_hash
            and _canonical(self.fingerprint) == _canonical(fingerprint)
        )

    @property
    def usable(self) -> bool:
        """Passed, and the probe result agrees (a record can't pass a failed probe)."""
        return self.passed and self.probe.passed

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "lock_hash": self.lock_hash,
            "fingerprint": dict(self.fingerprint),
            "fingerprint_hash": self.fingerprint_hash,
            "passed": self.passed,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "gpuenv_version": self.gpuenv_version,
            "target": self.target,
            "extra": dict(self.extra),
            "probe": self.probe.to_json(),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, raw: Any) -> VerificationRecord:
        """Raises ``FileFormatError`` for anything that is not a record of this schema."""
        if not isinstance(raw, Mapping):
            raise FileFormatError("a verification record is a JSON object")
        schema = raw.get("schema")
        if schema != RECORD_SCHEMA:
            raise FileFormatError(
                f"verification record schema {schema!r} (this gpuenv reads {RECORD_SCHEMA})"
            )
        fields = ("lock_hash", "started_at", "finished_at", "gpuenv_version")
        if not all(isinstance(raw.get(k), str) for k in fields):
            raise FileFormatError("verification record lacks " + ", ".join(fields))
        fingerprint = raw.get("fingerprint")
        if not isinstance(fingerprint, Mapping) or not isinstance(raw.get("passed"), bool):
            raise FileFormatError("verification record lacks fingerprint or passed")
        target = raw.get("target")
        extra = raw.get("extra")
        return cls(
            lock_hash=raw["lock_hash"],
            fingerprint=dict(fingerprint),
            probe=ProbeResult.from_json(raw.get("probe")),
            passed=raw["passed"],
            started_at=raw["started_at"],
            finished_at=raw["finished_at"],
            gpuenv_version=raw["gpuenv_version"],
            target=target if isinstance(target, str) else None,
            extra=dict(extra) if isinstance(extra, Mapping) else {},
        )


def make_record(
    *,
    lock_hash: str,
    fingerprint: Mapping[str, Any],
    result: ProbeResult,
    started_at: datetime,
    finished_at: datetime,
    target: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> VerificationRecord:
    """A record of ``result``; it passes only if the probe result passed. ``extra``
    says where it ran (the host, the Slurm node): shown, never used to decide."""
    return VerificationRecord(
        lock_hash=lock_hash,
        fingerprint=dict(fingerprint),
        probe=result,
        passed=result.passed,
        started_at=_utc_text(started_at),
        finished_at=_utc_text(finished_at),
        target=target,
        extra=dict(extra or {}),
    )


def write_record(prefix: Path, record: VerificationRecord) -> Path:
    """Store ``record`` as this machine's record for ``prefix``, replacing any earlier
    one atomically: in the prefix, or, when the prefix is read-only here, in this
    user's state directory. Returns the path."""
    import contextlib

    # tempfile: not needed on the read path
    from gpuenv._fs import atomic_write_text, is_read_only
    from gpuenv.errors import StorageError

    path = record_path(prefix, record.fingerprint)
    mine = _recordcheck.user_record_file(prefix, record.fingerprint)
    try:
        atomic_write_text(path, record.dumps(), what="the verification record")
    except StorageError as exc:
        if mine is None or not is_read_only(exc):
            raise
        atomic_write_text(
            Path(mine), record.dumps(), what="the verification record (the prefix is read-only)"
        )
        return Path(mine)
    if mine is not None:
        with contextlib.suppress(OSError):
            Path(mine).unlink()  # superseded by the one in the prefix
    return path


def read_record(prefix: Path, fingerprint: Mapping[str, Any]) -> VerificationRecord | None:
    """This machine's record for ``prefix`` (wherever it was kept), passing or not;
    None when there is none or it cannot be read (a damaged record counts as none)."""
    raw = _recordcheck.load_record(_recordcheck.record_for(prefix, fingerprint))
    if raw is None:
        return None
    try:
        return VerificationRecord.from_json(raw)
    except (ValueError, TypeError, KeyError, AttributeError, FileFormatError):
        return None


def find_passing_record(
    prefix: Path, lock_hash: str, fingerprint: Mapping[str, Any]
) -> VerificationRecord | None:
    """The passing record for this lock on this machine, or None. Records for another
    machine or another lock hash never count."""
    record = read_record(prefix, fingerprint)
    if record is None or not record.matches(lock_hash, fingerprint) or not record.usable:
        return None
    return record


def list_records(prefix: Path) -> list[VerificationRecord]:
    """Every readable record in ``prefix`` (one per machine), newest first; damaged or
    foreign files are skipped, as ``read_record`` does."""
    found = []
    for path in sorted((prefix / RECORD_DIR).glob("*.json")):
        raw = _recordcheck.load_record(path)  # bounded: a FIFO or /dev/zero is no record
        try:
            found.append(VerificationRecord.from_json(raw))
        except (ValueError, TypeError, KeyError, AttributeError, FileFormatError):
            continue
    return sorted(found, key=lambda r: (r.finished_at, r.fingerprint_hash), reverse=True)
