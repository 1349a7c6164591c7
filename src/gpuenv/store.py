"""The store: one isolated prefix per (target, locked content), and the project
pointers that keep them alive.

Layout under the store root (``$GPUENV_HOME``, default ``$XDG_DATA_HOME/gpuenv``)::

    prefixes/<target>-<hash>/      a prefix; installed only when its marker matches
        etc/gpuenv/installed.json  the completion marker, written last
    locks/<prefix name>.lock       one file lock per prefix (concurrent installs)
    locks/.roots.lock              held while project pointers move and while gc decides
    roots/<digest>                 symlinks to project pointers: the gc roots
    roots/<digest>.prefix          the prefix that pointer last reached
    roots/<digest>.gone            when gc first found the pointer's project gone
    cache/artifacts/<sha256>/      every artifact a lock names, once (gpuenv._fetch)
    locks/artifacts/<sha256>.lock  one fetch of an artifact at a time
    cache/uv, cache/rattler        package caches shared by every prefix
    cache/torch-extensions/<name>  the prefix's TORCH_EXTENSIONS_DIR (JIT-built extensions)
    builds/<identity>/             built wheels by build identity (gpuenv.builds.cache)
    trash/                         prefixes being deleted (renamed first, then removed)

A prefix that installed builds lists their identities in ``etc/gpuenv/builds.json``: gc
keeps the build entries that a kept prefix lists, and removes the others (with their
logs, and the sources no kept entry was built from).

A project points at its prefixes with symlinks ``<project>/.gpuenv/<target>`` (and
``<target>.previous``, the generation before the last install). Like Nix's indirect
roots, ``roots/`` links to those pointers: gc keeps every prefix a live pointer
reaches. A root whose pointer was removed (its project is still there) is forgotten; a
root whose whole project is gone (moved, or deleted) keeps the prefix it last reached
for a grace period, which gc reports, and ``gpuenv run`` in the moved project
registers its pointers again (see ``_marker.refresh_roots``).

gc and install cannot race: every pointer move (install, rollback) happens under the
roots lock while the installing process still holds the prefix's own lock, and gc
holds the roots lock while it reads the roots and decides, taking each candidate's
prefix lock without waiting (an install building it right now keeps it). A prefix
gc removes is renamed into ``trash/`` under both locks, then deleted after.

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
import errno
import json
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuenv._fetch import ArtifactStore

from gpuenv import __version__, _marker, _sha256
from gpuenv._diskuse import Release, free_bytes, tree_usage
from gpuenv._flock import FileLock, LockTimeout
from gpuenv._fs import atomic_write_text, is_read_only, storage_error, writing
from gpuenv._marker import PREVIOUS_SUFFIX, PROJECT_DIR, Marker

__all__ = ["PREVIOUS_SUFFIX", "PROJECT_DIR", "Marker", "Store", "read_marker"]
from gpuenv.errors import InstallError, NotInstalled, StorageError

MARKER = Path(_marker.MARKER)
BUILDS_RECORD = Path("etc") / "gpuenv" / "builds.json"
ARTIFACTS_RECORD = Path("etc") / "gpuenv" / "artifacts.json"
_HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
_MAX_RECORD_BYTES = 1 << 22


def default_root(environ: Mapping[str, str]) -> Path:
    """$GPUENV_HOME, else $XDG_DATA_HOME/gpuenv, else ~/.local/share/gpuenv (absolute:
    ``_settings.env_dir``)."""
    from gpuenv._home import home_dir
    from gpuenv._settings import env_dir

    home = env_dir(environ, "GPUENV_HOME")
    if home:
        return Path(home)
    data = env_dir(environ, "XDG_DATA_HOME")
    if data:
        return Path(data) / "gpuenv"
    return Path(home_dir(environ)) / ".local" / "share" / "gpuenv"


def _rmtree(path: Path) -> None:
    """``shutil.rmtree``, errors ignored; shutil (with bz2 and lzma) imported only
    when something is removed: an install of a new prefix removes nothing."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class PrefixInfo:
    """One prefix of the store, as ``gpuenv list`` shows it: its target and lock hash (from
    its marker, when installed), its disk use, the project pointers that reach it, and on
    how many machines it verified."""

    path: Path
    target: str | None
    lock_hash: str | None
    installed: bool
    size_bytes: int  # unique + shared
    referenced_by: tuple[Path, ...]
    verified_on: int  # machines with a passing verification record
    kept_until: float | None = None  # its project vanished: gc keeps it until then
    unique_bytes: int = 0  # what removing it frees (no hard link elsewhere)
    shared_bytes: int = 0  # files shared with uv's or rattler's cache or other prefixes


