"""What ``gpuenv install`` and ``gpuenv add``/``remove`` share about installing (command
modules do not import each other); the installing itself is ``install.install_locked``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuenv.spec import Spec


def default_groups(spec: Spec) -> tuple[str, ...]:
    """The groups an install takes unless told: ``dev``, when there is one (as uv)."""
    from gpuenv.lock.extras import groups

    return ("dev",) if "dev" in groups(spec) else ()
