"""The store: one isolated prefix per (target, locked content), and the project
pointers that keep them alive.

Layout under the store root (``$GPUENV_HOME``, default ``$XDG_DATA_HOME/gpuenv``)::

    prefixes/<target>-<hash>/      a prefix; installed only when its marker matches
        etc/gpuenv/installed.json  the completion marker, written last
    locks/<prefix name>.lock       one file lock per prefix (concurrent installs)
    roots/<digest>                 symlinks to project pointers: the gc roots
    cache/uv, cache/rattler        package caches shared by every prefix
    cache/torch-extensions/<name>  the prefix's TORCH_EXTENSIONS_DIR (JIT-built extensions)
    builds/<identity>/             built wheels by build identity (gpuenv.build.cache)
    trash/                         prefixes being deleted (renamed first, then removed)

A prefix that installed builds lists their identities in ``etc/gpuenv/builds.json``: gc
keeps the build entries that a kept prefix lists, and removes the others (with their
logs, and the sources no kept entry was built from).

A project points at its prefixes with symlinks ``<project>/.gpuenv/<target>`` (and
``<target>.previous``, the generation before the last install). Like Nix's indirect
roots, ``roots/`` links to those pointers: gc keeps every prefix a live pointer
reaches and forgets roots whose pointer is gone.

A prefix is built in place (venvs and conda prefixes embed their own path) and is
"installed" only once its marker, written last and atomically, names the lock hash.
Anything else found at that path is an interrupted build: it is renamed into
``trash/`` and rebuilt. This module imports only the standard library at module
level: ``gpuenv run`` reads pointers and markers on every call.

A store may be read-only here (a cluster mounts it read-only on compute nodes): its
installed prefixes can still be attached by a project and verified. The file lock of
a prefix then lives in the per-user state directory (``state_dir``, under
``$XDG_STATE_HOME/gpuenv``), and no gc root is registered (gc runs where the store is
writable, and cannot see projects that attached a prefix read-only). Every write
failure is a ``StorageError`` naming the path (``gpuenv._fs.writing``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuenv import __version__, _marker
from gpuenv._fs import atomic_write_text, is_read_only, storage_error, writing
from gpuenv._marker import PREVIOUS_SUFFIX, PROJECT_DIR, Marker

__all__ = ["PREVIOUS_SUFFIX", "PROJECT_DIR", "Marker", "Store", "read_marker"]
from gpuenv.errors import InstallError, StorageError

MARKER = Path(_marker.MARKER)
BUILDS_RECORD = Path("etc") / "gpuenv" / "builds.json"
_MAX_RECORD_BYTES = 1 << 22


def default_root(environ: Mapping[str, str]) -> Path:
    """$GPUENV_HOME, else $XDG_DATA_HOME/gpuenv, else ~/.local/share/gpuenv."""
    if environ.get("GPUENV_HOME"):
        return Path(environ["GPUENV_HOME"])
    if environ.get("XDG_DATA_HOME"):
        return Path(environ["XDG_DATA_HOME"]) / "gpuenv"
    return Path(environ.get("HOME", str(Path.home()))) / ".local" / "share" / "gpuenv"


@dataclass(frozen=True)
class PrefixInfo:
    path: Path
    target: str | None
    lock_hash: str | None
    installed: bool
    size_bytes: int
    referenced_by: tuple[Path, ...]
    verified_on: int  # machines with a passing verification record


@dataclass(frozen=True)
class GcResult:
    removed: tuple[Path, ...]
    freed_bytes: int
    kept: int
    removed_builds: tuple[Path, ...] = ()  # build cache entries no kept prefix lists


def _tree_size(path: Path) -> int:
    """Bytes on disk, counting each hard-linked file once per tree."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))  # noqa: PTH118 - speed
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def _key(path: Path) -> str:
    """A short stable name for an absolute path (per-user state of a store prefix)."""
    return hashlib.sha256(os.fsencode(path.absolute())).hexdigest()[:24]