@dataclass(frozen=True)
class Graced:
    """A prefix kept only because its project vanished recently (moved or deleted)."""

    prefix: Path
    pointer: Path  # the pointer that is gone
    until: float  # kept until then (epoch seconds), unless the project is used again


@dataclass(frozen=True)
class GcResult:
    """What one gc removed (or would remove, in a dry run), what it kept and why, and the
    bytes it freed."""

    removed: tuple[Path, ...]
    freed_bytes: int
    kept: int
    removed_builds: tuple[Path, ...] = ()  # build cache entries no kept prefix lists
    graced: tuple[Graced, ...] = ()
    busy: tuple[Path, ...] = ()  # being installed right now: kept
    removed_artifacts: tuple[Path, ...] = ()  # artifacts no kept prefix or live lock names
    removed_cache_entries: int = 0  # uv's and rattler's entries no kept prefix links to
    caches_busy: bool = False  # an install or pack was running: artifacts and caches kept
    caches_read_only: bool = False  # the store is read-only here: artifacts and caches kept
    interrupted: int = 0  # folders an earlier gc was killed before deleting (its trash)
    fs_freed_bytes: int | None = None  # what statvfs saw released (None: a dry run)


GC_GRACE_DAYS = 14.0
# The folders ``install.headstart`` makes environments in, beside the prefixes, and the
# age at which gc takes one for the leftover of a killed install.
STAGING = ".uv-venv-"
STAGING_STALE_SECONDS = 24 * 3600.0


def _key(path: Path) -> str:
    """A short stable name for an absolute path (per-user state of a store prefix)."""
    return _sha256.hexdigest(os.fsencode(path.absolute()))[:24]


