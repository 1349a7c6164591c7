"""Materialise one target of the lock into a store prefix, from the lock only.

Order of a build, under the prefix's file lock:

1. an existing prefix without a matching completion marker is an interrupted build:
   it is moved to the trash;
2. conda records (Python among them, when the lock has it) are linked in by rattler
   from the exact URLs, hash-checked, through the shared package cache; otherwise a
   virtual environment is made by uv from an interpreter of the locked Python;
3. pip artifacts are installed by uv from their exact URLs with ``--require-hashes``
   and ``--no-deps`` (the lock is complete), through uv's shared cache (hard links):
   from the cache alone first (offline), online only when it lacks an artifact;
4. the CUDA toolkit, when the spec asks for one (or a build needs one), is located (the
   prefix's own, or a pinned system toolkit whose ``nvcc --version`` must match the
   locked CUDA);
5. the lock's builds (``gpuenv.builds``): each wheel from the build cache, or built now
   against the prefix's torch and cached by its identity, then installed by uv; a
   failing build fails the install (nothing is marked installed);
6. activation scripts and the run-time environment delta are written;
7. the completion marker is written, last; then the project's pointer moves (under
   the store's roots lock, the prefix lock still held, so gc never sees it unreferenced).

Every artifact is fetched from ``InstallRequest.sources.url_for(locked URL)``
(``gpuenv._artifacts``): the one place a locked, canonical URL becomes the URL fetched
(a file unpacked from an archive, a mirror). uv gets the same network settings and
index credentials as when the lock was made (``gpuenv._network.uv_environment``;
``InstallRequest.indexes``, by lock's names), rattler the same credentials as its
solve, so an authenticated index installs as it locked; a failure to reach an index
is a ``NetworkError`` naming it (exit 5).

Nothing outside the store, the caches in it and the project's ``.gpuenv/`` is written.
A write that fails for the machine's reasons (a full disk, a read-only store) is a
``StorageError`` naming the path, uv's and rattler's included: a full disk is never
reported as "no Python 3.11". Whatever stops a build (an error, Ctrl-C, SIGTERM)
removes the unmarked prefix before gpuenv exits; a SIGKILL leaves it for the next
install to remove.

The package, by concern: ``request`` (what an install asks, ``request_for``),
``pipeline`` (``install_target``: the order above), ``conda``, ``artifacts``, ``pip``
and ``toolkit`` (with activation). What other layers call is re-exported here.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuenv.install.pip import requirements_text
    from gpuenv.install.pipeline import (
        check_platform,
        install_locked,
        install_target,
        is_current,
        record_lock_state,
    )
    from gpuenv.install.request import InstallRequest, InstallResult, request_for
    from gpuenv.install.toolkit import cuda_home, jit_arch_list, write_activation

# Where each re-exported name lives: imported when first asked for, so that importing
# one module of the package (``install.headstart``, ``install.project``) does not
# import them all before ``gpuenv install`` has started uv.
_HOMES = {
    "requirements_text": "pip",
    "check_platform": "pipeline",
    "install_locked": "pipeline",
    "install_target": "pipeline",
    "is_current": "pipeline",
    "record_lock_state": "pipeline",
    "InstallRequest": "request",
    "InstallResult": "request",
    "request_for": "request",
    "cuda_home": "toolkit",
    "jit_arch_list": "toolkit",
    "write_activation": "toolkit",
}


def __getattr__(name: str) -> Any:
    """A re-exported name, from its module, kept here once asked for (as
    ``gpuenv.hardware`` does)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gpuenv.install' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"gpuenv.install.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "InstallRequest",
    "InstallResult",
    "check_platform",
    "cuda_home",
    "install_locked",
    "install_target",
    "is_current",
    "jit_arch_list",
    "record_lock_state",
    "request_for",
    "requirements_text",
    "write_activation",
]
