"""`gpuenv lock`: write or check gpuenv.lock beside gpuenv.toml."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output, _progress

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.lock.model import Lock, LockedTarget
    from gpuenv.lock.project import LockRun


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


def _fresh_key(args: argparse.Namespace, settings: Settings) -> tuple[str, str] | None:
    """(gpuenv's cache, the name of this check of these bytes) for ``lock._fresh``."""
    from gpuenv.knowledge._data import data_digest
    from gpuenv.lock import _fresh

    spec = str(_common.spec_path(args))
    # The variables as given, not checked: the check's import of the URL rules would cost
    # every fast answer (an invalid value has no note; the full check refuses it).
    overrides = tuple(_common.env_override(n) for n in ("GPUENV_TORCH_INDEX", "GPUENV_INDEX_URL"))
    return _fresh.check_name(settings.cache_dir, spec, data_digest(), args.target, overrides)


def _say_fresh(args: argparse.Namespace, lock_path: str) -> int:
    if args.json:
        _output.emit_json({"lock": lock_path, "fresh": True, "stale": {}})
    else:
        _output.err(f"{lock_path} is up to date")
    return 0


def run(args: argparse.Namespace, settings: Settings) -> int:
    fresh = _fresh_key(args, settings) if args.check else None
    if fresh is not None:
        from gpuenv.lock import _fresh

        if _fresh.known_fresh(*fresh):  # these bytes were found fresh before: say so
            return _say_fresh(args, str(_common.spec_path(args).parent / _fresh.LOCK_FILENAME))
    targets = tuple(args.target) if args.target else None
    if args.check:
        from gpuenv.knowledge import knowledge_base
        from gpuenv.knowledge._data import data_digest
        from gpuenv.lock.inputs import check_spec_file

        lock_path = check_spec_file(
            _common.spec_path(args),
            knowledge_base,
            settings.lock,
            targets=targets,
            kb_digest=data_digest(),
            fresh=fresh,
        )
        return _say_fresh(args, str(lock_path))
    spec_file = _common.spec_path(args)
    said: list[str] = []  # what the lock warned of as it ran (a -P name nothing pins)

    def warn(text: str) -> None:
        said.append(text)
        _output.err(f"gpuenv: warning: {text}")

    from gpuenv.lock import headstart

    try:
        # First, before the lock's modules load: the uv runs the last lock of these bytes
        # made, begun now (taken only where the lock asks for the very same; an edit that
        # lands meanwhile makes them runs nobody takes). A plain `gpuenv lock` began
        # them before its command line was parsed (cli._fastlock): nothing to do here.
        options = headstart.lock_options(targets, args.upgrade, args.upgrade_package)
        cache = settings.cache_dir
        headstart.begin(headstart.recipe_path(cache, spec_file, options) if cache else None)
        from gpuenv.knowledge import knowledge_base
        from gpuenv.knowledge._data import data_digest

        with _common.spec_unedited(settings, spec_file), _progress.display(args) as progress:
            from gpuenv.lock.project import LockAsk, lock_spec_file

            ask = LockAsk(targets, args.upgrade, tuple(args.upgrade_package or ()))
            done = lock_spec_file(
                spec_file,
                knowledge_base,
                settings.lock,
                ask,
                kb_digest=data_digest(),
                warn=warn,
                progress=progress,
            )
        headstart.save()
    except KeyboardInterrupt:
        headstart.release(interrupted=True)
        raise
    finally:
        headstart.release()
    _render(done, as_json=args.json, took=progress.elapsed, said=said)
    return 0


def _build_names(lock: Lock, name: str) -> list[str]:
    target = lock.target(name)
    return sorted(build.name for build in target.builds) if target else []


def _builds(target: LockedTarget) -> str:
    """The packages compiled at install, named: the lock's other lines count wheels, and
    a build needs a compiler (and minutes) on the machine that installs."""
    names = sorted(build.name for build in target.builds)
    if not names:
        return ""
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"; {len(names)} built at install: {shown}"


def _render(run: LockRun, *, as_json: bool, took: float, said: list[str]) -> None:
    result, lock_path, written = run.result, str(run.lock_path), run.written
    if as_json:
        _output.emit_json(
            {
                "lock": lock_path,
                "written": written,
                "targets": {
                    # "builds": the packages compiled at install (none: an empty list)
                    c.target: {**c.to_json(), "builds": _build_names(result.lock, c.target)}
                    for c in result.changes
                },
                # a script reads them here: what was said on stderr as the lock ran too
                "warnings": [*said, *result.warnings],
                "seconds": round(took, 3),
            }
        )
        return
    for warning in result.warnings:
        _output.err(f"warning: {warning}")
    for change in result.changes:
        locked = result.lock.target(change.target)
        size = (
            f" ({len(locked.pip)} pip, {len(locked.conda)} conda{_builds(locked)})"
            if locked
            else ""
        )
        # Updated with no package moved: the spec's words changed (a requirement's text,
        # an index), and the lock records them; said, since no line below says anything.
        same = (
            "; the requirements changed, the packages did not"
            if (change.status == "updated" and not change.packages)
            else ""
        )
        _output.out(f"{change.target}: {change.status}{size}{same}")
        for package in change.packages:
            _output.out(f"  {package.name}: {package.before or '-'} -> {package.after or '-'}")
    count = len(result.changes)
    done = f"locked {count} target{'s' if count != 1 else ''} in {took:.1f} s"
    moved = any(c.status != "unchanged" for c in result.changes)
    if written:
        _output.out(f"wrote {lock_path} ({done})")
    elif moved:  # the bytes were there already: another gpuenv (an install) wrote them
        _output.out(f"{lock_path} already held this lock, written meanwhile ({done})")
    else:
        _output.out(f"{lock_path} unchanged ({done})")
