"""One install, in order: the platform check, the prefix under its file lock, then the
halves (``install.conda``, ``install.pip``), the toolkit, the builds and activation, the
completion marker last; the project editable over it; the project pointer."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv._fs import is_read_only, writing
from gpuenv._progress import Prefixed
from gpuenv.errors import InstallError, StorageError
from gpuenv.install.artifacts import fetch_artifacts, record_artifacts
from gpuenv.install.conda import install_conda
from gpuenv.install.pip import (
    VenvStarted,
    install_pip,
    make_venv,
    python_version,
    start_venv,
)
from gpuenv.install.request import InstallRequest, InstallResult, Progress, uv_binary, uv_env
from gpuenv.install.toolkit import cuda_home, jit_arch_list, write_activation
from gpuenv.lock.model import Lock, LockedTarget
from gpuenv.store import (
    STAGING,
    Store,
    check_project_writable,
    current_prefix,
    point_project,
)

if TYPE_CHECKING:
    from gpuenv._artifacts import ArtifactSources
    from gpuenv.builds.model import BuildOutcome
    from gpuenv.editable.install import ProjectResult
    from gpuenv.lock.options import LockOptions
    from gpuenv.spec import LoadedSpec


MACHINES = {"linux-64": ("x86_64", "amd64"), "linux-aarch64": ("aarch64", "arm64")}


def check_platform(target: LockedTarget) -> None:
    from gpuenv import _foreign

    _foreign.refuse(target.name, target.platform, "install")  # macOS/Windows: exit 2
    # os.uname: what platform.system() and .machine() read, without importing platform
    system, machine = os.uname().sysname, os.uname().machine.lower()
    if system != "Linux" or machine not in MACHINES.get(target.platform, ()):
        raise InstallError(
            f"target {target.name} is locked for {target.platform}; this machine is "
            f"{system} {machine}",
            hint="install the target that describes this machine (gpuenv install --target ...)",
        )


def _toolkit_of(request: InstallRequest) -> str | None:
    """The spec's toolkit; "auto" when a build needs nvcc and the spec names none."""
    builds = any(b.needs_toolkit for b in request.target.builds)
    project = request.local is not None and request.local.cuda and request.target.stack.cuda
    if request.toolkit is None and (builds or project):
        return "auto"
    return request.toolkit


def _build(
    prefix: Path, store: Store, request: InstallRequest, progress: Progress
) -> tuple[str, tuple[BuildOutcome, ...]]:
    _make_prefixes_dir(store, prefix)
    with store.using_artifacts():  # gc prunes no artifact or tool-cache entry meanwhile
        return _build_prefix(prefix, store, request, progress)


def _build_prefix(
    prefix: Path, store: Store, request: InstallRequest, progress: Progress
) -> tuple[str, tuple[BuildOutcome, ...]]:
    target = request.target
    left_out = _left_out(request)
    if left_out:  # the dependency groups not asked for
        target = replace(target, pip=tuple(p for p in target.pip if p.name not in left_out))
    uv = uv_binary(request)
    env = uv_env(store, request)
    if not target.conda:
        sources = _fetch_into_venv(prefix, store, request, progress, target, uv, env)
        request = replace(request, sources=sources)
    else:
        request = replace(request, sources=fetch_artifacts(store, request, progress, target))
        progress(f"{target.name}: linking {len(target.conda)} conda packages")
        install_conda(prefix, target.conda, store.cache("rattler"), request)
        if any(c.name == "python" for c in target.conda):
            if not (prefix / "bin" / "python").exists():
                raise InstallError(f"conda's python package left no bin/python in {prefix}")
        else:  # conda tools beside a virtual environment ([conda] python = false)
            make_venv(prefix, target.stack.python, uv, env, allow_existing=True)
    record_artifacts(prefix, request.sources)
    progress(f"{target.name}: installing {len(target.pip)} pip packages")
    install_pip(prefix, target, uv, env, request, meanwhile=lambda: _ready_finishing(target))
    from gpuenv.editable.shims import write_pip_shims

    write_pip_shims(prefix)  # pip here refuses instead of reaching another environment
    python = python_version(prefix)
    locked = target.stack.python
    if not (python == locked or python.startswith(locked + ".")):
        raise InstallError(f"the prefix's Python is {python}, the lock says {locked}")
    home = cuda_home(prefix, target, _toolkit_of(request))
    outcomes: tuple[BuildOutcome, ...] = ()
    if target.builds:
        from gpuenv.builds.install import Tools, install_builds

        hashes = {p.name: p.sha256 for p in target.pip}
        outcomes = install_builds(
            prefix,
            store,
            target.builds,
            hashes,
            Tools(uv, env, home, request.sources),
            Prefixed(progress, f"{target.name}: "),
        )
    write_activation(prefix, store, request, home)
    return python, outcomes


