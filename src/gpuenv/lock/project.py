"""Locking a project: the selected targets one by one (``lock.target``), the others
carried over; what to relock and why (``plan_relock``, one policy for ``gpuenv lock``,
``gpuenv install`` and ``gpuenv add``/``remove``); writing the file.

A target whose index cannot be reached (``NetworkError``: name resolution, refused,
timeout, TLS, 401/403, 404) does not stop the others: the targets that resolved are
written, a failed target keeps its previous entry when the lock had one (so what was
installable stays installable; ``lock --check`` still reports it stale if the spec
moved), and the lock step then fails with exit 5 naming each failed target, its URL and
the fix. Other errors (an unsatisfiable target, exit 3) stop the whole lock, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv._progress import failed
from gpuenv.errors import ExternalToolError, NetworkError, UnreadableLockError
from gpuenv.lock.inputs import out_of_date, relock_basis
from gpuenv.lock.model import CondaSolver, Lock, LockedTarget, PipResolver
from gpuenv.lock.options import LockOptions, LockSettings
from gpuenv.spec import LoadedSpec, Spec

if TYPE_CHECKING:
    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.lock.format import LockReading
    from gpuenv.lock.torch_page import Pages
    from gpuenv.plan import TargetPlan

Progress = Callable[[str], None]

# How long lock waits, once resolved, for its look at the index's newest torch.
WATCH_GRACE = 5.0


@dataclass(frozen=True)
class PackageChange:
    """One package whose locked version a lock run changed (None: absent before, or after)."""

    name: str
    before: str | None
    after: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"name": self.name, "from": self.before, "to": self.after}


@dataclass(frozen=True)
class TargetChange:
    """What a lock run did to one target, and the packages whose versions it changed."""

    target: str
    status: str  # "added", "updated", "unchanged", "removed"
    packages: tuple[PackageChange, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "changes": [p.to_json() for p in self.packages]}


@dataclass(frozen=True)
class LockResult:
    """What one lock run made: the lock and what changed in each target."""

    lock: Lock
    changes: tuple[TargetChange, ...] = field(default_factory=tuple)
    # Targets whose indexes could not be reached: not relocked (see the module doc).
    failures: Mapping[str, NetworkError] = field(default_factory=dict)
    # What the resolved wheels contradict in the knowledge base, metadata that could not
    # be read, a torch newer than the data knows: reported, never fatal.
    warnings: tuple[str, ...] = ()
    # The sha256 of the lock file's bytes once written (``lock_and_write``); "" when no
    # file was written (no target locked, and none before).
    digest: str = ""


@dataclass(frozen=True)
class Relock:
    """What a relock starts from and locks."""

    basis: Lock | None  # the lock's trusted targets (and a version 1 lock's pins)
    options: LockOptions  # the selection, with every damaged target of the spec added
    # The spec's targets relocked because their entry is damaged (or of an old format),
    # whatever was asked for, with what is wrong with each.
    forced: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def plan_relock(
    reading: LockReading | None, spec: Spec, options: LockOptions, *, start_over: bool = False
) -> Relock:
    """The one relock policy (``gpuenv lock``, ``install``, ``add`` and ``remove``): the
    targets ``options`` selects, plus every target whose entry fails its checks (a written
    lock never carries one), starting from the entries that pass them. ``start_over``
    (the lock could not be read at all): every target."""
    if start_over:
        options = replace(options, targets=None)
    basis, forced = relock_basis(reading, spec)
    if options.targets is not None and forced:
        options = replace(options, targets=tuple(dict.fromkeys([*options.targets, *forced])))
    damaged = reading.damaged if reading is not None else {}
    return Relock(basis, options, {name: tuple(damaged[name]) for name in forced})


@dataclass(frozen=True)
class LockRun:
    """What ``gpuenv lock`` did: the result, whether the file's bytes changed, where."""

    result: LockResult
    written: bool
    lock_path: Path