@dataclass(frozen=True)
class Store:
    """The store at ``root`` (see the module doc): its places, its prefixes' state, their
    locks, the gc roots, and gc."""

    root: Path
    # Per-user state ($XDG_STATE_HOME/gpuenv): file locks when the store is read-only.
    state_dir: Path | None = None

    # --- places ---------------------------------------------------------------------------

    @property
    def prefixes(self) -> Path:
        return self.root / "prefixes"

    def cache(self, kind: str) -> Path:
        return self.root / "cache" / kind

    def artifacts(self) -> ArtifactStore:
        """The store's artifacts: every locked artifact once, by sha256 (gpuenv._fetch)."""
        from gpuenv._fetch import ArtifactStore

        return ArtifactStore(self.cache("artifacts"), self.root / "locks" / "artifacts")

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

    def mark_installed(
        self,
        prefix: Path,
        *,
        lock_hash: str,
        target: str,
        python: str,
        cuda: str | None = None,
        groups: tuple[str, ...] | None = None,
    ) -> None:
        """The last step of an install: after this the prefix counts as installed.

        Written atomically (a rename), not fsynced: an fsync here forces the file
        system to commit the metadata of every file just installed (a second or more
        for a torch prefix), and buys little: journaling file systems commit a rename
        after the changes made before it, so a marker that survives a crash implies
        the files it vouches for did too. A killed process never leaves a marker."""
        marker = Marker(lock_hash, target, python, __version__, time.time(), cuda, groups)
        text = json.dumps(marker.to_json(), indent=2) + "\n"
        atomic_write_text(prefix / MARKER, text, durable=False, what="the completion marker")

    def discard(self, prefix: Path) -> None:
        """Remove a prefix (an interrupted build, or gc): renamed into trash/ first, in
        one atomic step, so nothing ever sees a half-deleted prefix at its real path."""
        if not prefix.exists() and not prefix.is_symlink():
            return
        _rmtree(self._to_trash(prefix))

    def _to_trash(self, prefix: Path) -> Path:
        trash = self.root / "trash"
        with writing(trash, "the store's trash"):
            trash.mkdir(parents=True, exist_ok=True)
        doomed = trash / f"{prefix.name}.{os.urandom(4).hex()}"
        try:
            prefix.rename(doomed)
        except OSError as exc:
            raise storage_error(exc, prefix, "the store (removing a prefix)") from None
        return doomed

    def discard_quietly(self, prefix: Path) -> None:
        """``discard`` on a failure path: a second failure (the disk that just filled
        up, a read-only store) must not hide the first; the next install retries."""
        with contextlib.suppress(OSError):
            self.discard(prefix)

    def prefix_folders(self) -> list[Path]:
        """The prefixes, installed or not: every folder in ``prefixes`` but those whose
        name starts with a dot (no target's does), which are an install's own: the
        write test, an environment being made (``STAGING``)."""
        if not self.prefixes.exists():
            return []
        return sorted(p for p in self.prefixes.iterdir() if not p.name.startswith("."))

    def _stale_staging(self, *, dry_run: bool) -> list[Path]:
        """The environments an install began and was killed before moving or removing
        (``STAGING``, a day old): moved to the trash (kept where they are, ``dry_run``)."""
        if not self.prefixes.exists():
            return []
        cutoff = time.time() - STAGING_STALE_SECONDS
        out = []
        for folder in sorted(self.prefixes.glob(f"{STAGING}*")):
            try:
                if folder.lstat().st_mtime >= cutoff:
                    continue
            except FileNotFoundError:
                continue
            out.append(folder if dry_run else self._to_trash(folder))
        return out

    def _trash(self) -> list[Path]:
        """What an earlier gc moved to the trash and was killed before deleting."""
        folder = self.root / "trash"
        return sorted(folder.glob("*")) if folder.is_dir() else []

    @contextlib.contextmanager
    def locked(self, prefix: Path, *, timeout: float = 3600) -> Iterator[None]:
        """Hold the prefix's file lock: concurrent installs of one prefix build it once.
        In a read-only store the lock is this user's (see the module doc)."""
        with self._file_lock(f"{prefix.name}.lock", prefix, timeout, what=prefix.name):
            yield

    @contextlib.contextmanager
    def roots_locked(self, *, timeout: float = 600) -> Iterator[None]:
        """Hold the roots lock: pointers move, and gc decides, one at a time."""
        with self._file_lock(".roots.lock", self.root, timeout, what="the store's gc roots"):
            yield

    @contextlib.contextmanager
    def spec_locked(self, spec: Path, *, timeout: float = 3600) -> Iterator[None]:
        """Hold a project spec's edit lock: ``gpuenv add`` and ``remove`` of one spec run
        one after another, each reading what the one before wrote, and ``lock`` and
        ``install`` never read an edit an ``add`` may still put back."""
        real = spec.resolve()
        with self._file_lock(
            f"spec-{_key(real)}.lock",
            real,
            timeout,
            what=f"{real} (another add, remove, lock or install)",
        ):
            yield

    @contextlib.contextmanager
    def _file_lock(self, name: str, owner: Path, timeout: float, *, what: str) -> Iterator[None]:
        try:
            lock = self._acquire_lock(name, owner, timeout)
        except LockTimeout as exc:
            raise InstallError(
                f"another gpuenv has held {what} for over {timeout:.0f} s",
                hint=f"if no gpuenv is running, delete {exc.lock_file}",
            ) from None
        try:
            yield
        finally:
            lock.release()

    def _acquire_lock(self, name: str, owner: Path, timeout: float) -> FileLock:
        try:
            return _acquire(self.root / "locks" / name, timeout)
        except StorageError as exc:
            if not is_read_only(exc) or self.state_dir is None:
                raise
        stem = name.removesuffix(".lock")
        fallback = self.state_dir / "locks" / f"{stem}-{_key(owner)}.lock"
        return _acquire(fallback, timeout)

    # --- roots and gc ---------------------------------------------------------------------------

    def register_root(self, pointer: Path, prefix: Path | None = None) -> bool:
        """Remember a project pointer as a gc root (a symlink to the pointer itself),
        and the prefix it reaches now (kept for a while if the project vanishes).
        False when the store is read-only here: gc cannot run here either."""
        reached = prefix or _resolve_pointer(pointer)
        try:
            with writing(self.root / _marker.ROOTS, "a gc root of the store"):
                _marker.register_root(str(self.root), str(pointer), str(reached or ""))
        except StorageError as exc:
            if is_read_only(exc):
                return False
            raise
        return True

    def _roots(self) -> list[Path]:
        directory = self.root / _marker.ROOTS
        if not directory.is_dir():
            return []
        return sorted(p for p in directory.iterdir() if _is_root_name(p.name))

    def _forget(self, root: Path) -> None:
        for path in (root, *_companions(root)):
            with contextlib.suppress(OSError):
                path.unlink()

    def _dead_root(
        self, root: Path, pointer: Path | None, grace: float, *, now: float, dry_run: bool
    ) -> Graced | None:
        """A root whose pointer reaches no prefix: forgotten, or (its project is gone
        altogether, and it is within the grace period) kept with the prefix it held."""
        last = _resolve_pointer(root.with_name(root.name + _marker.ROOT_PREFIX_SUFFIX))
        # <project>/.gpuenv/<target>: a project that still exists removed its pointer.
        project_dir = pointer.parent.parent if pointer is not None else None
        if pointer is None or last is None or (project_dir is not None and project_dir.exists()):
            if not dry_run:
                self._forget(root)
            return None
        gone = root.with_name(root.name + _marker.ROOT_GONE_SUFFIX)
        try:
            since = gone.stat().st_mtime
        except OSError:
            # The first look that finds the project gone starts its grace period, a
            # dry run's or list's too: the date they print then holds (it moved on
            # with every list until a real gc ran). Not writable here: from now.
            since = now
            with contextlib.suppress(OSError):
                gone.touch()
                os.utime(gone, (now, now))  # the date said now is the one said later
        if now - since >= grace * 86400:
            if not dry_run:
                self._forget(root)
            return None
        return Graced(last, pointer, since + grace * 86400)

    def _scan_roots(
        self, *, grace: float, dry_run: bool
    ) -> tuple[dict[Path, list[Path]], list[Graced]]:
        references: dict[Path, list[Path]] = {}
        graced: list[Graced] = []
        now = time.time()
        for root in self._roots():
            pointer = root.readlink() if root.is_symlink() else None
            target = _resolve_pointer(pointer) if pointer else None
            if target is None or not target.is_relative_to(self.prefixes):
                kept = self._dead_root(root, pointer, grace, now=now, dry_run=dry_run)
                if kept is not None:
                    graced.append(kept)
                continue
            assert pointer is not None
            references.setdefault(target, []).append(pointer)
            # Its project is back (moved back, a remount): a later disappearance starts
            # a new grace period, not the old one's remainder.
            with contextlib.suppress(OSError):
                root.with_name(root.name + _marker.ROOT_GONE_SUFFIX).unlink()
            if not dry_run:
                with contextlib.suppress(OSError):
                    self.register_root(pointer, target)  # the prefix it reaches now
        return references, graced

    def live_references(self) -> dict[Path, list[Path]]:
        """Prefix -> the project pointers that reach it (a read: nothing is forgotten)."""
        return self._scan_roots(grace=GC_GRACE_DAYS, dry_run=True)[0]

    def list(self, *, verified: Any = None) -> list[PrefixInfo]:
        """Every prefix, with its size, lock hash, state and referrers. ``verified``
        counts a prefix's passing verification records (injected by the caller)."""
        references, graced = self._scan_roots(grace=GC_GRACE_DAYS, dry_run=True)
        until = {g.prefix: g.until for g in graced}
        out = []
        for prefix in self.prefix_folders():
            marker = read_marker(prefix)
            usage = tree_usage(prefix)
            out.append(
                PrefixInfo(
                    path=prefix,
                    target=marker.target if marker else None,
                    lock_hash=marker.lock_hash if marker else None,
                    installed=marker is not None,
                    size_bytes=usage.total,
                    unique_bytes=usage.unique,
                    shared_bytes=usage.shared,
                    referenced_by=tuple(references.get(prefix, ())),
                    verified_on=verified(prefix) if verified else 0,
                    kept_until=until.get(prefix),
                )
            )
        return out

    def gc(self, *, dry_run: bool = False, grace_days: float = GC_GRACE_DAYS) -> GcResult:
        """Remove every prefix no live project pointer reaches (nor a vanished project
        within ``grace_days``), the build entries, artifacts and tool-cache entries none
        of the kept ones uses; say how much that frees. Decided under the roots lock,
        each prefix under its own lock, so a concurrent install is never undercut; the
        artifacts and tool caches only while no install or pack uses them.

        The bytes freed are counted per inode before anything is removed (a file still
        linked from a kept prefix frees nothing), so a dry run says the same number;
        after a real run ``fs_freed_bytes`` is what the file system's free count moved by."""
        before = free_bytes(self.root)
        release = Release()
        # An earlier gc killed while deleting left its trash: counted, and deleted with the
        # rest (a dry run deletes nothing, that included).
        trash = self._trash()
        for place in trash:
            release.add(place)
        doomed: list[tuple[Path, Path]] = []  # (prefix, where it went)
        busy: list[Path] = []
        with self.roots_locked():
            references, graced = self._scan_roots(grace=grace_days, dry_run=dry_run)
            keep = set(references) | {g.prefix for g in graced}
            candidates = self.prefix_folders()
            for prefix in candidates:
                if prefix in keep:
                    continue
                try:
                    with self.locked(prefix, timeout=0):
                        doomed.append((prefix, prefix if dry_run else self._to_trash(prefix)))
                except InstallError:  # an install holds it right now: not garbage
                    busy.append(prefix)
        for _prefix, place in doomed:
            release.add(place)
        stale = self._stale_staging(dry_run=dry_run)
        for place in stale:
            release.add(place)
        kept = len(candidates) - len(doomed)
        removed = tuple(prefix for prefix, _ in doomed)
        live = [p for p in candidates if p not in removed]
        builds = self._gc_builds(live, release, dry_run=dry_run)
        artifacts: Sequence[Path] = ()
        entries: Sequence[Path] = ()
        lock, read_only = self._try_artifacts_lock()
        try:
            # A dry run in a read-only store says what gc would free where it can write.
            if lock is not None or (read_only and dry_run):
                artifacts = self._unused_artifacts(live, references)
                for path in artifacts:
                    release.add(path)
                entries = self._unused_cache_entries(release)
            freed = release.freed
            if not dry_run:
                doomed_places = (p for _prefix, p in doomed)
                for path in [*trash, *doomed_places, *stale, *artifacts, *entries]:
                    _rmtree(path)
        finally:
            if lock is not None:
                lock.release()
        after = None if dry_run else free_bytes(self.root)
        return GcResult(
            removed,
            freed,
            kept,
            builds,
            tuple(graced),
            tuple(busy),
            removed_artifacts=tuple(artifacts),
            removed_cache_entries=len(entries),
            caches_busy=lock is None and not read_only,
            caches_read_only=read_only and not dry_run,
            interrupted=len(trash),
            fs_freed_bytes=after - before if after is not None and before is not None else None,
        )

    # --- artifacts and the tools' caches ------------------------------------------------------

    @contextlib.contextmanager
    def using_artifacts(self) -> Iterator[None]:
        """Held (shared) by installs and packs while they use the store's artifacts and
        uv's and rattler's caches: gc prunes those only when nobody holds it."""
        lock = _acquire(self.root / "locks" / "artifacts-in-use.lock", 6 * 3600, shared=True)
        try:
            yield
        finally:
            lock.release()

    def _try_artifacts_lock(self) -> tuple[FileLock | None, bool]:
        """The artifacts lock when nobody holds it, and whether the store is read-only
        here (then there is no lock to take, and nothing could be removed anyway)."""
        try:
            return _acquire(self.root / "locks" / "artifacts-in-use.lock", 0), False
        except LockTimeout:
            return None, False
        except StorageError as exc:
            return None, is_read_only(exc)

    def _kept_artifacts(
        self, live: Sequence[Path], references: Mapping[Path, Sequence[Path]]
    ) -> set[str]:
        """The sha256 of every artifact a kept prefix was installed from, a kept build was
        built from, or a live project's lock names (it may be installed or packed next)."""
        keep: set[str] = set()
        for prefix in live:
            keep |= prefix_artifacts(prefix)
        for digest in set().union(*(self.build_identities(p) for p in live)) if live else set():
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
                entry = json.loads(
                    (self.root / "builds" / digest / "entry.json").read_text(encoding="utf-8")
                )
                keep.add(entry["source"]["sha256"])
        for pointers in references.values():
            for pointer in pointers:
                lock = pointer.parent.parent / "gpuenv.lock"
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    keep |= set(_HEX64.findall(lock.read_text(encoding="utf-8")))
        return keep

    def _unused_artifacts(
        self, live: Sequence[Path], references: Mapping[Path, Sequence[Path]]
    ) -> Sequence[Path]:
        root = self.cache("artifacts")
        if not root.is_dir():
            return []
        keep = self._kept_artifacts(live, references)
        return [
            folder
            for folder in sorted(root.iterdir())
            if _HEX64.fullmatch(folder.name) and folder.name not in keep
        ]

    def _unused_cache_entries(self, release: Release) -> Sequence[Path]:
        """uv's unpacked wheels and rattler's extracted packages that no kept prefix
        links to (a prefix's files are hard links into them): pruned, not wiped. A tool
        that finds an entry gone unpacks the store's artifact again."""
        out = []
        # uv: archive-v0/<id>/ (its wheels-v*/ pointers to a pruned id are refreshed by uv);
        # rattler: <name>-<version>-<build>/ beside its <...>.lock, in the cache's root.
        for root in (self.cache("uv") / "archive-v0", self.cache("rattler")):
            if not root.is_dir():
                continue
            for entry in sorted(root.iterdir()):
                if entry.is_dir() and not entry.is_symlink() and release.unused(entry):
                    release.add(entry)
                    out.append(entry)
        return out

    # --- the build cache (gpuenv.builds.cache writes it; gc reads what prefixes list) -----

    def build_identities(self, prefix: Path) -> set[str]:
        """The build identities a prefix's ``builds.json`` lists (empty when unreadable)."""
        from gpuenv import _fs
        from gpuenv.errors import InputFileError

        try:  # bounded: a FIFO or /dev/zero in a prefix is an unreadable record, not a hang
            data: Any = _fs.load_json(prefix / BUILDS_RECORD, limit=_MAX_RECORD_BYTES)
            return {
                b["identity"].removeprefix("sha256:")
                for b in data["builds"]
                if isinstance(b, dict) and isinstance(b.get("identity"), str)
            }
        except (OSError, InputFileError, ValueError, KeyError, TypeError):
            return set()

    def _gc_builds(
        self, live: Sequence[Path], release: Release, *, dry_run: bool
    ) -> tuple[Path, ...]:
        """Remove build entries no live prefix lists, unfinished ones nobody is building,
        logs without an entry, and torch-extensions folders of prefixes that are gone."""
        root = self.root / "builds"
        keep = set().union(*(self.build_identities(p) for p in live)) if live else set()
        removed: list[Path] = []
        candidates = [e for e in sorted(root.glob("*")) if e.name not in ("logs", "sources")]
        candidates += sorted((root / ".incoming").glob("*"))
        for entry in candidates:
            digest = entry.name.split(".", 1)[0]
            if entry.name == ".incoming" or (entry.parent == root and digest in keep):
                continue
            try:
                with self.locked(Path(f"build-{digest}"), timeout=0.5):
                    release.add(entry)
                    if not dry_run:
                        self.discard(entry)
            except InstallError:  # being built or installed right now
                continue
            removed.append(entry)
        if not dry_run:
            self._gc_build_leftovers(root, keep, live)
        return tuple(removed)

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
        for source in (root / "sources").glob("*"):  # before sources joined the artifacts
            if source.name not in sources:
                _rmtree(source)
        names = {p.name for p in live}
        for folder in self.cache("torch-extensions").glob("*"):
            if folder.name not in names:
                _rmtree(folder)