# What the steps after the pip install import: the pip shims, the activation scripts and
# the shells' entry points.
_FINISHING = ("gpuenv.editable.shims", "gpuenv.activation", "gpuenv.shells")


def _ready_finishing(target: LockedTarget) -> None:
    """The modules of the steps after the pip install, imported while uv installs: on a
    warm install this process only waits for uv's 20 ms, and on two cores the 3-4 ms of
    these imports then cost nothing (they need nothing uv writes). For a CUDA target,
    its activation's TORCH_CUDA_ARCH_LIST too (cuda.toml read and the builds model
    imported, about 3 ms; kept for ``write_activation``)."""
    import importlib

    for name in _FINISHING:
        importlib.import_module(name)
    jit_arch_list(target)


def _fetch_into_venv(
    prefix: Path,
    store: Store,
    request: InstallRequest,
    progress: Progress,
    target: LockedTarget,
    uv: Path,
    env: dict[str, str],
) -> ArtifactSources:
    """The target's artifacts fetched and its virtual environment made. uv makes the
    environment while the fetch checks the store (on a warm install that check is all
    the fetch does, and uv's 13-15 ms were spent waiting before); it is waited for
    before the first download, whose wheels the early runs (``install.early``) unpack
    with its interpreter as the fetch stores them, or after the fetch when nothing was
    downloaded."""
    from gpuenv.install.early import early_wheels

    progress(f"{target.name}: creating the Python {target.stack.python} environment")
    venv: VenvStarted | None = None
    try:
        venv = start_venv(prefix, target.stack.python, uv, env)
        started = venv
        with early_wheels(prefix, target.pip, uv, env) as early:

            def before_download(download: int | None) -> None:
                started.wait()
                early.expect(download)

            sources = fetch_artifacts(
                store,
                request,
                progress,
                target,
                on_stored=early.stored,
                before_download=before_download,
            )
        venv.wait()  # once only: a second wait gives the first's outcome
    except BaseException:
        if venv is not None:
            venv.abandon()  # the prefix is discarded next: nobody may be writing into it
        raise
    return sources


def _left_out(request: InstallRequest) -> set[str]:
    from gpuenv.lock.extras import left_out

    return left_out(request.target.groups, request.groups) if request.target.groups else set()


def _chosen_groups(request: InstallRequest) -> tuple[str, ...]:
    return tuple(sorted(g for g in set(request.groups) if g in request.target.groups))


def _install_project(
    prefix: Path, store: Store, request: InstallRequest, progress: Progress
) -> ProjectResult | None:
    """The project, editable, over the installed prefix (rebuilt when its tree changed)."""
    if request.local is None:
        return None
    from gpuenv.builds.install import Tools
    from gpuenv.editable.install import install_project

    toolkit = _toolkit_of(request)
    home = cuda_home(prefix, request.target, toolkit)
    return install_project(
        prefix,
        store,
        request.local,
        request.local_build,
        request.target,
        Tools(uv_binary(request), uv_env(store, request), home, request.sources),
        toolkit=toolkit,
        progress=Prefixed(progress, f"{request.target.name}: "),
    )


def _make_prefixes_dir(store: Store, prefix: Path) -> None:
    try:
        with writing(prefix.parent, "the store's prefixes directory"):
            prefix.parent.mkdir(parents=True, exist_ok=True)
            # Made with the store, not by its first gc: a gc whose own folder took
            # 4 KiB said it freed 4 KiB more than the disk gained.
            (store.root / "trash").mkdir(exist_ok=True)
            # Named as a staging folder: one a Ctrl-C leaves between the two calls is
            # removed by gc once it is a day old (a dot name is no prefix to list).
            probe = prefix.parent / f"{STAGING}write-test-{prefix.name}"
            try:
                probe.mkdir(exist_ok=True)
            finally:
                with contextlib.suppress(OSError):
                    probe.rmdir()
    except StorageError as exc:
        if not is_read_only(exc):
            raise
        raise StorageError(
            f"the store {store.root} is read-only here: target {prefix.name} cannot be "
            "built on this machine",
            path=str(prefix.parent),
            errno_name=exc.errno_name,
            hint="install it where the store is mounted read-write; this machine can then "
            "attach and verify it (gpuenv install, gpuenv verify)",
        ) from None


