"""What one install asks (``InstallRequest``, made by ``request_for`` from the project,
its lock and the settings lock ran with), what it did (``InstallResult``), and what the
tools it runs are given (uv, its environment) and what their failures mean."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv._artifacts import ArtifactSources
from gpuenv._fs import os_error_in, storage_error
from gpuenv._network import (
    Index,
    index_of,
    network_error,
    pip_indexes,
)
from gpuenv._redact import redact
from gpuenv.errors import NetworkError, StorageError
from gpuenv.lock._uv_output import classify
from gpuenv.lock.model import LockedTarget
from gpuenv.store import Store

if TYPE_CHECKING:
    from gpuenv.builds.model import BuildOutcome
    from gpuenv.editable.install import ProjectResult
    from gpuenv.lock.options import LockOptions
    from gpuenv.spec import BuildOptions, LoadedSpec, LocalProject, Spec


Progress = Callable[[str], None]


@dataclass(frozen=True)
class InstallRequest:
    """What one install asks (``request_for`` makes it): the locked target and its project,
    the toolkit and uv, where artifacts come from and with which credentials, and the
    project installed editable with its dependency groups."""

    target: LockedTarget
    project: Path  # the directory holding gpuenv.toml (its .gpuenv/ gets the pointers)
    env_name: str  # shown in the shell prompt
    toolkit: str | None = None  # [stack] toolkit: None, "auto", "12.4" or "system:/path"
    uv: Path | None = None  # the uv binary (default: the one the uv package ships)
    # Where each locked URL is fetched from (install --from: files unpacked from an archive).
    sources: ArtifactSources = field(default_factory=ArtifactSources)
    offline: bool = False  # uv may not reach the network (install --from)
    # The indexes the lock was made from, with credentials (``request_for``).
    indexes: tuple[Index, ...] = ()
    channels: tuple[str, ...] = ()  # the spec's conda channels, for their credentials
    # The project installed editable after the locked packages ([project] path), and its
    # [pip.build.<name>] options; the dependency groups installed (gpuenv.lock.extras).
    local: LocalProject | None = None
    local_build: BuildOptions | None = None
    groups: tuple[str, ...] = ()

    @property
    def all_indexes(self) -> tuple[Index, ...]:
        """The lock's indexes and the mirrors, each with its credentials."""
        return self.indexes + self.sources.mirrors.indexes()


@dataclass(frozen=True)
class InstallResult:
    """What one install did: the target's prefix, whether it was made now (and the generation
    it replaced), how long it took, the extensions built and the project installed editable."""

    target: str
    prefix: Path
    built: bool  # False: it was already installed (maybe by a concurrent gpuenv)
    previous: Path | None  # the generation this install replaced, if any
    seconds: float
    builds: tuple[BuildOutcome, ...] = ()  # the compiled extensions, built or from the cache
    project: ProjectResult | None = None  # the project, installed editable


def request_for(
    loaded: LoadedSpec,
    locked: LockedTarget,
    options: LockOptions | None,
    sources: ArtifactSources,
    *,
    groups: tuple[str, ...] = (),
) -> InstallRequest:
    """What installing ``locked`` of the project ``loaded`` asks: the indexes (with their
    credentials, by the names lock gave uv) and the channels it was locked from, the
    project itself and ``groups``. ``options`` None: from ``sources`` alone, offline
    (``install --from``: the archive's artifacts, nothing else)."""
    spec = loaded.spec
    base = InstallRequest(
        target=locked,
        project=loaded.path.parent.absolute(),
        env_name=spec.project.name,
        toolkit=spec.stack.toolkit,
        sources=sources,
        offline=options is None,
    )
    if options is None:
        return base
    local = spec.local
    return replace(
        base,
        indexes=_locked_indexes(spec, locked, options),
        channels=spec.conda.channels if spec.conda else (),
        local=local,
        local_build=spec.pip.build.get(local.name) if local is not None else None,
        groups=groups,
    )


def _locked_indexes(spec: Spec, target: LockedTarget, options: LockOptions) -> tuple[Index, ...]:
    """The indexes (and their credentials) ``target`` was locked from, by the names lock
    gave uv: install declares the same (and the mirrors), so it authenticates exactly
    as lock did (URL credentials, ``UV_INDEX_<NAME>_*``, netrc, keyring)."""
    base = options.torch_index or spec.pip.torch_index
    torch = f"{base.rstrip('/')}/{target.stack.cu_tag}" if base else target.stack.index
    return pip_indexes(options.index_url or spec.pip.index_url, spec.pip.extra_index_urls, torch)


def uv_binary(request: InstallRequest) -> Path:
    if request.uv is not None:
        return request.uv
    from gpuenv._uvbin import find_uv

    return Path(find_uv())


def uv_env(store: Store, request: InstallRequest) -> dict[str, str]:
    """uv isolated from the user's configuration but with its network settings (the
    same function lock uses), the lock's index credentials, every cache in the store."""
    from gpuenv.install.headstart import uv_settings

    env = uv_settings(store, request.all_indexes, request.sources.mirrors)
    if request.offline:
        env["UV_OFFLINE"] = "1"
    return env


def storage_failure(text: str, path: Path, what: str) -> StorageError | None:
    """A tool's failure that was a full disk, a read-only store, a permission: the
    typed error naming ``path``, instead of the tool's own (misleading) summary."""
    found = os_error_in(text)
    return storage_error(found, path, what) if found is not None else None


def network_failure(what: str, text: str, request: InstallRequest) -> NetworkError | None:
    """``text`` (a tool's error output) as a NetworkError naming the index, if it is one."""
    failure = classify(text)
    if failure is None:
        return None
    error = network_error(
        failure,
        index=index_of(failure.url, request.all_indexes),
        mirrors=request.sources.mirrors,
        stderr_tail=redact(text),
    )
    error.message = f"target {request.target.name}: {what}: {error.message}"
    error.target = request.target.name
    return error