@dataclass(frozen=True)
class LockAsk:
    """What ``gpuenv lock`` is asked: the targets (None: every one), and which pins move
    (``upgrade``: all; ``upgrade_packages``: these, named as given)."""

    targets: tuple[str, ...] | None = None
    upgrade: bool = False
    upgrade_packages: tuple[str, ...] = ()


def lock_spec_file(
    spec_file: Path,
    knowledge: Callable[[], KnowledgeBase],
    settings: LockSettings,
    ask: LockAsk,
    *,
    kb_digest: str,
    warn: Callable[[str], None],
    progress: Progress | None = None,
    backends: Callable[[], tuple[PipResolver, CondaSolver]] | None = None,
) -> LockRun:
    """``gpuenv lock``: lock the project of ``spec_file`` into the gpuenv.lock beside it,
    the targets ``ask`` names plus those ``plan_relock`` adds, keeping the pins it does
    not move. What the caller should be told before the lock runs (a lock that cannot be
    read, a damaged entry relocked, an upgraded package the lock does not pin) goes to
    ``warn``; the lock's own findings are in the result's ``warnings``."""
    targets, upgrade_packages = ask.targets, ask.upgrade_packages
    from gpuenv.lock import _noted
    from gpuenv.lock.format import LOCK_FILENAME
    from gpuenv.names import normalize_name
    from gpuenv.spec import check_target, load_spec

    taken = _noted.before(spec_file)  # for the note left after writing
    # The knowledge base loads only when needed: a spec checked before is cached.
    loaded = load_spec(spec_file, kb=knowledge, cache_dir=settings.cache_dir)
    taken = taken.loaded(loaded) if taken is not None else None
    for name in targets or ():
        check_target(name, loaded.spec.targets)
    lock_path = spec_file.parent / LOCK_FILENAME
    reading, unreadable = read_for_relock(lock_path, cache_dir=settings.cache_dir)
    options = LockOptions.from_settings(
        settings,
        loaded.spec,
        targets=targets,
        upgrade=ask.upgrade,
        upgrade_packages=tuple(normalize_name(n) for n in upgrade_packages),
    )
    if unreadable is not None:
        warn(
            f"{unreadable.message}: writing a new gpuenv.lock for every target (nothing in "
            "the old one could be kept)"
        )
    kb = knowledge()
    relock = plan_relock(reading, loaded.spec, options, start_over=unreadable is not None)
    _check_upgrade_packages(upgrade_packages, relock.basis, options, lock_path, warn)
    for name, problems in relock.forced.items():
        warn(f"target {name} in {lock_path} is relocked: {'; '.join(problems)}")
    result, written = lock_and_write(
        loaded,
        kb,
        relock,
        lock_path=lock_path,
        backends=backends,
        kb_digest=kb_digest,
        progress=progress,
    )
    if relock.basis is None:  # no lock before: the names are checked against the new one
        _check_resolved(upgrade_packages, result.lock, options, loaded.path, warn)
    # the first `lock --check` or `install` of these bytes answers from lock._fresh's note
    _noted.note_written(
        taken,
        loaded,
        knowledge,
        result.lock,
        lock_path=lock_path,
        options=options,
        kb_digest=kb_digest,
        digest=result.digest,
    )
    return LockRun(result, written, lock_path)


# PEP 508's project name (case-insensitive, as uv reads --upgrade-package's names)
_PROJECT_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")