# --- project pointers ------------------------------------------------------------------------


def _is_root_name(name: str) -> bool:
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


def _companions(root: Path) -> tuple[Path, ...]:
    return tuple(
        root.with_name(root.name + suffix)
        for suffix in (_marker.ROOT_PREFIX_SUFFIX, _marker.ROOT_GONE_SUFFIX)
    )


def _replace_symlink(link: Path, target: Path, *, what: str = "a link") -> None:
    """Point ``link`` at ``target`` in one atomic step (a new link renamed over the old)."""
    with writing(link, what):
        link.parent.mkdir(parents=True, exist_ok=True)
        temporary = link.with_name(f".{link.name}.{os.urandom(4).hex()}")
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


def prefix_artifacts(prefix: Path) -> set[str]:
    """The sha256 of the artifacts ``prefix`` was installed from: its
    ``etc/gpuenv/artifacts.json`` (written by install), else the hashes its
    requirements.txt and conda-meta records name (prefixes installed before it was)."""
    from gpuenv import _fs
    from gpuenv.errors import InputFileError

    try:
        data: Any = _fs.load_json(prefix / ARTIFACTS_RECORD, limit=_MAX_RECORD_BYTES)
        return {d for d in data["sha256"] if isinstance(d, str) and _HEX64.fullmatch(d)}
    except (OSError, InputFileError, ValueError, KeyError, TypeError):
        pass
    found: set[str] = set()
    for record in [
        prefix / "etc" / "gpuenv" / "requirements.txt",
        *(prefix / "conda-meta").glob("*.json"),
    ]:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found |= set(_HEX64.findall(record.read_text(encoding="utf-8")))
    return found


