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
    from gpuenv.spec import LoadedSpec, Spec


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
    from gpuenv.install import install_target, request_for

    store = _common.store()
    results = []
    for name in targets:
        locked = lock.target(name)
        assert locked is not None  # the caller locked every requested target
        sources = ArtifactSources(mirrors=options.mirrors)
        request = request_for(loaded, locked, options, sources, groups=groups)
        results.append(install_target(store, request, progress))
    return results
