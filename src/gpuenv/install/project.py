"""``gpuenv install`` of a project: which targets and groups, the lock made fresh
(``lock.project.ensure_lock``, the one relock policy), each target installed
(``install_locked``) and ``gpuenv run``'s shortcut told (``record_lock_state``); and
``gpuenv install --from FILE``, from an archive of ``gpuenv pack``. The command renders
what these return; ``--verify`` is ``verify.target.verify_targets``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.errors import UsageError

if TYPE_CHECKING:
    from gpuenv.install.request import InstallResult, Progress
    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.lock.model import Lock
    from gpuenv.lock.options import LockSettings
    from gpuenv.spec import LoadedSpec, Spec
    from gpuenv.store import Store


@dataclass(frozen=True)
class ProjectInstall:
    """What an install did: the spec, the lock installed from, each target's result."""

    loaded: LoadedSpec
    lock: Lock
    results: tuple[InstallResult, ...]


def choose_targets(
    names: list[str], asked: Iterable[str] | None, *, every: bool
) -> tuple[str, ...]:
    """The targets to install of ``names``: those ``asked``, else all of them when
    ``every`` or there is one; several targets and none named is a usage error."""
    from gpuenv.spec import check_target

    asked = list(asked or ())
    for name in asked:
        check_target(name, names)
    if asked:
        return tuple(asked)
    if every or len(names) == 1:
        return tuple(names)
    raise UsageError(
        f"this project has several targets ({', '.join(names)}): say which to install",
        hint=f"gpuenv install --target {names[0]} (or --all)",
    )


def choose_groups(spec: Spec, asked: Iterable[str], *, every: bool, dev: bool) -> tuple[str, ...]:
    """The groups to install: ``dev`` (unless not ``dev``), those ``asked``, or all
    (``every``)."""
    from gpuenv.lock.extras import groups
    from gpuenv.names import normalize_name

    known = groups(spec)
    given_names = list(asked)
    wanted = [normalize_name(g) for g in given_names]
    for given, name in zip(given_names, wanted, strict=True):
        if name not in known:
            listed = ", ".join(known) or "none: add [pip.groups] to gpuenv.toml"
            # As typed: the normalised form of "../x" ("-/x") is no name the user gave.
            raise UsageError(f"no dependency group {given!r} (groups: {listed})")
    if every:
        return tuple(known)
    default = ["dev"] if "dev" in known and dev else []
    return tuple(dict.fromkeys([*default, *wanted]))


@dataclass(frozen=True)
class InstallAsk:
    """What ``gpuenv install`` is asked: the targets (``choose_targets``), the groups
    (``choose_groups``), and whether a stale lock is refused (``frozen``) or relocked."""

    targets: tuple[str, ...] = ()
    every: bool = False  # --all
    groups: tuple[str, ...] = ()
    all_groups: bool = False
    dev: bool = True  # not --no-dev
    frozen: bool = False


def install_spec_file(
    spec_file: Path,
    knowledge: Callable[[], KnowledgeBase],
    settings: LockSettings,
    store: Store,
    ask: InstallAsk,
    *,
    kb_digest: str,
    progress: Progress,
) -> ProjectInstall:
    """``gpuenv install``: the targets ``ask`` names of the project of ``spec_file``, from
    its lock, relocked first where it is stale (``lock.project.ensure_lock``)."""
    from gpuenv.install import headstart

    # uv makes the environment while the spec, the lock and the install's modules load
    headstart.begin(store, spec_file.parent, ask.targets)
    try:
        from gpuenv import _foreign
        from gpuenv.install.pipeline import install_locked, lock_inputs, record_lock_state
        from gpuenv.lock.format import LOCK_FILENAME
        from gpuenv.lock.options import LockOptions
        from gpuenv.lock.project import ensure_lock
        from gpuenv.spec import load_spec

        # The knowledge base is loaded only if something needs it (a spec cache miss, a
        # relock, a "detect" target): a fresh lock installs without it.
        loaded = load_spec(spec_file, kb=knowledge, cache_dir=settings.cache_dir)
        chosen = choose_targets(list(loaded.spec.targets), ask.targets, every=ask.every)
        for name in chosen:  # before any relock: a Mac's or a Windows target installs there
            target = loaded.spec.targets[name]
            _foreign.refuse(name, _foreign.platform_of(target.platform, target.gpu), "install")
        options = LockOptions.from_settings(settings, loaded.spec, targets=chosen)
        wanted = choose_groups(loaded.spec, ask.groups, every=ask.all_groups, dev=ask.dev)
        # A read-only project is refused only where it must be written: a relock writes
        # gpuenv.lock (that write says so), ``install_target`` checks before it builds
        # what a pointer would move to; one already installed and pointed at installs.
        lock, digest = ensure_lock(
            loaded,
            knowledge,
            lock_path=spec_file.parent / LOCK_FILENAME,
            options=options,
            frozen=ask.frozen,
            kb_digest=kb_digest,
            progress=progress,
        )
        results = install_locked(
            store, loaded, lock, chosen, groups=wanted, options=options, progress=progress
        )
        record_lock_state(
            spec_file.parent.absolute(), lock, chosen, digest=digest, inputs=lock_inputs(loaded)
        )
        return ProjectInstall(loaded, lock, tuple(results))
    finally:
        headstart.release()  # not taken (nothing to build, an error): uv killed, removed