def _check_upgrade_packages(
    given: Iterable[str],
    existing: Lock | None,
    options: LockOptions,
    lock_path: Path,
    warn: Callable[[str], None],
) -> None:
    """Each name whose pin should move is a package name (a requirement such as
    "idna>=3" is refused), and one the lock does not pin is said: a typo moved nothing,
    silently. With no lock to keep pins from, ``_check_resolved`` says it after the
    resolution."""
    from gpuenv.errors import UsageError

    for name in given:
        if not _PROJECT_NAME.match(name):
            raise UsageError(
                f"--upgrade-package {name!r}: not a package name",
                hint="name the package alone (--upgrade-package idna); version limits go "
                "in gpuenv.toml",
            )
    if existing is None:
        return  # nothing is kept: every pin moves anyway
    unknown = _not_locked(given, existing, options)
    if unknown:  # a warning: a requirement new in the spec is not locked yet
        warn(
            f"--upgrade-package {', '.join(unknown)}: not locked in {lock_path}"
            f"{_scope(options)}: nothing of it to move (check the spelling)"
        )


def _check_resolved(
    given: Iterable[str],
    resolved: Lock,
    options: LockOptions,
    spec_file: Path,
    warn: Callable[[str], None],
) -> None:
    """With no lock before this one, a name the new lock does not pin either is in
    neither the spec nor its resolution: said, as a name the old lock lacks is (a typo
    passed silently where there was no lock yet)."""
    unknown = _not_locked(given, resolved, options)
    if unknown:
        warn(
            f"--upgrade-package {', '.join(unknown)}: in neither {spec_file} nor what it "
            f"resolved to{_scope(options)} (there was no lock: every pin is new anyway); "
            "check the spelling"
        )


def _not_locked(given: Iterable[str], lock: Lock, options: LockOptions) -> list[str]:
    """The names of ``given`` that ``lock`` pins in none of the targets locked now."""
    from gpuenv.names import normalize_name

    targets = [lock.targets[n] for n in options.targets or lock.targets if n in lock.targets]
    locked = {p.name for t in targets for p in t.pip} | {b.name for t in targets for b in t.builds}
    return [n for n in given if normalize_name(n) not in locked]


def _scope(options: LockOptions) -> str:
    return f" for {', '.join(options.targets)}" if options.targets else ""


def read_for_relock(
    lock_path: Path, *, cache_dir: Path | None
) -> tuple[LockReading | None, UnreadableLockError | None]:
    """The lock as read for relocking (a version 1 lock too), or None and why it cannot
    be read at all: writing a lock is the fix for a lock that cannot be read (conflict
    markers from a merge, a truncated file), so ``gpuenv lock`` starts over rather than
    refuse to."""
    from gpuenv.lock.format import load_lock

    try:
        return load_lock(lock_path, cache_dir=cache_dir, legacy_ok=True), None
    except UnreadableLockError as err:
        return None, err


def _diff(name: str, before: LockedTarget | None, after: LockedTarget | None) -> TargetChange:
    if after is None:
        return TargetChange(name, "removed")
    old = {p.name: p.version for p in (before.pip if before else ())}
    old.update(
        {f"conda:{c.name}": f"{c.version}-{c.build}" for c in (before.conda if before else ())}
    )
    new = {p.name: p.version for p in after.pip}
    new.update({f"conda:{c.name}": f"{c.version}-{c.build}" for c in after.conda})
    changes = tuple(
        PackageChange(pkg, old.get(pkg), new.get(pkg))
        for pkg in sorted(set(old) | set(new))
        if old.get(pkg) != new.get(pkg)
    )
    if before is None:
        return TargetChange(name, "added", changes)
    return TargetChange(name, "updated" if changes or before != after else "unchanged", changes)