@dataclass(frozen=True)
class Store:
    root: Path
    # Per-user state ($XDG_STATE_HOME/gpuenv): file locks when the store is read-only.
    state_dir: Path | None = None

    # --- places ---------------------------------------------------------------------------

    @property
    def prefixes(self) -> Path:
        return self.root / "prefixes"

    def cache(self, kind: str) -> Path:
        return self.root / "cache" / kind

    def torch_extensions_dir(self, prefix: Path) -> Path:
        """The prefix's own TORCH_EXTENSIONS_DIR: JIT builds never reuse another torch's."""
        return self.cache("torch-extensions") / prefix.name

    def prefix_for(self, target: str, lock_hash: str) -> Path:
        digest = lock_hash.removeprefix("sha256:")[:16]
        return self.prefixes / f"{target}-{digest}"

    # --- state ------------------------------------------------------------------------------

    def is_installed(self, prefix: Path, lock_hash: str) -> bool:
        marker = read_marker(prefix)
        return marker is not None and marker.lock_hash == lock_hash

    def mark_installed(self, prefix: Path, *, lock_hash: str, target: str, python: str) -> None:
        """The last step of an install: after this the prefix counts as installed.

        Written atomically (a rename), not fsynced: an fsync here forces the file
        system to commit the metadata of every file just installed (a second or more
        for a torch prefix), and buys little: journaling file systems commit a rename
        after the changes made before it, so a marker that survives a crash implies
        the files it vouches for did too. A killed process never leaves a marker."""
        marker = Marker(lock_hash, target, python, __version__, time.time())
        text = json.dumps(marker.to_json(), indent=2) + "\n"
        atomic_write_text(prefix / MARKER, text, durable=False, what="the completion marker")

    def discard(self, prefix: Path) -> None:
        """Remove a prefix (an interrupted build, or gc): renamed into trash/ first, in
        one atomic step, so nothing ever sees a half-deleted prefix at its real path."""
        if not prefix.exists() and not prefix.is_symlink():
            return
        trash = self.root / "trash"
        with writing(trash, "the store's trash"):
            trash.mkdir(parents=True, exist_ok=True)
        doomed = trash / f"{prefix.name}.{uuid.uuid4().hex[:8]}"
        try:
            prefix.rename(doomed)
        except OSError as exc:
            raise storage_error(exc, prefix, "the store (removing an unfinished prefix)") from None
        shutil.rmtree(doomed, ignore_errors=True)

    def discard_quietly(self, prefix: Path) -> None:
        """``discard`` on a failure path: a second failure (the disk that just filled
        up, a read-only store) must not hide the first; the next install retries."""
        with contextlib.suppress(OSError):
            self.discard(prefix)

    def empty_trash(self) -> None:
        """Finish deletions an earlier process was killed in the middle of."""
        for leftover in (self.root / "trash").glob("*"):
            shutil.rmtree(leftover, ignore_errors=True)

    @contextlib.contextmanager
    def locked(self, prefix: Path, *, timeout: float = 3600) -> Iterator[None]:
        """Hold the prefix's file lock: concurrent installs of one prefix build it once.
        In a read-only store the lock is this user's (see the module doc)."""
        from filelock import Timeout

        try:
            lock = self._acquire_lock(prefix, timeout)
        except Timeout as exc:
            raise InstallError(
                f"another gpuenv has held {prefix.name} for over {timeout:.0f} s",
                hint=f"if no install is running, delete {exc.lock_file}",
            ) from None
        try:
            yield
        finally:
            lock.release()

    def _acquire_lock(self, prefix: Path, timeout: float) -> Any:
        from filelock import FileLock

        try:
            return _acquire(FileLock, self.root / "locks" / f"{prefix.name}.lock", timeout)
        except StorageError as exc:
            if not is_read_only(exc) or self.state_dir is None:
                raise
        fallback = self.state_dir / "locks" / f"{prefix.name}-{_key(prefix)}.lock"
        return _acquire(FileLock, fallback, timeout)

    # --- roots and gc ---------------------------------------------------------------------------

    def register_root(self, pointer: Path) -> bool:
        """Remember a project pointer as a gc root (a symlink to the pointer itself).
        False when the store is read-only here: gc cannot run here either."""
        roots = self.root / "roots"
        absolute = pointer.absolute()
        link = roots / hashlib.sha256(str(absolute).encode()).hexdigest()[:32]
        if link.is_symlink() and link.readlink() == absolute:
            return True
        try:
            _replace_symlink(link, absolute, what="a gc root of the store")
        except StorageError as exc:
            if is_read_only(exc):
                return False
            raise
        return True

    def live_references(self) -> dict[Path, list[Path]]:
        """Prefix -> the project pointers that reach it; dead roots are forgotten."""
        references: dict[Path, list[Path]] = {}
        for root in sorted((self.root / "roots").glob("*")):
            pointer = root.readlink() if root.is_symlink() else None
            target = _resolve_pointer(pointer) if pointer else None
            if target is None or not target.is_relative_to(self.prefixes):
                with contextlib.suppress(OSError):
                    root.unlink()
                continue
            assert pointer is not None
            references.setdefault(target, []).append(pointer)
        return references

    def list(self, *, verified: Any = None) -> list[PrefixInfo]:
        """Every prefix, with its size, lock hash, state and referrers. ``verified``
        counts a prefix's passing verification records (injected by the caller)."""
        references = self.live_references()
        out = []
        for prefix in sorted(self.prefixes.glob("*")) if self.prefixes.exists() else []:
            marker = read_marker(prefix)
            out.append(
                PrefixInfo(
                    path=prefix,
                    target=marker.target if marker else None,
                    lock_hash=marker.lock_hash if marker else None,
                    installed=marker is not None,
                    size_bytes=_tree_size(prefix),
                    referenced_by=tuple(references.get(prefix, ())),
                    verified_on=verified(prefix) if verified else 0,
                )
            )
        return out

    def gc(self, *, dry_run: bool = False) -> GcResult:
        """Remove every prefix no live project pointer reaches; say how much was freed."""
        self.empty_trash()
        references = self.live_references()
        removed, freed, kept = [], 0, 0
        live: list[Path] = []
        for prefix in sorted(self.prefixes.glob("*")) if self.prefixes.exists() else []:
            if prefix in references:
                kept += 1
                live.append(prefix)
                continue
            try:
                with self.locked(prefix, timeout=0.5):
                    size = _tree_size(prefix)
                    if not dry_run:
                        self.discard(prefix)
            except InstallError:  # an install is building it right now: not garbage
                kept += 1
                live.append(prefix)
                continue
            removed.append(prefix)
            freed += size
        builds, build_bytes = self._gc_builds(live, dry_run=dry_run)
        return GcResult(tuple(removed), freed + build_bytes, kept, builds)

    # --- the build cache (gpuenv.build.cache writes it; gc reads what prefixes list) -----

    def build_identities(self, prefix: Path) -> set[str]:
        """The build identities a prefix's ``builds.json`` lists (empty when unreadable)."""
        try:
            path = prefix / BUILDS_RECORD
            if path.stat().st_size > _MAX_RECORD_BYTES:
                return set()
            data = json.loads(path.read_text(encoding="utf-8"))
            return {
                b["identity"].removeprefix("sha256:")
                for b in data["builds"]
                if isinstance(b, dict) and isinstance(b.get("identity"), str)
            }
        except (OSError, ValueError, KeyError, TypeError):
            return set()

    def _gc_builds(self, live: Sequence[Path], *, dry_run: bool) -> tuple[tuple[Path, ...], int]:
        """Remove build entries no live prefix lists, unfinished ones nobody is building,
        logs without an entry, sources no kept entry names, and torch-extensions folders
        of prefixes that are gone."""
        root = self.root / "builds"
        keep = set().union(*(self.build_identities(p) for p in live)) if live else set()
        removed: list[Path] = []
        freed = 0
        candidates = [e for e in sorted(root.glob("*")) if e.name not in ("logs", "sources")]
        candidates += sorted((root / ".incoming").glob("*"))
        for entry in candidates:
            digest = entry.name.split(".", 1)[0]
            if entry.name == ".incoming" or (entry.parent == root and digest in keep):
                continue
            try:
                with self.locked(Path(f"build-{digest}"), timeout=0.5):
                    size = _tree_size(entry)
                    if not dry_run:
                        self.discard(entry)
            except InstallError:  # being built or installed right now
                continue
            removed.append(entry)
            freed += size
        if not dry_run:
            self._gc_build_leftovers(root, keep, live)
        return tuple(removed), freed

    def _gc_build_leftovers(self, root: Path, keep: set[str], live: Sequence[Path]) -> None:
        sources = set()
        for digest in keep:
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
                entry = json.loads((root / digest / "entry.json").read_text(encoding="utf-8"))
                sources.add(entry["source"].get("sha256"))
        for log in (root / "logs").glob("*.log"):
            if log.stem not in keep:
                with contextlib.suppress(OSError):
                    log.unlink()
        for source in (root / "sources").glob("*"):
            if source.name not in sources:
                shutil.rmtree(source, ignore_errors=True)
        names = {p.name for p in live}
        for folder in self.cache("torch-extensions").glob("*"):
            if folder.name not in names:
                shutil.rmtree(folder, ignore_errors=True)


