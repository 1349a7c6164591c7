"""``lock --check`` of a project that has not changed since it was last found fresh,
answered without parsing anything.

A full check reads the spec, the lock and the knowledge base, plans nothing (no
"detect" target), hashes each target's inputs and runs every check a reader of the
lock applies: its answer depends only on those bytes. When it finds the lock fresh, a
marker named by the sha256 of this gpuenv's version, the spec's bytes, the lock's
bytes, the knowledge base's digest (the user's facts file included) and the targets
checked is left in gpuenv's cache; the next check of the same bytes finds the marker
and answers "up to date" after two reads and a hash (no TOML, no lock model). Any
other byte, a spec with a "detect" target (whose plan is this machine's), or no
cache: the full check. Standard library only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gpuenv import _fsread
from gpuenv.errors import GpuenvError

LOCK_FILENAME = "gpuenv.lock"  # gpuenv.lock.format.LOCK_FILENAME, without importing it
_DIR = "lock-check"


def key(spec: str, digest: str, targets: list[str] | None) -> str | None:
    """What names a check of ``spec`` and the lock beside it (None: unreadable)."""
    from gpuenv import __version__

    lock = Path(spec).absolute().parent / LOCK_FILENAME
    try:
        spec_bytes = _fsread.read_bytes(spec, limit=_fsread.SPEC_LIMIT, what="gpuenv.toml")
        lock_bytes = _fsread.read_bytes(lock, limit=_fsread.LOCK_LIMIT, what=LOCK_FILENAME)
    except (OSError, GpuenvError):  # absent, a FIFO, too large: the full check says why
        return None
    h = hashlib.sha256()
    for part in (__version__.encode(), spec_bytes, lock_bytes, digest.encode()):
        h.update(len(part).to_bytes(8, "big") + part)
    h.update("\0".join(sorted(targets or ())).encode())
    return h.hexdigest()


def _marker(cache_dir: str, name: str) -> Path:
    return Path(cache_dir) / _DIR / f"{name}.fresh"


def known_fresh(cache_dir: str, name: str) -> bool:
    return _marker(cache_dir, name).is_file()


def remember_fresh(cache_dir: str, name: str) -> None:
    """Leave the marker (the cache is a courtesy: a failure to write is ignored)."""
    path = _marker(cache_dir, name)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.touch(mode=0o600)  # cache files are private
    except OSError:
        pass