def _acquire(path: Path, timeout: float, *, shared: bool = False) -> FileLock:
    """A held lock on ``path`` (its directory made first). ``LockTimeout`` is an
    ``OSError`` too: it passes through as itself."""
    what = "the store's file lock"
    with writing(path, what):
        path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=timeout, shared=shared)
    except LockTimeout:
        raise
    except OSError as exc:
        raise storage_error(exc, path, what) from exc
    return lock


def point_project(store: Store, project: Path, target: str, prefix: Path) -> Path | None:
    """Make ``prefix`` the project's current generation for ``target``; the one it
    replaces becomes ``.previous``. Returns that previous prefix, if any.

    Called while the caller holds the prefix's lock; the roots lock is taken here, so
    gc sees the pointers before or after the move, never between. Every other write
    comes first (the ``.gitignore``, the gc roots, ``.previous``): a failure there
    leaves the project on its old generation."""
    current = pointer_path(project, target)
    with store.roots_locked():
        old = _resolve_pointer(current)
        if old == prefix:
            store.register_root(current, prefix)
            return None
        _ignore_project_dir(project)
        previous = pointer_path(project, target, previous=True)
        if old is not None:
            store.register_root(previous, old)
        store.register_root(current, prefix)
        if old is not None:
            _replace_symlink(previous, old, what="the project's previous-generation pointer")
        _replace_symlink(current, prefix, what="the project's pointer")
    return old


