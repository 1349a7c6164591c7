"""Installing a project's targets from a fresh lock: shared by ``gpuenv install`` and
``gpuenv add``/``remove`` (command modules do not import each other)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuenv.cli import _common

if TYPE_CHECKING:
    from gpuenv.install import InstallResult
    from gpuenv.lock.model import Lock
    from gpuenv.lock.options import LockOptions
    from gpuenv.spec import BuildOptions, LoadedSpec, Spec


def default_groups(spec: Spec) -> tuple[str, ...]:
    """The groups an install takes unless told: ``dev``, when there is one (as uv)."""
    from gpuenv.lock.extras import groups

    return ("dev",) if "dev" in groups(spec) else ()


def install_locked(
    loaded: LoadedSpec,
    lock: Lock,
    targets: tuple[str, ...],
    groups: tuple[str, ...],
    options: LockOptions,
    progress: Callable[[str], None],
) -> list[InstallResult]:
    """Install ``targets`` of a fresh ``lock`` (``gpuenv add`` installs through it too)."""
    from gpuenv._artifacts import ArtifactSources
    from gpuenv.install import InstallRequest, install_target
    from gpuenv.lock.project import install_indexes

    store = _common.store()
    results = []
    project = loaded.path.parent.absolute()
    for name in targets:
        locked = lock.target(name)
        assert locked is not None  # the caller locked every requested target
        request = InstallRequest(
            target=locked,
            project=project,
            env_name=loaded.spec.project.name,
            toolkit=loaded.spec.stack.toolkit,
            indexes=install_indexes(loaded.spec, locked, options),
            sources=ArtifactSources(mirrors=options.mirrors),
            channels=loaded.spec.conda.channels if loaded.spec.conda else (),
            local=loaded.spec.local,
            local_build=local_build(loaded.spec),
            groups=groups,
        )
        results.append(install_target(store, request, progress))
    return results


def local_build(spec: Spec) -> BuildOptions | None:
    local = spec.local
    return spec.pip.build.get(local.name) if local is not None else None