def lock_project(
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    *,
    existing: Lock | None,
    options: LockOptions,
    pip: PipResolver,
    conda: CondaSolver,
    kb_digest: str,
    progress: Progress | None = None,
) -> LockResult:
    """Lock the selected targets; the others are carried over from ``existing`` untouched."""
    spec = loaded.spec
    selected = options.targets or tuple(spec.targets)
    report = progress or (lambda _message: None)
    from gpuenv.lock._share import shared_conda, shared_pip

    shared = shared_pip(pip)  # identical requests: once; distinct ones side by side
    # what locks a target loads here: `install` of a fresh lock never needs it
    from gpuenv.lock._pypi_route import with_pypi_route
    from gpuenv.lock.target import Backends, expected_requests, lock_target

    plans: dict[str, TargetPlan] = {}
    expected = expected_requests(loaded, kb, existing, options, selected, plans)
    shared.prefetch(expected)
    read_ahead = getattr(shared, "read_ahead", None)
    if callable(read_ahead):
        read_ahead(expected)  # the family's METADATA, read while uv resolves
    backends = Backends(shared, shared_conda(conda), plans)
    targets: dict[str, LockedTarget] = {}
    changes: list[TargetChange] = []
    failures: dict[str, NetworkError] = {}
    warnings: list[str] = []
    for name in spec.targets:
        previous = existing.target(name) if existing else None
        if name not in selected:
            if previous is not None:
                targets[name] = previous  # carried over byte for byte
            continue
        try:
            locked, found = lock_target(
                name, loaded, kb, backends, previous, options, report, kb_digest
            )
        except NetworkError as exc:
            failed(report)  # the next target's phase must not mark this one done
            failures[name] = with_pypi_route(
                exc, name, spec, kb, torch_index=options.torch_index, detected=options.detected
            )
            if previous is not None:
                targets[name] = previous  # still installable as it was locked before
            continue
        warnings += found
        targets[name] = locked
        changes.append(_diff(name, previous, locked))
    for name in sorted(set(existing.targets) - set(spec.targets)) if existing else []:
        if options.targets is None:
            changes.append(_diff(name, existing.target(name) if existing else None, None))
        elif existing is not None:
            targets[name] = existing.targets[name]
    lock = Lock(loaded.content_hash, dict(sorted(targets.items())))
    return LockResult(lock, tuple(changes), failures=failures, warnings=tuple(warnings))


def ensure_lock(
    loaded: LoadedSpec,
    knowledge: Callable[[], KnowledgeBase],
    *,
    lock_path: Path,
    options: LockOptions,
    frozen: bool,
    backends: Callable[[], tuple[PipResolver, CondaSolver]] | None = None,
    kb_digest: str,
    progress: Progress | None = None,
) -> tuple[Lock, str]:
    """The lock for ``options.targets``, relocking the stale ones first (like ``uv
    sync``), and the sha256 of the file's bytes it was read from or written as; with
    ``frozen`` a stale lock is refused instead (exit 1), and a lock whose entry for one
    of those targets fails its checks is refused (exit 2) naming what is wrong. Without
    ``frozen``, such an entry is relocked like a stale one: what it holds is never
    installed."""
    from gpuenv.errors import CheckFailed
    from gpuenv.lock.format import load_lock

    own_folder(loaded.path)
    fresh = _fresh_name(loaded, lock_path, options, kb_digest)  # before the bytes are read
    reading = load_lock(lock_path, cache_dir=options.cache_dir, legacy_ok=not frozen)
    wanted = options.targets or tuple(loaded.spec.targets)
    if frozen and reading is not None:
        reading.require(wanted)
    if reading is not None and fresh is not None and _known_fresh(*fresh):
        return reading.lock, reading.digest
    relevant = out_of_date(loaded, knowledge, reading, kb_digest=kb_digest, options=options)
    if not relevant and reading is not None:
        if fresh is not None and _fresh_name(loaded, lock_path, options, kb_digest) == fresh:
            _remember_fresh(loaded, *fresh)  # no byte moved while it was checked
        return reading.lock, reading.digest
    if frozen:
        lines = [f"{name}: {'; '.join(why)}" for name, why in sorted(relevant.items())]
        raise CheckFailed(
            f"{lock_path} is out of date and --frozen forbids relocking:\n" + "\n".join(lines),
            hint="run 'gpuenv lock' (and commit gpuenv.lock)",
            details={"stale": relevant},
        )
    _require_rewritable(lock_path, relevant)
    if progress is not None and reading is not None:
        # like `uv sync`, but said: an install that relocks first takes longer, and
        # changes gpuenv.lock, which the user commits
        for name, why in sorted(relevant.items()):
            progress(f"{name}: {lock_path.name} is out of date ({'; '.join(why)}): relocking")
    relock = plan_relock(reading, loaded.spec, replace(options, targets=tuple(relevant)))
    result, _written = lock_and_write(
        loaded,
        knowledge(),
        relock,
        lock_path=lock_path,
        backends=backends,
        kb_digest=kb_digest,
        progress=progress,
    )
    return result.lock, result.digest


