"""`gpuenv lock`: write or check gpuenv.lock beside gpuenv.toml."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output, _progress

# PEP 508's project name (case-insensitive, as uv reads --upgrade-package's names)
_PROJECT_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")

if TYPE_CHECKING:
    from gpuenv.lock.format import LockReading
    from gpuenv.lock.model import Lock
    from gpuenv.lock.options import LockOptions
    from gpuenv.lock.project import LockResult
    from gpuenv.spec import LoadedSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-t",
        "--target",
        action="append",
        metavar="NAME",
        help="relock only this target (repeatable); the others stay byte for byte",
    )
    # --check writes nothing and moves no pin; --upgrade moves every pin, -P one
    moves = parser.add_mutually_exclusive_group()
    moves.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the lock is missing or out of date (no network, writes nothing)",
    )
    moves.add_argument(
        "--upgrade", action="store_true", help="move pins forward instead of keeping them"
    )
    moves.add_argument(
        "-P",
        "--upgrade-package",
        action="append",
        metavar="NAME",
        help="move this package's pin forward, keeping the others (repeatable)",
    )
    _common.add_json_flag(parser)


def _fresh_key(args: argparse.Namespace) -> tuple[str, str] | None:
    """(gpuenv's cache, the name of this check of these bytes) for ``lock._fresh``."""
    from gpuenv.knowledge._data import data_digest
    from gpuenv.lock import _fresh

    cache = _common.cache_dir()
    digest = _fresh.check_digest(data_digest())
    name = _fresh.key(str(_common.spec_path(args)), digest, args.target) if cache else None
    return (str(cache), name) if cache and name else None


def _say_fresh(args: argparse.Namespace, lock_path: str) -> int:
    if args.json:
        _output.emit_json({"lock": lock_path, "fresh": True, "stale": {}})
    else:
        _output.err(f"{lock_path} is up to date")
    return 0


def run(args: argparse.Namespace) -> int:
    fresh = _fresh_key(args) if args.check else None
    if fresh is not None:
        from gpuenv.lock import _fresh

        if _fresh.known_fresh(*fresh):  # these bytes were found fresh before: say so
            return _say_fresh(args, str(_common.spec_path(args).parent / _fresh.LOCK_FILENAME))
    return _run(args, fresh)


def _run(args: argparse.Namespace, fresh: tuple[str, str] | None) -> int:
    from gpuenv.knowledge import knowledge_base
    from gpuenv.knowledge._data import data_digest
    from gpuenv.lock.format import LOCK_FILENAME, load_lock
    from gpuenv.lock.options import LockOptions
    from gpuenv.lock.project import lock_and_write, plan_relock, read_for_relock
    from gpuenv.names import normalize_name
    from gpuenv.spec import load_spec

    spec_file = _common.spec_path(args)
    # The knowledge base loads only when needed: a spec checked before is cached, and
    # `lock --check` plans nothing (but "detect" targets).
    loaded = load_spec(spec_file, kb=knowledge_base, cache_dir=_common.cache_dir())
    for name in args.target or ():
        _common.check_target(name, list(loaded.spec.targets))
    lock_path = spec_file.parent / LOCK_FILENAME
    if args.check:  # a lock that cannot be read is an error here, not something to fix
        reading = load_lock(lock_path, cache_dir=_common.cache_dir(), legacy_ok=True)
        unreadable = None
    else:
        reading, unreadable = read_for_relock(lock_path, cache_dir=_common.cache_dir())
    options = LockOptions.from_settings(
        _common.lock_settings(),
        loaded.spec,
        targets=tuple(args.target) if args.target else None,
        upgrade=args.upgrade,
        upgrade_packages=tuple(normalize_name(n) for n in args.upgrade_package or ()),
    )
    digest = data_digest()
    if args.check:
        return _check(args, loaded, reading, options, digest, str(lock_path), fresh)
    if unreadable is not None:
        _output.err(
            f"gpuenv: warning: {unreadable.message}: writing a new gpuenv.lock for every "
            "target (nothing in the old one could be kept)"
        )
    kb = knowledge_base()
    relock = plan_relock(reading, loaded.spec, options, start_over=unreadable is not None)
    _check_upgrade_packages(args.upgrade_package or (), relock.basis, options, lock_path)
    for name, problems in relock.forced.items():
        _output.err(
            f"gpuenv: warning: target {name} in {lock_path} is relocked: {'; '.join(problems)}"
        )
    with _progress.display(args) as progress:
        result, written = lock_and_write(
            loaded,
            kb,
            relock,
            lock_path=lock_path,
            kb_digest=digest,
            progress=progress,
        )
    _render(
        result, lock_path=str(lock_path), written=written, as_json=args.json, took=progress.elapsed
    )
    return 0


def _check_upgrade_packages(
    given: Iterable[str], existing: Lock | None, options: LockOptions, lock_path: Path
) -> None:
    """Each --upgrade-package is a package name (a requirement such as "idna>=3" is
    refused), and one the lock does not pin is said: a typo moved nothing, silently."""
    from gpuenv.errors import UsageError
    from gpuenv.names import normalize_name

    for name in given:
        if not _PROJECT_NAME.match(name):
            raise UsageError(
                f"--upgrade-package {name!r}: not a package name",
                hint="name the package alone (--upgrade-package idna); version limits go "
                "in gpuenv.toml",
            )
    if existing is None:
        return  # nothing is kept: every pin moves anyway
    targets = [
        existing.targets[n] for n in options.targets or existing.targets if n in existing.targets
    ]
    locked = {p.name for t in targets for p in t.pip} | {b.name for t in targets for b in t.builds}
    unknown = [n for n in given if normalize_name(n) not in locked]
    if unknown:  # a warning: a requirement new in the spec is not locked yet
        scope = f" for {', '.join(options.targets)}" if options.targets else ""
        _output.err(
            f"gpuenv: warning: --upgrade-package {', '.join(unknown)}: not locked in "
            f"{lock_path}{scope}: nothing of it to move (check the spelling)"
        )


def _check(
    args: argparse.Namespace,
    loaded: LoadedSpec,
    reading: LockReading | None,
    options: LockOptions,
    digest: str,
    lock_path: str,
    fresh: tuple[str, str] | None,
) -> int:
    """``--check`` (``lock.inputs.check_lock``), then, when it is fresh, the cache's note
    of it (``lock._fresh``): nothing else is written."""
    from gpuenv.knowledge import knowledge_base
    from gpuenv.lock.inputs import check_lock

    check_lock(
        loaded, knowledge_base, reading, kb_digest=digest, options=options, lock_path=lock_path
    )
    # Noted only when no byte moved while it was checked, and no plan is this machine's.
    if fresh is not None and not loaded.spec.uses_detect and _fresh_key(args) == fresh:
        from gpuenv.lock import _fresh
        from gpuenv.spec._local import project_files

        _fresh.remember_fresh(*fresh, project_files(loaded))
    return _say_fresh(args, lock_path)


def _render(
    result: LockResult, *, lock_path: str, written: bool, as_json: bool, took: float
) -> None:
    if as_json:
        _output.emit_json(
            {
                "lock": lock_path,
                "written": written,
                "targets": {c.target: c.to_json() for c in result.changes},
                "warnings": list(result.warnings),
                "seconds": round(took, 3),
            }
        )
        return
    for warning in result.warnings:
        _output.err(f"warning: {warning}")
    for change in result.changes:
        locked = result.lock.target(change.target)
        size = f" ({len(locked.pip)} pip, {len(locked.conda)} conda)" if locked else ""
        _output.out(f"{change.target}: {change.status}{size}")
        for package in change.packages:
            _output.out(f"  {package.name}: {package.before or '-'} -> {package.after or '-'}")
    count = len(result.changes)
    done = f"locked {count} target{'s' if count != 1 else ''} in {took:.1f} s"
    _output.out(f"wrote {lock_path} ({done})" if written else f"{lock_path} unchanged ({done})")