# --- project pointers ------------------------------------------------------------------------


def _replace_symlink(link: Path, target: Path, *, what: str = "a link") -> None:
    """Point ``link`` at ``target`` in one atomic step (a new link renamed over the old)."""
    with writing(link, what):
        link.parent.mkdir(parents=True, exist_ok=True)
        temporary = link.with_name(f".{link.name}.{uuid.uuid4().hex[:8]}")
        temporary.symlink_to(target)
        try:
            temporary.replace(link)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise


def _resolve_pointer(pointer: Path) -> Path | None:
    target = _marker.resolve_pointer(pointer)
    return Path(target) if target is not None else None


def read_marker(prefix: Path) -> Marker | None:
    return _marker.read_marker(prefix)


def pointer_path(project: Path, target: str, *, previous: bool = False) -> Path:
    return Path(_marker.pointer(project, target, previous=previous))


def current_prefix(project: Path, target: str) -> Path | None:
    """The prefix the project uses for ``target`` (a readlink: no store scan)."""
    return _resolve_pointer(pointer_path(project, target))


def _acquire(factory: Any, path: Path, timeout: float) -> Any:
    """A held ``filelock`` lock on ``path`` (its directory made first). filelock's
    ``Timeout`` is an ``OSError`` too: it passes through as itself."""
    from filelock import Timeout

    what = "the store's file lock"
    with writing(path, what):
        path.parent.mkdir(parents=True, exist_ok=True)
    lock = factory(str(path))
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise
    except OSError as exc:
        raise storage_error(exc, path, what) from exc
    return lock