def _require_rewritable(lock_path: Path, stale: Mapping[str, Any]) -> None:
    """A lock that must be rewritten where it cannot be is refused before anything is
    resolved: a relock takes seconds to minutes, and its result was lost when the write
    failed at the end (a project mounted read-only in a container, a locked file)."""
    import os

    from gpuenv._fs import attribute_advice
    from gpuenv.errors import StorageError

    folder = lock_path.absolute().parent
    attribute = attribute_advice(str(lock_path.absolute()))  # the fix, as storage errors say it
    if attribute is None and (not folder.is_dir() or os.access(folder, os.W_OK)):
        return
    reason = "a chattr attribute refuses it" if attribute else f"{folder} is not writable here"
    targets = ", ".join(sorted(stale)) or "every target"
    raise StorageError(
        f"{lock_path} is out of date for {targets} and cannot be rewritten here: {reason}; "
        "nothing was resolved",
        path=str(lock_path),
        errno_name="EPERM" if attribute else "EACCES",
        hint=attribute
        or "relock where the project is writable ('gpuenv lock', then commit gpuenv.lock), "
        "or make it writable here",
    )


def _fresh_name(
    loaded: LoadedSpec, lock_path: Path, options: LockOptions, kb_digest: str
) -> tuple[str, str] | None:
    """(cache, name) of the ``lock --check --target ...`` of the same bytes and targets
    (``lock._fresh``): what ``ensure_lock`` checks is exactly that check, so a marker
    either leaves answers for both. None where no marker can answer: no cache, every
    target (that check also looks for dropped targets), a "detect" target, a lock
    elsewhere than beside the spec."""
    from gpuenv.lock import _fresh

    spec = loaded.spec
    if options.cache_dir is None or not options.targets or spec.uses_detect:
        return None
    if lock_path.absolute() != loaded.path.absolute().parent / _fresh.LOCK_FILENAME:
        return None
    overrides = (options.torch_index, options.index_url)
    return _fresh.check_name(
        options.cache_dir, str(loaded.path), kb_digest, options.targets, overrides
    )


def _known_fresh(cache: str, name: str) -> bool:
    from gpuenv.lock import _fresh

    return _fresh.known_fresh(cache, name)


def _remember_fresh(loaded: LoadedSpec, cache: str, name: str) -> None:
    from gpuenv.lock import _fresh
    from gpuenv.spec._local import project_files

    _fresh.remember_fresh(cache, name, project_files(loaded))


def own_folder(spec_file: Path) -> None:
    """A spec other than gpuenv.toml beside a gpuenv.toml would share its gpuenv.lock
    and its .gpuenv/ pointers (one project per folder): `gpuenv -f b.toml lock`
    replaced gpuenv.toml's lock with b.toml's targets. Refused (exit 2), before
    anything is written."""
    from gpuenv.errors import UsageError
    from gpuenv.lock.format import LOCK_FILENAME

    folder = spec_file.absolute().parent
    if spec_file.name == "gpuenv.toml" or not (folder / "gpuenv.toml").is_file():
        return
    raise UsageError(
        f"{spec_file} shares its folder with {folder / 'gpuenv.toml'}: the "
        f"{LOCK_FILENAME} there and the installed targets (.gpuenv/) are that spec's "
        "(one project per folder)",
        hint=f"move {spec_file.name} into a folder of its own (as gpuenv.toml there)",
    )