@dataclass(frozen=True)
class RolledBack:
    """What ``rollback`` did: the generation it left (now the previous one), the one it
    went to, and whether the one left is still completely installed (False: deleted by
    hand or its install undone, so ``gpuenv rollback`` cannot return to it)."""

    left: Path
    to: Path
    left_installed: bool


def rollback(store: Store, project: Path, target: str) -> RolledBack:
    """Point the project back at its previous generation (and keep the current one as
    the new previous, so a second rollback undoes the first).

    The previous generation must be a completely installed prefix of this target in
    this store (its completion marker names the target); anything else is refused and
    nothing changes. The current one need not be: a prefix deleted by hand is when the
    previous one is wanted most (``RolledBack.left_installed`` says so). The project
    then runs the previous one although gpuenv.lock may have moved on (``run`` warns;
    ``gpuenv install`` returns to the lock)."""
    current = pointer_path(project, target)
    previous = pointer_path(project, target, previous=True)
    with store.roots_locked():
        now, before = _resolve_pointer(current), _resolve_pointer(previous)
        if before is None:
            raise NotInstalled(
                f"target {target} has no previous generation to roll back to",
                hint="a previous generation exists once an install replaced another one",
            )
        if not before.exists():
            raise NotInstalled(
                f"the previous generation of {target} ({before}) is no longer there "
                "(deleted by hand, or by gc after its pointer was removed): nothing was "
                "changed",
                hint=f"run 'gpuenv install --target {target}' to build the current lock",
            )
        if now is None:
            raise NotInstalled(
                f"target {target} is not installed in this project",
                hint=f"run 'gpuenv install --target {target}'",
            )
        marker = _check_generation(store, before, target)
        left, _why = _marker.read_marker_checked(now)
        _replace_symlink(current, before, what="the project's pointer")
        _replace_symlink(previous, now, what="the project's previous-generation pointer")
        store.register_root(current, before)
        store.register_root(previous, now)
    _marker.write_lock_state(str(project), rollback={target: marker.lock_hash})
    return RolledBack(now, before, left is not None and left.target == target)


