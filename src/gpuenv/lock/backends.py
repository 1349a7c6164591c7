"""The real resolvers a lock runs: uv for the pip half, rattler for the conda half.

``lock.project.ensure_lock`` and ``lock_and_write`` take a ``backends`` callable and
default to ``resolvers``, for every command that locks (lock, install, add, remove): tests
pass fakes as that argument, or replace ``resolvers`` for a whole command. The resolvers
are imported only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuenv.lock.model import CondaSolver, PipResolver


def resolvers() -> tuple[PipResolver, CondaSolver]:
    """uv and rattler, as every command that locks uses them."""
    from gpuenv.lock.rattler import RattlerSolver
    from gpuenv.lock.uv import UvResolver

    return UvResolver(), RattlerSolver()