def lock_and_write(
    loaded: LoadedSpec,
    kb: KnowledgeBase,
    relock: Relock,
    *,
    lock_path: Path,
    backends: Callable[[], tuple[PipResolver, CondaSolver]] | None = None,
    kb_digest: str,
    progress: Progress | None = None,
    with_spec: Callable[[], None] | None = None,
) -> tuple[LockResult, bool]:
    """Lock what ``relock`` says (``plan_relock``) with ``backends`` (default: uv and
    rattler, ``lock.backends``) and write the file; True when its bytes changed.
    Otherwise the targets that locked are written and the others kept, but with
    ``with_spec`` (``add`` and ``remove``: ``loaded`` is their edit, not yet written,
    and ``with_spec`` writes it), only when every target locked (a lock holding the
    edit for some targets would belong to no spec), and ``with_spec()`` is called just
    before the lock's rename: a kill during the resolution leaves the old spec with the
    old lock, and only one between the two renames leaves them apart."""
    from gpuenv.lock.backends import resolvers
    from gpuenv.lock.format import write_lock_file

    own_folder(loaded.path)
    existing, options = relock.basis, relock.options
    pip, conda = (backends or resolvers)()
    index = options.index_url or loaded.spec.pip.index_url
    from gpuenv.lock._background import Background
    from gpuenv.lock._share import shared_pip

    shared = shared_pip(pip)  # one lock's: its pages serve the look at the newest torch
    pages = getattr(shared, "pages", None)
    # Two courtesy reads of the indexes' torch pages (a newer torch; builds the knowledge
    # base lacks) ask the canonical hosts: behind mirrors they are left out, as nothing
    # may go around a mirror (the resolution and the downloads go through it).
    around = bool(options.mirrors.entries)
    watch = Background(
        lambda: None if around else _newest_torch_on_index(pip, index, options.cache_dir, pages)
    )
    builds = Background(
        lambda: None if around else _remember_index_builds(pip, loaded.spec, options, kb)
    )
    result = lock_project(  # the resolution runs while the index is looked at
        loaded,
        kb,
        existing=existing,
        options=options,
        pip=shared,
        conda=conda,
        kb_digest=kb_digest,
        progress=progress,
    )
    settle = getattr(pip, "settle", None)
    if callable(settle):
        settle()  # a look-up waiting for the resolver's default index waits no more
    seen = watch.result(timeout=WATCH_GRACE)
    builds.result(timeout=WATCH_GRACE)
    notice = _newer_torch_notice(seen, kb)
    if notice:
        result = replace(result, warnings=(*result.warnings, notice))
    written = False
    # Every target failed: the file stays as it was, byte for byte (it was rewritten
    # with the new spec's hash over the old targets, a lock of a spec never locked).
    none_locked = bool(result.failures) and not any(c.status != "removed" for c in result.changes)
    held = with_spec is not None and bool(result.failures)
    if (result.lock.targets or existing is not None) and not none_locked and not held:
        wrote = write_lock_file(
            lock_path, result.lock, cache_dir=options.cache_dir, before_rename=with_spec
        )
        result, written = replace(result, digest=wrote.digest), wrote.written
    elif with_spec is not None and not result.failures:  # no lock to write: the spec alone
        with_spec()
    if result.failures:
        raise partial_lock_error(result, lock_path=lock_path, written=written, held=held)
    return result, written


