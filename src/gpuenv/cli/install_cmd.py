"""`gpuenv install`: materialise targets from the lock into store prefixes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output, _progress
from gpuenv.errors import CheckFailed, UsageError

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.editable.install import ProjectResult
    from gpuenv.install import InstallResult
    from gpuenv.lock.model import Lock
    from gpuenv.spec import Spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-t", "--target", action="append", metavar="NAME", help="install this target (repeatable)"
    )
    parser.add_argument("--all", action="store_true", help="install every target")
    parser.add_argument(
        "--frozen", action="store_true", help="refuse (exit 1) when the lock is out of date"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="then verify each installed target on this machine (exit 1 if one fails)",
    )
    parser.add_argument(
        "--from",
        dest="archive",
        metavar="FILE",
        type=Path,
        help="install from an archive of gpuenv pack, without network (hash-checked)",
    )
    _common.add_group_flags(parser, verb="install")
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.archive is not None:
        return _install_from(args, settings)
    from gpuenv.install.project import InstallAsk, install_spec_file
    from gpuenv.knowledge import knowledge_base
    from gpuenv.knowledge._data import data_digest

    spec_file = _common.spec_path(args)
    ask = InstallAsk(
        targets=tuple(args.target or ()),
        every=args.all,
        groups=tuple(args.group or ()),
        all_groups=args.all_groups,
        dev=not args.no_dev,
        frozen=args.frozen,
    )
    with _common.spec_unedited(settings, spec_file), _progress.display(args) as progress:
        done = install_spec_file(
            spec_file,
            knowledge_base,
            settings.lock,
            settings.store(),
            ask,
            kb_digest=data_digest(),
            progress=progress,
        )
    results = list(done.results)
    verified = _verify(spec_file, results, done.lock, done.loaded.spec, args) if args.verify else {}
    _render(results, verified, as_json=args.json)
    return 0 if all(verified.values()) else CheckFailed.exit_code


def _install_from(args: argparse.Namespace, settings: Settings) -> int:
    """``--from FILE``: unpack the archive (checked) into the store's artifact cache, make
    this directory its project if it is none, and install from those files only."""
    from gpuenv import pack
    from gpuenv.cli._pack_progress import progress_display
    from gpuenv.install import install_target, is_current, record_lock_state, request_for
    from gpuenv.install.project import choose_targets
    from gpuenv.knowledge import knowledge_base
    from gpuenv.lock.format import lock_digest
    from gpuenv.spec import load_spec

    if args.frozen:
        raise UsageError("--from always installs the archive's lock as it is: drop --frozen")
    spec_file = _common.spec_path(args)
    store = settings.store()
    results = []

    def installed(lock: Lock, packed: tuple[str, ...]) -> bool:
        """Every target asked for is installed already: no artifact needs reading."""
        names = args.target or packed
        targets = [lock.target(n) for n in names]
        return all(t is not None and is_current(store, t) for t in targets)

    with progress_display(bar=_progress.mode(args) == _progress.LIVE, lines=False) as report:
        unpacked = pack.unpack(
            args.archive, store, report, installed=installed, cache_dir=settings.cache_dir
        )
    for name in args.target or ():  # before anything is written into the project
        _common.check_target(name, list(unpacked.targets))
    written = pack.place_project(unpacked, spec_file, settings.cache_dir)
    try:
        loaded = load_spec(spec_file, kb=knowledge_base, cache_dir=settings.cache_dir)
        for name in choose_targets(list(unpacked.targets), args.target, every=args.all):
            locked = unpacked.lock.target(name)
            assert locked is not None  # unpack checked every packed target against the lock
            request = request_for(loaded, locked, None, unpacked.sources())
            with _progress.display(args) as progress:
                results.append(install_target(store, request, progress))
    except BaseException:
        if not results:  # refused before anything was installed: the project is as it was
            for path in written:
                path.unlink(missing_ok=True)
        raise
    done = tuple(r.target for r in results)
    digest = lock_digest(unpacked.lock)  # the archive's lock, as place_project wrote or found it
    record_lock_state(spec_file.parent.absolute(), unpacked.lock, done, digest=digest)
    if written and not args.json:
        _output.err("wrote " + ", ".join(str(p) for p in written) + f" from {args.archive}")
    verified = _verify(spec_file, results, unpacked.lock, loaded.spec, args) if args.verify else {}
    _render(results, verified, as_json=args.json)
    return 0 if all(verified.values()) else CheckFailed.exit_code


def _verify(
    spec_file: Path, results: list[InstallResult], lock: Lock, spec: Spec, args: argparse.Namespace
) -> dict[str, bool]:
    """``--verify``: run the probe in each installed prefix and record the outcome."""
    from gpuenv.knowledge import knowledge_base
    from gpuenv.verify.target import verify_targets

    project = str(spec_file.parent.absolute())
    with _progress.display(args) as progress:
        return verify_targets(
            project,
            [r.target for r in results],
            lock,
            knowledge_base(),
            spec.verify,
            progress=progress,
        )


def _render(results: list[InstallResult], verified: dict[str, bool], *, as_json: bool) -> None:
    if as_json:
        _output.emit_json(
            {
                "targets": {
                    r.target: {
                        "prefix": str(r.prefix),
                        "built": r.built,
                        "previous": str(r.previous) if r.previous else None,
                        "seconds": round(r.seconds, 3),
                        "verified": verified.get(r.target),
                        "builds": [b.to_json() for b in r.builds],
                        "project": r.project.to_json() if r.project else None,
                    }
                    for r in results
                }
            }
        )
        return
    for r in results:
        state = f"installed in {r.seconds:.1f} s" if r.built else "already installed"
        _output.out(f"{r.target}: {state}: {r.prefix}")
        if r.previous:
            _output.out(f"  previous generation kept: {r.previous} (gpuenv rollback)")
        for b in r.builds:
            how = "from the build cache" if b.cached else f"built in {b.seconds:.1f} s"
            _output.out(f"  {b.name} {b.version}: {how} ({b.identity[:19]}...)")
        if r.project is not None:
            _output.out(f"  project {r.project.name}: {_project_state(r.project)}")
        if r.target in verified:
            verdict = "verified on this machine" if verified[r.target] else "NOT verified"
            _output.out(f"  {verdict} (details: gpuenv verify --target {r.target})")


def _project_state(project: ProjectResult) -> str:
    if not project.built:
        return "editable, up to date"
    build = project.outcome
    if build is None:
        return "editable"
    how = "from the build cache" if build.cached else f"built in {build.seconds:.1f} s"
    return f"installed editable ({how})"
