"""`gpuenv install`: materialise targets from the lock into store prefixes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output, _progress
from gpuenv.errors import CheckFailed, UsageError

if TYPE_CHECKING:
    from gpuenv.editable.install import ProjectResult
    from gpuenv.install import InstallResult
    from gpuenv.knowledge import KnowledgeBase
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
    parser.add_argument(
        "--group",
        action="append",
        metavar="NAME",
        help="also install this dependency group (repeatable; 'dev' is installed by default)",
    )
    parser.add_argument("--all-groups", action="store_true", help="install every group")
    parser.add_argument("--no-dev", action="store_true", help="leave out the 'dev' group")
    _common.add_json_flag(parser)


def _groups(args: argparse.Namespace, spec: Spec) -> tuple[str, ...]:
    """The groups to install: ``dev`` unless ``--no-dev``, those ``--group`` names, or all."""
    from gpuenv.lock.extras import groups
    from gpuenv.names import normalize_name

    known = groups(spec)
    asked = [normalize_name(g) for g in args.group or ()]
    for name in asked:
        if name not in known:
            listed = ", ".join(known) or "none: add [pip.groups] to gpuenv.toml"
            raise UsageError(f"no dependency group {name!r} (groups: {listed})")
    if args.all_groups:
        return tuple(known)
    default = ["dev"] if "dev" in known and not args.no_dev else []
    return tuple(dict.fromkeys([*default, *asked]))


def _targets(
    args: argparse.Namespace, spec: Spec, names: list[str] | None = None
) -> tuple[str, ...]:
    names = names if names is not None else list(spec.targets)
    for name in args.target or ():
        _common.check_target(name, names)
    if args.target:
        return tuple(args.target)
    if args.all or len(names) == 1:
        return tuple(names)
    raise UsageError(
        f"this project has several targets ({', '.join(names)}): say which to install",
        hint=f"gpuenv install --target {names[0]} (or --all)",
    )


def run(args: argparse.Namespace) -> int:
    if args.archive is not None:
        return _install_from(args)
    from gpuenv.install import install_locked, record_lock_state
    from gpuenv.knowledge import knowledge_base
    from gpuenv.knowledge._data import data_digest
    from gpuenv.lock.format import LOCK_FILENAME
    from gpuenv.lock.options import LockOptions
    from gpuenv.lock.project import ensure_lock
    from gpuenv.spec import load_spec

    spec_file = _common.spec_path(args)
    # The knowledge base is loaded only if something needs it (a spec cache miss, a
    # relock, a "detect" target, --verify): a fresh lock installs without it.
    loaded = load_spec(spec_file, kb=knowledge_base, cache_dir=_common.cache_dir())
    targets = _targets(args, loaded.spec)
    from gpuenv import _foreign

    for name in targets:  # before any relock: a Mac's or a Windows target installs there
        target = loaded.spec.targets[name]
        _foreign.refuse(name, _foreign.platform_of(target.platform, target.gpu), "install")
    options = LockOptions.from_settings(_common.lock_settings(), loaded.spec, targets=targets)
    chosen = _groups(args, loaded.spec)
    with _progress.display(args) as progress:
        lock = ensure_lock(
            loaded,
            knowledge_base,
            lock_path=spec_file.parent / LOCK_FILENAME,
            options=options,
            frozen=args.frozen,
            kb_digest=data_digest(),
            progress=progress,
        )
        results = install_locked(
            _common.store(),
            loaded,
            lock,
            targets,
            groups=chosen,
            options=options,
            progress=progress,
        )
    record_lock_state(spec_file.parent.absolute(), lock, targets)
    project = str(spec_file.parent.absolute())
    verified = (
        _verify(project, results, lock, loaded.spec, knowledge_base(), args) if args.verify else {}
    )
    _render(results, verified, as_json=args.json)
    return 0 if all(verified.values()) else CheckFailed.exit_code


def _install_from(args: argparse.Namespace) -> int:
    """``--from FILE``: unpack the archive (checked) into the store's artifact cache, make
    this directory its project if it is none, and install from those files only."""
    from gpuenv import pack
    from gpuenv.cli._pack_progress import progress_display
    from gpuenv.install import install_target, is_current, record_lock_state, request_for
    from gpuenv.knowledge import knowledge_base
    from gpuenv.spec import load_spec

    if args.frozen:
        raise UsageError("--from always installs the archive's lock as it is: drop --frozen")
    spec_file = _common.spec_path(args)
    store = _common.store()
    results = []

    def installed(lock: Lock, packed: tuple[str, ...]) -> bool:
        """Every target asked for is installed already: no artifact needs reading."""
        names = args.target or packed
        targets = [lock.target(n) for n in names]
        return all(t is not None and is_current(store, t) for t in targets)

    with progress_display(bar=_progress.mode(args) == _progress.LIVE, lines=False) as report:
        unpacked = pack.unpack(
            args.archive, store, report, installed=installed, cache_dir=_common.cache_dir()
        )
    for name in args.target or ():  # before anything is written into the project
        _common.check_target(name, list(unpacked.targets))
    written = pack.place_project(unpacked, spec_file, _common.cache_dir())
    try:
        loaded = load_spec(spec_file, kb=knowledge_base, cache_dir=_common.cache_dir())
        for name in _targets(args, loaded.spec, list(unpacked.targets)):
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
    record_lock_state(spec_file.parent.absolute(), unpacked.lock, tuple(r.target for r in results))
    if written and not args.json:
        _output.err("wrote " + ", ".join(str(p) for p in written) + f" from {args.archive}")
    project = str(spec_file.parent.absolute())
    kb = knowledge_base() if args.verify else None
    verified = _verify(project, results, unpacked.lock, loaded.spec, kb, args) if kb else {}
    _render(results, verified, as_json=args.json)
    return 0 if all(verified.values()) else CheckFailed.exit_code


def _verify(
    project: str,
    results: list[InstallResult],
    lock: Lock,
    spec: Spec,
    kb: KnowledgeBase,
    args: argparse.Namespace,
) -> dict[str, bool]:
    """Run the probe in each installed prefix and record the outcome (gpuenv verify)."""
    from gpuenv import runtime
    from gpuenv._progress import Prefixed
    from gpuenv.verify.target import verify_locked

    outcome = {}
    for result in results:
        selected = runtime.select(project, result.target)  # the pointer install just set
        with _progress.display(args) as progress:
            verification = verify_locked(
                selected,
                lock.target(result.target),
                kb,
                spec.verify,
                progress=Prefixed(progress, f"{result.target}: "),
            )
        outcome[result.target] = verification.result.passed
    return outcome


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