def partial_lock_error(
    result: LockResult, *, lock_path: Path, written: bool, held: bool = False
) -> NetworkError:
    """One error for every target that could not be locked (exit 5), saying what was
    written: each failed target with its URL and fix, the locked ones by name (``held``:
    they were locked but not written, as ``lock_and_write(with_spec=...)`` does)."""
    locked = [c.target for c in result.changes if c.status != "removed"]
    kept = sorted(set(result.failures) & set(result.lock.targets))
    lines = []
    for name, exc in sorted(result.failures.items()):
        lines.append(f"target {name}: {exc.message}")
        if exc.extra.get("pypi_route"):  # the spec change that needs no torch index
            lines.append(f"  {exc.extra['pypi_route']}")
    if held:
        lines.append(
            f"{lock_path} unchanged"
            + (
                f": {', '.join(locked)} locked but not written, as every target must lock"
                if locked
                else ""
            )
        )
        kept = []
    elif locked and written:
        lines.append(f"wrote {lock_path} with {', '.join(locked)}")
    elif locked:
        lines.append(f"{lock_path} unchanged: {', '.join(locked)} locked as before")
    if kept:
        lines.append(f"kept the previous lock of {', '.join(kept)}")
    # Each fix once, however many targets failed the same way.
    hints = [part for exc in result.failures.values() for part in (exc.hint or "").split("; ")]
    if locked and not held:
        named = " ".join(f"--target {name}" for name in locked)  # every one that locked
        hints.append(f"meanwhile: gpuenv install {named}")
    first_name, first = sorted(result.failures.items())[0]
    return NetworkError(
        "\n".join(lines),
        cause=first.cause,
        url=first.url,
        target=first_name,
        hint="; ".join(dict.fromkeys(h for h in hints if h)) or None,
        stderr_tail=first.stderr_tail,
        extra={
            "lock": str(lock_path),
            "written": written,
            "locked": locked,
            "kept": kept,
            "failed": {
                name: {"cause": e.cause, "url": e.url, "message": e.message, "hint": e.hint}
                | {key: e.extra[key] for key in ("pypi_route", "proxy") if key in e.extra}
                for name, e in sorted(result.failures.items())
            },
        },
    )


def _newest_torch_on_index(
    resolver: PipResolver, index: str | None, cache_dir: Path | None, pages: Pages | None = None
) -> tuple[str, str] | None:
    """(index, newest torch there), read beside the resolution (at most hourly, when
    there is a cache); None when not known."""
    import time

    from gpuenv.lock.seen import newest_torch_on, recently_seen, record_newest_torch

    try:
        if index is None:
            ask = getattr(resolver, "default_index_url", None)
            index = ask() if callable(ask) else None
        if index is None:
            return None
        now = time.time()
        version = recently_seen(cache_dir, index, now) if cache_dir else None
        if version is None:
            version = newest_torch_on(index, pages=pages)
            if version and cache_dir is not None:
                record_newest_torch(cache_dir, index, version, now)
    except ExternalToolError:
        return None
    return (index, version) if version else None


def _remember_index_builds(
    resolver: PipResolver, spec: Spec, options: LockOptions, kb: KnowledgeBase
) -> None:
    """Keep in the cache the builds the torch index lists that ``kb`` lacks, for ``plan``
    (only beside a resolver that reads real indexes: one that can name its default index)."""
    import time

    from gpuenv.lock.index_builds import remember_index_builds
    from gpuenv.plan import DEFAULT_TORCH_INDEX
    from gpuenv.plan._seen import unknown_builds

    if not callable(getattr(resolver, "default_index_url", None)):
        return
    base = options.torch_index or spec.pip.torch_index or DEFAULT_TORCH_INDEX
    remember_index_builds(
        base, options.cache_dir, time.time(), keep=lambda found: unknown_builds(kb, found)
    )


def _newer_torch_notice(seen: tuple[str, str] | None, kb: KnowledgeBase) -> str | None:
    if seen is None:
        return None
    from packaging.version import Version  # a relock's only use: not loaded for install

    _index, version = seen
    newest = kb.newest_torch
    if newest is None or Version(version) <= newest.version:
        return None
    known = f"{newest.version.major}.{newest.version.minor}"
    from gpuenv.plan import FACTS_FILE

    return (
        f"torch {version} is on the index but this gpuenv's knowledge stops at {known}: "
        f"upgrade gpuenv or add the facts in {kb.facts_file or FACTS_FILE}"
    )
