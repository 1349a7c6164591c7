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

The project beside the spec is an input of the lock too (its pyproject.toml or
setup.py, and the requirements files setup.py reads): the marker lists those files
with the sha256 of their bytes ("-" for one that was absent), and is believed only
while each still matches.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from gpuenv import _fsread, _sha256
from gpuenv.errors import GpuenvError

LOCK_FILENAME = "gpuenv.lock"  # gpuenv.lock.format.LOCK_FILENAME, without importing it
_DIR = "lock-check"
_FORMAT = b"fresh-2"  # markers of format 1 listed no project files: never believed


def check_digest(kb_digest: str, overrides: Iterable[str | None] = ()) -> str:
    """The digest a check depends on: the knowledge base's (``data_digest``), the build
    knowledge's (packages.toml & co. make a lock with builds stale too: the digest
    ``gpuenv.builds.knowledge.digest()`` gives, without importing that module's model),
    and the index overrides (``GPUENV_TORCH_INDEX``, ``GPUENV_INDEX_URL``: a lock found
    fresh without one is not fresh for another index; redacted, as ``lock._indexes``
    compares them)."""
    from gpuenv._redact import redact_url
    from gpuenv.knowledge._data import BUILD_FILES, files_digest

    given = list(overrides)
    named = "\0".join(redact_url(o) if o else "-" for o in given) if any(given) else ""
    return kb_digest + files_digest(BUILD_FILES) + (f"\0{named}" if named else "")


def check_name(
    cache_dir: Path | None,
    spec: str,
    kb_digest: str,
    targets: Iterable[str] | None,
    overrides: Iterable[str | None] = (),
) -> tuple[str, str] | None:
    """(cache, name) of the check of ``spec``'s bytes and the lock's for ``targets``
    under the index ``overrides`` (None: no cache, or a file that cannot be read)."""
    if cache_dir is None:
        return None
    digest = check_digest(kb_digest, overrides)
    name = key(spec, digest, list(targets) if targets else None)
    return (str(cache_dir), name) if name else None


def key(spec: str, digest: str, targets: list[str] | None) -> str | None:
    """What names a check of ``spec`` and the lock beside it (None: unreadable)."""
    lock = Path(spec).absolute().parent / LOCK_FILENAME
    try:
        spec_bytes = _fsread.read_bytes(spec, limit=_fsread.SPEC_LIMIT, what="gpuenv.toml")
        lock_bytes = _fsread.read_bytes(lock, limit=_fsread.LOCK_LIMIT, what=LOCK_FILENAME)
    except (OSError, GpuenvError):  # absent, a FIFO, too large: the full check says why
        return None
    return key_of(spec_bytes, lock_bytes, digest, targets)


def key_of(spec_bytes: bytes, lock_bytes: bytes, digest: str, targets: list[str] | None) -> str:
    """``key`` of the spec's and the lock's bytes as given."""
    from gpuenv import __version__

    h = _sha256.new()
    for part in (_FORMAT, __version__.encode(), spec_bytes, lock_bytes, digest.encode()):
        h.update(len(part).to_bytes(8, "big") + part)
    h.update("\0".join(sorted(targets or ())).encode())
    return h.hexdigest()


def _marker(cache_dir: str, name: str) -> Path:
    return Path(cache_dir) / _DIR / f"{name}.fresh"


def _file_digest(path: Path) -> str:
    try:
        data = _fsread.read_bytes(path, limit=_fsread.SPEC_LIMIT, what=path.name)
    except FileNotFoundError:
        return "-"
    except (OSError, GpuenvError):
        return "?"  # unreadable: never equal to what was recorded
    return _sha256.hexdigest(data)


def known_fresh(cache_dir: str, name: str) -> bool:
    """A marker for these bytes exists and every project file it lists is unchanged."""
    try:
        text = _marker(cache_dir, name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    for line in text.splitlines():
        digest, _, path = line.partition(" ")
        if not path or digest == "?" or _file_digest(Path(path)) != digest:
            return False
    return True


def file_digests(files: Iterable[Path]) -> dict[Path, str]:
    """The digest a marker records for each of ``files`` ("-": absent)."""
    return {f: _file_digest(f) for f in files}


def remember_fresh(
    cache_dir: str, name: str, files: Iterable[Path] = (), digests: dict[Path, str] | None = None
) -> None:
    """Leave the marker, with the digests of the project's ``files`` (``digests``: as
    taken before, else now; the cache is a courtesy: a failure to write is ignored)."""
    path = _marker(cache_dir, name)
    files = list(files)
    if any("\n" in str(f) for f in files):
        return  # a name the marker's lines cannot hold: no marker, the full check each time
    known = digests if digests is not None else file_digests(files)
    text = "".join(f"{known.get(f, '?')} {f}\n" for f in files)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # cache: private
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
    except BaseException:  # Ctrl-C between the create and the rename: no stray file
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