def _runnable(prefix: Path) -> bool:
    """The environment delta ``gpuenv run`` applies is there and well formed (a marked
    prefix whose delta was damaged later is rebuilt, as its refusal says)."""
    from gpuenv import _envdelta, _fs
    from gpuenv.errors import FileFormatError

    try:
        delta = _fs.load_json(prefix / "etc" / "gpuenv" / "env-delta.json")
        _envdelta.checked_ops(delta)  # type: ignore[arg-type]
    except (OSError, FileFormatError):
        return False
    return True


def is_current(store: Store, target: LockedTarget) -> bool:
    """Whether ``target`` is installed as locked in ``store`` (checked as install
    checks it: the marker names its content hash and its run-time delta is sound)."""
    prefix = store.prefix_for(target.name, target.content_hash)
    return store.is_installed(prefix, target.content_hash) and _runnable(prefix)


def install_target(
    store: Store, request: InstallRequest, progress: Progress | None = None
) -> InstallResult:
    """Install ``request.target`` (or reuse it when already installed) and point the
    project at it."""
    report = progress or (lambda _message: None)
    started = time.perf_counter()
    target = request.target
    check_platform(target)
    lock_hash = target.content_hash
    from gpuenv.editable.state import prefix_key

    prefix = store.prefix_for(
        target.name, prefix_key(lock_hash, request.local, _chosen_groups(request))
    )
    with store.locked(prefix):
        if current_prefix(request.project, target.name) != prefix:  # point_project moves it
            # before anything is fetched or built: a read-only project failed on the
            # pointer only after the build (one already pointed here writes nothing)
            check_project_writable(request.project.absolute())
        built = not store.is_installed(prefix, lock_hash) or not _runnable(prefix)
        outcomes: tuple[BuildOutcome, ...] = ()
        if built:
            store.discard(prefix)  # an interrupted build, if anything is there
            try:
                python, outcomes = _build(prefix, store, request, report)
            except BaseException:
                store.discard_quietly(prefix)  # never leave a half-built prefix behind
                raise
            try:
                store.mark_installed(
                    prefix,
                    lock_hash=lock_hash,
                    target=target.name,
                    python=python,
                    cuda=target.stack.cuda,
                    groups=_chosen_groups(request),
                )
            except BaseException:
                store.discard_quietly(prefix)
                raise
        project = _install_project(prefix, store, request, report)
        if project is not None:  # a virtual project has no record: nothing noted
            from gpuenv.editable.install import record_checkout

            record_checkout(prefix, request.project.absolute())
        previous = point_project(store, request.project, target.name, prefix)
    seconds = time.perf_counter() - started
    return InstallResult(target.name, prefix, built, previous, seconds, outcomes, project)


def record_lock_state(
    project: Path,
    lock: Lock,
    installed: tuple[str, ...],
    *,
    digest: str,
    inputs: tuple[Path, ...] | None = None,
) -> None:
    """Tell ``gpuenv run`` which content hash each target has in this lock, keyed by
    ``digest``, the sha256 of the lock file's bytes ``lock`` was read from or written as
    (``LockReading.digest``, ``LockWrite.digest``), so it can compare without parsing the
    lock; and drop the rollback of each target just installed: it follows the lock
    again. ``inputs``: the lock's input files (``lock_inputs``), whose change since
    this install ``gpuenv run`` reports."""
    from gpuenv import _marker

    _marker.write_lock_state(
        str(project),
        digest=digest,
        targets={name: t.content_hash for name, t in lock.targets.items()},
        rollback=dict.fromkeys(installed),
        inputs=None
        if inputs is None
        else _marker.input_stamps([str(p) for p in inputs], str(project)),
    )


def install_locked(
    store: Store,
    loaded: LoadedSpec,
    lock: Lock,
    targets: tuple[str, ...],
    *,
    groups: tuple[str, ...],
    options: LockOptions,
    progress: Progress,
) -> list[InstallResult]:
    """Install ``targets`` of a fresh ``lock`` of the project ``loaded``, with the indexes
    and mirrors ``options`` locked them from (``gpuenv install``, ``add`` and ``remove``)."""
    from gpuenv._artifacts import ArtifactSources
    from gpuenv.install.request import request_for

    results = []
    for name in targets:
        locked = lock.target(name)
        assert locked is not None  # the caller locked every requested target
        sources = ArtifactSources(mirrors=options.mirrors)
        request = request_for(loaded, locked, options, sources, groups=groups)
        results.append(install_target(store, request, progress))
    return results


def lock_inputs(loaded: LoadedSpec) -> tuple[Path, ...]:
    """The files a lock of ``loaded`` is made from: the spec and its project's files."""
    from gpuenv.spec._local import project_files

    return (loaded.path.absolute(), *(p.absolute() for p in project_files(loaded)))
