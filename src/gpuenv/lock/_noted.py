"""`gpuenv lock` leaves the note of ``lock._fresh`` for the lock it wrote, so that the
first ``lock --check`` (and ``install``) after a lock answers from the note instead of
reading the spec, the lock and the knowledge base again.

The note says what a full check of those bytes would say, and only that: the lock's
values, whose rendering must be the bytes on disk, are judged by the check's own
``out_of_date`` (the targets written passed the reader's checks in ``write_lock``).
A note is left for the whole check (``lock --check``), for each fresh target alone
(``--target NAME``, an ``install`` of one target) and for all targets together
(``install --all``). None when there is no cache or a "detect" target (its plan is
this machine's), and none when the spec or one of the project's files changed while
the lock was computed (their bytes as taken before locking are compared after
writing): the next check is then the full one, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv import _fsread, _sha256
from gpuenv.errors import GpuenvError
from gpuenv.lock import _fresh

if TYPE_CHECKING:
    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.lock.model import Lock
    from gpuenv.lock.options import LockOptions
    from gpuenv.spec import LoadedSpec


class Before:
    """The spec's bytes as they were when its lock began, and the digests of the
    project's files (``_fresh.file_digests``) once the spec was loaded. (A plain class:
    a dataclass costs the lock's start-up half a millisecond to build.)"""

    __slots__ = ("project", "spec_bytes", "spec_path")

    def __init__(
        self, spec_path: Path, spec_bytes: bytes, project: dict[Path, str] | None = None
    ) -> None:
        self.spec_path = spec_path
        self.spec_bytes = spec_bytes
        self.project = project

    def loaded(self, loaded: LoadedSpec) -> Before:
        from gpuenv.spec._local import project_files

        return Before(self.spec_path, self.spec_bytes, _fresh.file_digests(project_files(loaded)))


def before(spec_path: Path) -> Before | None:
    """The spec's bytes, read before it is loaded (None: unreadable; no note then)."""
    try:
        data = _fsread.read_bytes(spec_path, limit=_fsread.SPEC_LIMIT, what="gpuenv.toml")
    except (OSError, GpuenvError):
        return None
    return Before(spec_path, data)


def note_written(
    taken: Before | None,
    loaded: LoadedSpec,
    knowledge: Callable[[], KnowledgeBase],
    lock: Lock,
    *,
    lock_path: Path,
    options: LockOptions,
    kb_digest: str,
    digest: str,
) -> int:
    """Leave the notes ``lock --check`` would leave for ``lock``, just written to
    ``lock_path`` as the bytes of sha256 ``digest`` (``LockWrite.digest``; see the module
    doc). Returns how many were left."""
    from gpuenv.lock.format import LATEST, LOCK_FILENAME, LockReading
    from gpuenv.lock.inputs import out_of_date
    from gpuenv.spec._local import project_files

    cache = options.cache_dir
    if taken is None or taken.project is None or cache is None or loaded.spec.uses_detect:
        return 0
    if lock_path.absolute() != taken.spec_path.absolute().parent / LOCK_FILENAME:
        return 0
    try:
        spec_bytes = _fsread.read_bytes(taken.spec_path, limit=_fsread.SPEC_LIMIT, what="spec")
        lock_bytes = _fsread.read_bytes(lock_path, limit=_fsread.LOCK_LIMIT, what=LOCK_FILENAME)
    except (OSError, GpuenvError):
        return 0
    files = project_files(loaded)
    if spec_bytes != taken.spec_bytes or _fresh.file_digests(files) != taken.project:
        return 0  # something moved while it was locked: the next check is a full one
    # not (or no longer) the lock this run wrote (compared by the digest of what it
    # wrote: rendering the lock again cost 1.4 ms a target)
    if not digest or _sha256.hexdigest(lock_bytes) != digest:
        return 0
    # Judged from the values written, which passed every check a reader applies to its
    # targets before they were written (format.write_lock), by the check's own rule.
    reading = LockReading(str(lock_path), LATEST, lock)
    found = out_of_date(
        loaded,
        knowledge,
        reading,
        kb_digest=kb_digest,
        options=replace(options, targets=None),
        dropped=True,
    )
    names = list(loaded.spec.targets)
    selections: list[list[str] | None] = [[n] for n in names if n not in found]
    if len(names) > 1 and not any(n in found for n in names):
        selections.append(names)  # every target named (install --all)
    if not found:
        selections.append(None)  # lock --check: nothing dropped either
    digest = _fresh.check_digest(kb_digest, (options.torch_index, options.index_url))
    for targets in selections:
        name = _fresh.key_of(spec_bytes, lock_bytes, digest, targets)
        _fresh.remember_fresh(str(cache), name, files, taken.project)
    return len(selections)