def point_project(store: Store, project: Path, target: str, prefix: Path) -> Path | None:
    """Make ``prefix`` the project's current generation for ``target``; the one it
    replaces becomes ``.previous``. Returns that previous prefix, if any.

    Every other write comes first (the ``.gitignore``, the gc roots, ``.previous``):
    a failure there leaves the project on its old generation. The root of a pointer
    that did not exist yet can be forgotten by a concurrent gc before the link
    appears, so it is registered again once the link is there."""
    current = pointer_path(project, target)
    old = _resolve_pointer(current)
    if old == prefix:
        store.register_root(current)
        return None
    _ignore_project_dir(project)
    previous = pointer_path(project, target, previous=True)
    if old is not None:
        store.register_root(previous)
    store.register_root(current)
    if old is not None:
        _replace_symlink(previous, old, what="the project's previous-generation pointer")
    _replace_symlink(current, prefix, what="the project's pointer")
    store.register_root(current)
    return old


def rollback(store: Store, project: Path, target: str) -> tuple[Path, Path]:
    """Point the project back at its previous generation (and keep the current one as
    the new previous, so a second rollback undoes the first). Returns (from, to)."""
    current = pointer_path(project, target)
    previous = pointer_path(project, target, previous=True)
    now, before = _resolve_pointer(current), _resolve_pointer(previous)
    if before is None or not before.exists():
        raise InstallError(
            f"target {target} has no previous generation to roll back to",
            hint="a previous generation exists after an install replaced another one",
        )
    if now is None:
        raise InstallError(f"target {target} is not installed in this project")
    _replace_symlink(current, before, what="the project's pointer")
    _replace_symlink(previous, now, what="the project's previous-generation pointer")
    store.register_root(current)
    store.register_root(previous)
    return now, before


def _ignore_project_dir(project: Path) -> None:
    """.gpuenv/ holds machine-specific links: keep it out of version control."""
    ignore = project / PROJECT_DIR / ".gitignore"
    if not ignore.exists():
        atomic_write_text(
            ignore,
            "# machine-specific links into the gpuenv store\n*\n",
            what="the project's .gpuenv/.gitignore",
            hint=f"gpuenv keeps links to its prefixes in {project / PROJECT_DIR}: "
            "make the project directory writable",
        )