def _check_generation(store: Store, prefix: Path, target: str) -> Marker:
    if not prefix.is_relative_to(store.prefixes):
        raise NotInstalled(
            f"the previous generation of {target} ({prefix}) is not a prefix of the store "
            f"{store.root}: nothing was changed",
            hint=f"run 'gpuenv install --target {target}'",
        )
    marker, why = _marker.read_marker_checked(prefix)
    if marker is None or marker.target != target:
        detail = why or (
            "it has no completion marker" if marker is None else f"it is {marker.target}'s"
        )
        raise NotInstalled(
            f"the previous generation of {target} ({prefix}) is not completely installed "
            f"({detail}): nothing was changed",
            hint=f"run 'gpuenv install --target {target}' to build the current lock",
        )
    return marker


def check_project_writable(project: Path) -> None:
    """Refuse, before anything is built or fetched, a project whose ``.gpuenv/`` cannot
    be written (a read-only mount, a folder not this user's): an install built the
    project's extension first, then failed on the pointers."""
    where = project / PROJECT_DIR
    probe = where if where.is_dir() else project
    try:
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        return  # the write itself will say why
    if read_only or not os.access(probe, os.W_OK | os.X_OK):
        code = errno.EROFS if read_only else errno.EACCES
        raise storage_error(
            OSError(code, os.strerror(code), str(probe)),
            where / ".gitignore",
            "the project's .gpuenv/",
            hint=f"gpuenv keeps links to its prefixes in {where}: install from a copy "
            "of the project you can write, or make it writable",
        )


def _ignore_project_dir(project: Path) -> None:
    """.gpuenv/ holds machine-specific links: keep it out of version control."""
    ignore = project / PROJECT_DIR / ".gitignore"
    if not ignore.exists():
        atomic_write_text(
            ignore,
            "# machine-specific links into the gpuenv store\n*\n",
            durable=False,  # rewritten by the next install when lost: no fsync
            what="the project's .gpuenv/.gitignore",
            hint=f"gpuenv keeps links to its prefixes in {project / PROJECT_DIR}: "
            "make the project directory writable",
        )
