"""The build cache: built wheels in the store, content-addressed by build identity.

Layout under ``<store>/builds/`` (see also ``gpuenv.store``, whose ``gc`` knows it)::

    <digest>/                   one entry: the identity's 64 hex digits
        entry.json              what was built, from what, the wheel's sha256: written last
        <name>-<version>-....whl
        build.log               the build's full output
    .incoming/<digest>.<rand>/  an entry being built; renamed to <digest>/ when complete
    logs/<digest>.log           the log of the latest build of that identity (kept on failure)

The sdists builds compile are the store's artifacts (``gpuenv._fetch``), as every other
artifact a lock names.

The discipline is the prefixes': an entry is complete only when its ``entry.json`` (the
completion marker) is there, names its identity, and the wheel beside it still has the
sha256 it records. An entry is built in ``.incoming/`` and renamed into place in one step,
so a killed build never leaves a half-written entry at its real path; a damaged entry is
moved to the trash and built again. One file lock per identity: concurrent installs that
need the same build build it once.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuenv import __version__
from gpuenv._fetch import ArtifactStore, file_sha256
from gpuenv._fs import atomic_write_text, writing
from gpuenv._fsread import load_json, special_kind
from gpuenv.builds.model import BuildEntry
from gpuenv.errors import FileFormatError
from gpuenv.store import Store

ENTRY_FILE = "entry.json"
LOG_FILE = "build.log"
ENTRY_FORMAT = 1
MAX_ENTRY_BYTES = 1 << 20
_WHEEL_NAME = re.compile(r"[A-Za-z0-9_.+!-]+\.whl\Z")


@dataclass(frozen=True)
class CachedWheel:
    """One complete entry of the build cache: the wheel built for ``identity``, its sha256 (as
    the entry records it, checked), the entry's folder and what its ``entry.json`` records."""

    identity: str
    wheel: Path
    sha256: str
    entry_dir: Path
    record: dict[str, Any]

    @property
    def log(self) -> Path:
        return self.entry_dir / LOG_FILE


class BuildCache:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.root = store.root / "builds"
        self.notes: list[str] = []  # what lookups found wrong (shown by install)

    # --- places -------------------------------------------------------------------------

    def entry_dir(self, identity: str) -> Path:
        return self.root / identity.removeprefix("sha256:")

    def log_path(self, identity: str) -> Path:
        return self.root / "logs" / f"{identity.removeprefix('sha256:')}.log"

    @property
    def artifacts(self) -> ArtifactStore:
        """The store's artifacts, where build sources are kept."""
        return self.store.artifacts()

    @contextlib.contextmanager
    def locked(self, identity: str, *, timeout: float = 6 * 3600) -> Iterator[None]:
        """Hold the identity's file lock (the store's lock directory, ``build-<digest>``)."""
        with self.store.locked(Path(f"build-{identity.removeprefix('sha256:')}"), timeout=timeout):
            yield

    # --- reading ------------------------------------------------------------------------

    def lookup(self, entry: BuildEntry) -> CachedWheel | None:
        """The complete, undamaged entry for ``entry.identity``; a damaged one is moved to
        the trash (and noted) so that it is built again."""
        directory = self.entry_dir(entry.identity)
        if not directory.exists():
            return None
        problem, found = self._check(directory, entry)
        if found is not None:
            return found
        self.notes.append(f"{entry.label()}: cached build discarded ({problem}); rebuilding")
        self.store.discard(directory)
        return None

    def _check(self, directory: Path, entry: BuildEntry) -> tuple[str, CachedWheel | None]:
        identity = entry.identity
        problem, record = _read_entry(directory / ENTRY_FILE, identity)
        if record is None:
            return problem, None
        wrong = _another_package(record["wheel"], entry)
        if wrong:
            return wrong, None
        wheel = directory / record["wheel"]
        try:
            _regular_file(wheel)
            actual = file_sha256(wheel)
        except OSError as exc:
            return f"the wheel is unreadable ({exc.strerror})", None
        if actual != record["sha256"]:
            said = record["sha256"]
            return f"the wheel's sha256 is {actual[:12]}..., the entry says {said[:12]}...", None
        return "", CachedWheel(identity, wheel, actual, directory, record)

    # --- writing ------------------------------------------------------------------------

    def incoming(self, identity: str) -> Path:
        """A fresh folder to build ``identity``'s entry in."""
        digest = identity.removeprefix("sha256:")
        folder = self.root / ".incoming" / f"{digest}.{os.urandom(4).hex()}"
        with writing(folder, "the build cache"):
            folder.mkdir(parents=True)
        return folder

    def commit(
        self, incoming: Path, entry: BuildEntry, wheel: Path, record: dict[str, Any]
    ) -> CachedWheel:
        """Complete an entry built in ``incoming``: the marker written last, then the
        folder renamed to its real path in one step."""
        sha = file_sha256(wheel)
        body = {
            "format": ENTRY_FORMAT,
            "identity": entry.identity,
            "name": entry.name,
            "version": entry.version,
            "wheel": wheel.name,
            "sha256": sha,
            "source": entry.source.to_json(),
            "created_at": time.time(),
            "gpuenv": __version__,
            **record,
        }
        text = json.dumps(body, indent=2) + "\n"
        atomic_write_text(incoming / ENTRY_FILE, text, durable=False, what="a build cache entry")
        target = self.entry_dir(entry.identity)
        with writing(target, "the build cache"):
            if target.exists():
                self.store.discard(target)
            incoming.rename(target)
        return CachedWheel(entry.identity, target / wheel.name, sha, target, body)

    def abandon(self, incoming: Path) -> None:
        shutil.rmtree(incoming, ignore_errors=True)


def _regular_file(path: Path) -> None:
    """``OSError`` (EINVAL) unless ``path`` is a regular file, checked on a descriptor
    opened without blocking: a FIFO in the cache never hangs an install, and a link to
    ``/dev/zero`` is never hashed."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        kind = special_kind(mode) or "not a file"
        raise OSError(errno.EINVAL, f"{kind}, not a regular file", str(path))


def _another_package(filename: str, entry: BuildEntry) -> str:
    """Why the cached wheel is not ``entry``'s package (empty when it is)."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
        if entry.source.kind == "project":  # its name and version are what its build says
            return ""
        same = name == canonicalize_name(entry.name) and version == Version(entry.version)
    except (InvalidWheelFilename, InvalidVersion):
        return f"{filename} is not a valid wheel name"
    return "" if same else f"{filename} is not a wheel of {entry.name} {entry.version}"


def _read_entry(marker: Path, identity: str) -> tuple[str, dict[str, Any] | None]:
    """An entry's record, checked; or why it cannot be believed. Read by the bounded,
    regular-file-only reader: a FIFO or a link to ``/dev/zero`` is refused at once."""
    try:
        record = load_json(marker, limit=MAX_ENTRY_BYTES, depth=8, what="build cache entry")
    except FileNotFoundError:
        return f"no {ENTRY_FILE}: an interrupted build", None
    except FileFormatError as exc:  # InputFileError: not a plain file, too large, not JSON
        return f"{ENTRY_FILE} is unreadable ({exc.message})", None
    except OSError as exc:
        return f"{ENTRY_FILE} is unreadable ({exc.strerror})", None
    if not isinstance(record, dict) or record.get("identity") != identity:
        return f"{ENTRY_FILE} names another identity", None
    name, sha = record.get("wheel"), record.get("sha256")
    if not isinstance(name, str) or not _WHEEL_NAME.match(name) or not isinstance(sha, str):
        return f"{ENTRY_FILE} has no valid wheel name and sha256", None
    return "", record
